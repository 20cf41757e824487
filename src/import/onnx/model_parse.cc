#include "import/onnx/model_parse.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "ubfuse/error.h"
#include "ubfuse/onnx.h"
#include "util/read_file.h"

namespace ubfuse::onnx_import {

namespace {

// Field numbers from onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;
constexpr uint32_t kLengthDelimited = 2;
// The longest length-delimited field protobuf's parser takes (parse_context.h: INT_MAX - 16).
constexpr uint64_t kMaxLength = uint64_t(std::numeric_limits<int>::max()) - 16;

// A reader of protobuf's wire format over a byte range; every read reports failure rather than
// running past the end (the range may be anything a file holds).
struct Wire {
  const char* p;
  const char* end;

  // A varint of at most max_bytes bytes (10 holds any 64-bit value).
  bool varint(uint64_t& v, int max_bytes = 10) {
    v = 0;
    for (int i = 0; i < max_bytes && p < end; i++) {
      const auto b = static_cast<uint8_t>(*p++);
      v |= uint64_t(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) return true;
    }
    return false;
  }

  // The next field: its number, wire type, and its whole encoding [start, p) after the call;
  // for a length-delimited field also its payload.
  bool field(uint32_t& number, uint32_t& type, const char*& start, std::string_view& payload) {
    start = p;
    // Tags and lengths as protobuf reads them: at most 5 bytes, a tag within 32 bits, a length
    // within kMaxLength. What protobuf would read otherwise (it truncates a longer tag) is left
    // to its own parse: the walk fails.
    uint64_t tag = 0;
    if (!varint(tag, 5) || tag > std::numeric_limits<uint32_t>::max() || (tag >> 3) == 0)
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
      if (!varint(len, 5) || len > kMaxLength || len > uint64_t(end - p)) return false;
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

// What walk's `take` did with a field.
enum class Field { kCopy, kTaken, kBad };  // copy it as it is; written or dropped; stop the walk

// Copies the fields of the message in `in` to `out`, except those `take` takes: it is called
// with each field's number, wire type and payload. False where the bytes do not walk as protobuf
// or `take` says kBad.
template <typename Take>
bool walk(std::string_view in, std::string& out, const Take& take) {
  Wire w{in.data(), in.data() + in.size()};
  while (w.p < w.end) {
    uint32_t number = 0, type = 0;
    const char* start = nullptr;
    std::string_view payload;
    if (!w.field(number, type, start, payload)) return false;
    const Field f = take(number, type, payload);
    if (f == Field::kBad) return false;
    if (f == Field::kCopy) out.append(start, size_t(w.p - start));
  }
  return true;
}

// Writes message field `number` to `out` with its payload rewritten by strip(payload, body).
template <typename Strip>
Field put_stripped(std::string& out, uint32_t number, std::string_view payload,
                   const Strip& strip) {
  std::string body;
  if (!strip(payload, body)) return Field::kBad;
  put_message(out, number, body);
  return Field::kTaken;
}

// The TensorProto in `in` without its raw_data, which goes to `raw` (protobuf keeps the last
// occurrence of a field that is not repeated).
bool strip_tensor(std::string_view in, std::string& out, std::optional<std::string_view>& raw) {
  return walk(in, out, [&](uint32_t number, uint32_t type, std::string_view payload) {
    if (number != kTensorRawData || type != kLengthDelimited) return Field::kCopy;
    raw = payload;
    return Field::kTaken;
  });
}

bool strip_graph(std::string_view in, std::string& out,
                 std::vector<std::optional<std::string_view>>& raw) {
  return walk(in, out, [&](uint32_t number, uint32_t type, std::string_view payload) {
    if (number != kGraphInitializer || type != kLengthDelimited) return Field::kCopy;
    return put_stripped(out, number, payload, [&](std::string_view t, std::string& body) {
      return strip_tensor(t, body, raw.emplace_back());
    });
  });
}

// The ModelProto in `in` with the raw_data of its graph's initializers lifted into `raw`; false
// where the bytes do not walk as protobuf (the caller then parses them as they are, for
// protobuf's own verdict).
bool strip_model(std::string_view in, std::string& out,
                 std::vector<std::optional<std::string_view>>& raw) {
  return walk(in, out, [&](uint32_t number, uint32_t type, std::string_view payload) {
    if (number != kModelGraph || type != kLengthDelimited) return Field::kCopy;
    return put_stripped(out, number, payload, [&](std::string_view g, std::string& body) {
      return strip_graph(g, body, raw);
    });
  });
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
    // A raw_data the walk did not see as one (it cannot, by the rules above) would be read in
    // the parse and shadowed by a lifted one: then trust protobuf alone.
    bool seen = true;
    for (int i = 0; i < out.proto.graph().initializer_size(); i++) {
      seen = seen && !(out.raw[size_t(i)] && out.proto.graph().initializer(i).has_raw_data());
    }
    if (seen) return;
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
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(what + ": cannot open the file (it is a directory)");
  }
  if (stat_ok && S_ISREG(st.st_mode) && st.st_size > std::numeric_limits<int>::max()) {
    ::close(fd);
    throw OnnxUnsupportedError(what + ": models over 2 GiB must keep weights as external data");
  }
  size_ = stat_ok && S_ISREG(st.st_mode) ? size_t(st.st_size) : 0;
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (data_ == MAP_FAILED) data_ = nullptr;
  }
  if (data_ || (stat_ok && S_ISREG(st.st_mode) && size_ == 0)) {
    ::close(fd);
    return;
  }
  // A pipe or device, or a file that cannot be mapped: read it instead, from this descriptor (a
  // pipe opened again would wait for another writer).
  std::optional<std::string> bytes = read_whole_fd(fd);
  ::close(fd);
  if (!bytes) throw Error(what + ": cannot read the file");
  read_ = std::move(*bytes);
  size_ = read_.size();
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

std::string_view MappedFile::bytes() const {
  if (data_) return {static_cast<const char*>(data_), size_};
  return read_;
}

}  // namespace ubfuse::onnx_import
