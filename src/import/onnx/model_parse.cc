#include "import/onnx/model_parse.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <limits>

#include "ubfuse/error.h"
#include "ubfuse/onnx.h"

namespace ubfuse::onnx_import {

namespace {

// Field numbers from onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;
constexpr uint32_t kLengthDelimited = 2;

// A reader of protobuf's wire format over a byte range; every read reports failure rather than
// running past the end (the range may be anything a file holds).
struct Wire {
  const char* p;
  const char* end;

  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const auto b = static_cast<uint8_t>(*p++);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }

  // The next field: its number, wire type, and its whole encoding [start, p) after the call;
  // for a length-delimited field also its payload.
  bool field(uint32_t& number, uint32_t& type, const char*& start, std::string_view& payload) {
    start = p;
    uint64_t tag = 0;
    if (!varint(tag) || (tag >> 3) == 0 || (tag >> 3) > std::numeric_limits<uint32_t>::max())
      return false;
    number = uint32_t(tag >> 3);
    type = uint32_t(tag & 7);
    // Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32. Groups (3, 4) are not in
    // onnx.proto, and 6 and 7 are invalid.
    uint64_t len = 0;
    if (type == 0) return varint(len);
    if (type == 1) {
      len = 8;
    } else if (type == 5) {
      len = 4;
    } else if (type == kLengthDelimited) {
      if (!varint(len) || len > uint64_t(end - p)) return false;
      payload = {p, size_t(len)};
    } else {
      return false;
    }
    if (len > uint64_t(end - p)) return false;
    p += len;
    return true;
  }
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

void put_message(std::string& out, uint32_t number, const std::string& body) {
  put_varint(out, (uint64_t(number) << 3) | kLengthDelimited);
  put_varint(out, body.size());
  out += body;
}

// The TensorProto in `in` without its raw_data, which goes to `raw` (protobuf keeps the last
// occurrence of a field that is not repeated).
bool strip_tensor(std::string_view in, std::string& out, std::optional<std::string_view>& raw) {
  Wire w{in.data(), in.data() + in.size()};
  while (w.p < w.end) {
    uint32_t number = 0, type = 0;
    const char* start = nullptr;
    std::string_view payload;
    if (!w.field(number, type, start, payload)) return false;
    if (number == kTensorRawData && type == kLengthDelimited) {
      raw = payload;
    } else {
      out.append(start, size_t(w.p - start));
    }
  }
  return true;
}

bool strip_graph(std::string_view in, std::string& out,
                 std::vector<std::optional<std::string_view>>& raw) {
  Wire w{in.data(), in.data() + in.size()};
  while (w.p < w.end) {
    uint32_t number = 0, type = 0;
    const char* start = nullptr;
    std::string_view payload;
    if (!w.field(number, type, start, payload)) return false;
    if (number == kGraphInitializer && type == kLengthDelimited) {
      std::string tensor;
      raw.emplace_back();
      if (!strip_tensor(payload, tensor, raw.back())) return false;
      put_message(out, number, tensor);
    } else {
      out.append(start, size_t(w.p - start));
    }
  }
  return true;
}

// The ModelProto in `in` with the raw_data of its graph's initializers lifted into `raw`; false
// where the bytes do not walk as protobuf (the caller then parses them as they are, for
// protobuf's own verdict).
bool strip_model(std::string_view in, std::string& out,
                 std::vector<std::optional<std::string_view>>& raw) {
  Wire w{in.data(), in.data() + in.size()};
  while (w.p < w.end) {
    uint32_t number = 0, type = 0;
    const char* start = nullptr;
    std::string_view payload;
    if (!w.field(number, type, start, payload)) return false;
    if (number == kModelGraph && type == kLengthDelimited) {
      std::string graph;
      if (!strip_graph(payload, graph, raw)) return false;
      put_message(out, number, graph);
    } else {
      out.append(start, size_t(w.p - start));
    }
  }
  return true;
}

}  // namespace

void parse_model_bytes(std::string_view bytes, const std::string& what, ParsedModel& out) {
  if (bytes.size() > size_t(std::numeric_limits<int>::max())) {
    throw OnnxUnsupportedError(what + ": models over 2 GiB must keep weights as external data");
  }
  std::string stripped;
  out.raw.clear();
  if (strip_model(bytes, stripped, out.raw) && out.proto.ParseFromString(stripped) &&
      out.proto.graph().initializer_size() == int(out.raw.size())) {
    return;
  }
  // Not walkable as the fields above (or parsed into another count of initializers): parse it
  // whole, copying the weights, so that protobuf decides what it is.
  out.raw.clear();
  out.proto.Clear();
  if (!out.proto.ParseFromArray(bytes.data(), int(bytes.size()))) {
    throw Error(what + ": not a valid ONNX model (protobuf parse failed)");
  }
}

MappedFile::MappedFile(const std::string& path, bool populate) {
  const std::string what = "ONNX model '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(what + ": cannot open the file");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(what + ": cannot open the file (not a regular file)");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      ::close(fd);
      throw Error(what + ": cannot map the file into memory");
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace ubfuse::onnx_import
