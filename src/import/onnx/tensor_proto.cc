#include "import/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "ubfuse/onnx.h"

namespace ubfuse::onnx_import {

namespace {

namespace fs = std::filesystem;
using TP = onnx::TensorProto;

[[noreturn]] void bad(const std::string& what, const std::string& msg) {
  throw Error("ONNX tensor '" + what + "': " + msg);
}

// Where an external tensor's bytes are: `length` bytes at `offset` of `file`.
struct ExternalSpan {
  fs::path file;
  std::string location;  // as the model spells it, for errors
  int64_t offset = 0, length = 0;
};

// The span of an external data file a tensor names; the file must stay inside base_dir and hold
// the span.
ExternalSpan external_span(const TP& p, const std::string& what, const TensorReadOptions& o) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    auto parse = [&](const std::string& key) {
      size_t used = 0;
      int64_t v = -1;
      try {
        v = std::stoll(kv.value(), &used);
      } catch (...) {
        used = 0;
      }
      if (used != kv.value().size() || v < 0) {
        bad(what,
            "external_data '" + key + "' is not a non-negative integer: '" + kv.value() + "'");
      }
      return v;
    };
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      offset = parse("offset");
    } else if (kv.key() == "length") {
      length = parse("length");
    }  // "checksum" and others are informative
  }
  if (location.empty()) bad(what, "external data has no 'location'");
  fs::path rel(location);
  if (rel.is_absolute()) {
    bad(what, "external data location '" + location +
                  "' is absolute; it must be relative to the "
                  "model's folder");
  }
  fs::path base = fs::weakly_canonical(fs::path(o.base_dir.empty() ? "." : o.base_dir));
  fs::path full = fs::weakly_canonical(base / rel);
  auto [b_end, f_it] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (b_end != base.end()) {
    bad(what, "external data location '" + location + "' leaves the model's folder");
  }
  std::error_code ec;
  const auto file_size = fs::file_size(full, ec);
  if (ec) bad(what, "cannot open external data file '" + full.string() + "'");
  const int64_t size = int64_t(file_size);
  if (offset > size) {
    bad(what, "external data offset " + std::to_string(offset) + " is past the end of '" +
                  location + "' (" + std::to_string(size) + " bytes)");
  }
  if (length < 0) length = size - offset;
  if (length > size - offset) {
    bad(what, "external data [" + std::to_string(offset) + ", +" + std::to_string(length) +
                  ") runs past the end of '" + location + "' (" + std::to_string(size) + " bytes)");
  }
  return {full, location, offset, length};
}

// Reads the span into dst (its length in bytes), straight from the file.
void read_span(const ExternalSpan& e, const std::string& what, void* dst) {
  std::ifstream f(e.file, std::ios::binary);
  if (!f) bad(what, "cannot open external data file '" + e.file.string() + "'");
  f.seekg(e.offset);
  f.read(static_cast<char*>(dst), e.length);
  if (!f) bad(what, "reading external data file '" + e.location + "' failed");
}

template <typename Field>
void check_count(const Field& f, int64_t n, const std::string& what, const char* field) {
  if (int64_t(f.size()) != n) {
    bad(what, std::string("field ") + field + " has " + std::to_string(f.size()) +
                  " values, the dims need " + std::to_string(n));
  }
}

// Checks the typed field that holds a tensor of `type` without raw data carries n values.
void check_typed_count(const onnx::TensorProto& p, int32_t type, int64_t n,
                       const std::string& what) {
  using TP = onnx::TensorProto;
  switch (type) {
    case TP::FLOAT:
      return check_count(p.float_data(), n, what, "float_data");
    case TP::DOUBLE:
      return check_count(p.double_data(), n, what, "double_data");
    case TP::INT64:
      return check_count(p.int64_data(), n, what, "int64_data");
    default:  // INT32, INT8, UINT8, BOOL, FLOAT16, BFLOAT16 (each value in an int32)
      return check_count(p.int32_data(), n, what, "int32_data");
  }
}

}  // namespace

std::string onnx_type_name(int32_t t) {
  if (!TP::DataType_IsValid(t)) return "invalid(" + std::to_string(t) + ")";
  return TP::DataType_Name(static_cast<TP::DataType>(t));
}

DType dtype_from_onnx(int32_t t, const std::string& what) {
  switch (t) {
    case TP::FLOAT:
      return DType::f32;
    case TP::FLOAT16:
      return DType::f16;
    case TP::BFLOAT16:
      return DType::bf16;
    case TP::INT64:
      return DType::i64;
    case TP::INT32:
      return DType::i32;
    case TP::INT8:
      return DType::i8;
    case TP::UINT8:
      return DType::u8;
    case TP::BOOL:
      return DType::boolean;
    default:
      break;
  }
  throw OnnxUnsupportedError(what + ": element type " + onnx_type_name(t) +
                             " is not supported; supported: FLOAT, FLOAT16, BFLOAT16, INT64, "
                             "INT32, INT8, UINT8, BOOL (DOUBLE initializers are converted to "
                             "FLOAT)");
}

Tensor tensor_from_proto(const TP& p, const std::string& what, const TensorReadOptions& o,
                         const std::optional<std::string_view>& lifted_raw) {
  if (p.has_segment())
    throw OnnxUnsupportedError("ONNX tensor '" + what + "': segments are not supported");
  Sizes sizes;
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) bad(what, "has a negative dim " + std::to_string(d));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 16 / d) bad(what, "dims overflow");
    n *= d;
    sizes.push_back(d);
  }
  const int32_t type = p.data_type();
  if (type == TP::UNDEFINED) bad(what, "data_type is UNDEFINED");
  if (!TP::DataType_IsValid(type))
    bad(what, "data_type " + std::to_string(type) + " is not a valid ONNX type");
  const bool is_f64 = type == TP::DOUBLE;
  DType dt = is_f64 ? DType::f32 : dtype_from_onnx(type, "ONNX tensor '" + what + "'");
  const size_t item = is_f64 ? 8 : dtype_size(dt);

  // External data is read straight into the tensor (f64 through a buffer, to convert it).
  std::optional<ExternalSpan> external;
  std::optional<std::string_view> raw;
  if (p.data_location() == TP::EXTERNAL) {
    external = external_span(p, what, o);
  } else if (p.data_location() != TP::DEFAULT) {
    bad(what, "data_location " + std::to_string(p.data_location()) + " is not valid");
  } else if (lifted_raw) {
    raw = lifted_raw;
  } else if (p.has_raw_data()) {
    raw = p.raw_data();
  }

  // The data must match the dims before the tensor is allocated: a proto may declare dims far
  // beyond what it carries (fuzz_onnx, crash-693cb3ab: petabytes from a few bytes).
  if (external || raw) {
    const size_t have = external ? size_t(external->length) : raw->size();
    if (have != size_t(n) * item) {
      bad(what, std::string(external ? "external data" : "raw data") + " has " +
                    std::to_string(have) + " bytes, the dims and type need " +
                    std::to_string(size_t(n) * item));
    }
  } else {
    check_typed_count(p, type, n, what);
  }
  std::string external_f64;
  if (external && is_f64) {
    external_f64.resize(size_t(external->length));
    read_span(*external, what, external_f64.data());
    raw = external_f64;
  }
  Tensor t(dt, sizes);
  if (external && !is_f64) {
    if (n) read_span(*external, what, t.data());
  } else if (raw) {
    if (is_f64) {
      for (int64_t i = 0; i < n; i++) {
        double v;
        std::memcpy(&v, raw->data() + size_t(i) * 8, 8);
        t.data_as<float>()[i] = float(v);
      }
    } else if (n) {
      std::memcpy(t.data(), raw->data(), raw->size());
    }
  } else {
    switch (type) {
      case TP::FLOAT:
        for (int64_t i = 0; i < n; i++) t.data_as<float>()[i] = p.float_data(int(i));
        break;
      case TP::DOUBLE:
        for (int64_t i = 0; i < n; i++) t.data_as<float>()[i] = float(p.double_data(int(i)));
        break;
      case TP::INT64:
        for (int64_t i = 0; i < n; i++) t.data_as<int64_t>()[i] = p.int64_data(int(i));
        break;
      case TP::INT32:
        for (int64_t i = 0; i < n; i++) t.data_as<int32_t>()[i] = p.int32_data(int(i));
        break;
      case TP::BOOL:
        for (int64_t i = 0; i < n; i++) t.data_as<uint8_t>()[i] = p.int32_data(int(i)) != 0;
        break;
      case TP::INT8:  // one value per int32, as ONNX stores the narrow integers
        for (int64_t i = 0; i < n; i++) t.data_as<int8_t>()[i] = int8_t(p.int32_data(int(i)));
        break;
      case TP::UINT8:
        for (int64_t i = 0; i < n; i++) t.data_as<uint8_t>()[i] = uint8_t(p.int32_data(int(i)));
        break;
      case TP::FLOAT16:
      case TP::BFLOAT16:  // the 16 bits sit in the low half of each int32
        for (int64_t i = 0; i < n; i++) {
          t.data_as<uint16_t>()[i] = uint16_t(uint32_t(p.int32_data(int(i))) & 0xffffu);
        }
        break;
      default:
        UBF_CHECK(false, "tensor_from_proto: type passed dtype_from_onnx");
    }
  }
  if (dt == DType::boolean) {  // normalize raw bytes to 0/1
    for (int64_t i = 0; i < n; i++) t.data_as<uint8_t>()[i] = t.data_as<uint8_t>()[i] != 0;
  }
  if (is_f64 && o.notes) o.notes->push_back("tensor '" + what + "': DOUBLE converted to FLOAT");
  return t;
}

}  // namespace ubfuse::onnx_import

namespace ubfuse {

Tensor load_onnx_tensor(const std::string& path, std::string* name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("ONNX tensor file '" + path + "': cannot open the file");
  onnx::TensorProto p;
  if (!p.ParseFromIstream(&f)) {
    throw Error("ONNX tensor file '" + path + "': not a valid TensorProto (protobuf parse failed)");
  }
  if (name) *name = p.name();
  onnx_import::TensorReadOptions o;
  o.base_dir = std::filesystem::path(path).parent_path().string();
  return onnx_import::tensor_from_proto(p, p.name().empty() ? path : p.name(), o);
}

}  // namespace ubfuse
