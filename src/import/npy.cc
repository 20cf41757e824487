#include "ubfuse/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "ubfuse/error.h"
#include "util/read_file.h"

namespace ubfuse {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw Error(".npy '" + what + "': " + msg);
}

// A tiny reader for the header's Python dict literal: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }. Only the three standard keys matter; others are rejected (numpy writes none).
class HeaderParser {
 public:
  HeaderParser(const std::string& s, const std::string& what) : s_(s), what_(what) {}

  void parse(std::string* descr, bool* fortran, Sizes* shape) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = quoted("a dict key");
      expect(':');
      if (key == "descr") {
        *descr = quoted("field 'descr'");
        seen_descr = true;
      } else if (key == "fortran_order") {
        *fortran = boolean();
        seen_fortran = true;
      } else if (key == "shape") {
        *shape = tuple();
        seen_shape = true;
      } else {
        fail(what_, "header has unknown field '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') {
        pos_++;
        continue;
      }
      if (peek() != '}')
        fail(what_, "header: expected ',' or '}' at offset " + std::to_string(pos_));
    }
    if (!seen_descr) fail(what_, "header lacks field 'descr'");
    if (!seen_fortran) fail(what_, "header lacks field 'fortran_order'");
    if (!seen_shape) fail(what_, "header lacks field 'shape'");
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) pos_++;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) {
      fail(what_, std::string("header: expected '") + c + "' at offset " + std::to_string(pos_));
    }
    pos_++;
  }
  std::string quoted(const std::string& field) {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') fail(what_, "header: " + field + " must be a quoted string");
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) fail(what_, "header: unterminated string in " + field);
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_ws();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail(what_, "header: field 'fortran_order' must be True or False");
  }
  Sizes tuple() {
    expect('(');
    Sizes out;
    while (true) {
      skip_ws();
      if (peek() == ')') {
        pos_++;
        return out;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) {
        fail(what_, "header: field 'shape' must be a tuple of non-negative integers");
      }
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) {
          fail(what_, "header: a dim in field 'shape' is too large");
        }
        v = v * 10 + (s_[pos_++] - '0');
      }
      // Python longs may carry an 'L' suffix in files written by Python 2.
      if (peek() == 'L') pos_++;
      out.push_back(v);
      skip_ws();
      if (peek() == ',') pos_++;
    }
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

struct DescrInfo {
  const char* descr;
  DType dtype;
  size_t item;
};

constexpr DescrInfo kDescrs[] = {
    {"<f4", DType::f32, 4}, {"<f2", DType::f16, 2},     {"<i8", DType::i64, 8},
    {"<i4", DType::i32, 4}, {"|b1", DType::boolean, 1}, {"<u2", DType::bf16, 2},
    {"|i1", DType::i8, 1},  {"|u1", DType::u8, 1},
};

uint32_t read_le(const std::string& b, size_t at, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | static_cast<unsigned char>(b[at + size_t(i)]);
  return v;
}

}  // namespace

std::string npy_descr(DType t) {
  for (auto& d : kDescrs) {
    if (d.dtype == t) return d.descr;
  }
  UBF_CHECK(false, "npy_descr: unhandled dtype");
}

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < kMagicLen + 4 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0) {
    fail(what, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = read_le(bytes, 8, 2);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(what, "truncated header");
    header_len = read_le(bytes, 8, 4);
    header_at = 12;
  } else {
    fail(what, "unsupported format version " + std::to_string(major) + " (supported: 1, 2, 3)");
  }
  if (header_len > bytes.size() - header_at) fail(what, "truncated header");
  std::string header = bytes.substr(header_at, header_len);
  std::string descr;
  bool fortran = false;
  Sizes shape;
  HeaderParser(header, what).parse(&descr, &fortran, &shape);
  if (fortran) {
    fail(what,
         "field 'fortran_order' is True; only C order is supported (hint: save "
         "np.ascontiguousarray(a))");
  }
  size_t data_at = header_at + header_len;
  size_t avail = bytes.size() - data_at;
  int64_t n = 1;
  for (auto d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      fail(what, "field 'shape' overflows");
    n *= d;
  }
  if (descr == "<f8") {  // numpy's default float dtype: converted to f32
    if (uint64_t(n) > avail / 8) fail(what, "data is truncated for shape " + sizes_str(shape));
    Tensor t(DType::f32, shape);
    float* out = t.data_as<float>();
    for (int64_t i = 0; i < n; i++) {
      double v;
      std::memcpy(&v, bytes.data() + data_at + size_t(i) * 8, 8);
      out[i] = float(v);
    }
    return t;
  }
  for (auto& d : kDescrs) {
    if (descr != d.descr) continue;
    if (uint64_t(n) > avail / d.item) {
      fail(what, "data is truncated: shape " + sizes_str(shape) + " of '" + descr + "' needs " +
                     std::to_string(uint64_t(n) * d.item) + " bytes, file has " +
                     std::to_string(avail));
    }
    Tensor t(d.dtype, shape);
    if (n) std::memcpy(t.data(), bytes.data() + data_at, size_t(n) * d.item);
    if (d.dtype == DType::boolean) {
      auto* p = t.data_as<uint8_t>();
      for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
    }
    return t;
  }
  fail(what, "field 'descr' is '" + descr +
                 "', which ubfuse does not read; supported: '<f4', '<f2', '<i8', '<i4', '|i1', "
                 "'|u1', '|b1', '<u2' (bf16 bits), '<f8' (converted to f32)");
}

Tensor read_npy(const std::string& path) {
  std::optional<std::string> bytes = read_whole_file(path);
  if (!bytes) throw Error(".npy '" + path + "': cannot open the file");
  return parse_npy(*bytes, path);
}

std::string to_npy_bytes(const Tensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.sizes().size(); i++) {
    shape += std::to_string(t.sizes()[i]) + (t.sizes().size() == 1 ? "," : "");
    if (i + 1 < t.sizes().size()) shape += ", ";
  }
  shape += ")";
  std::string dict =
      "{'descr': '" + npy_descr(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and end with '\n' so that the data starts 64-byte aligned.
  size_t prefix = dict.size() + 1 + 10 > 65535 ? 12 : 10;
  size_t total = ((prefix + dict.size() + 1 + 63) / 64) * 64;
  std::string header = dict + std::string(total - prefix - dict.size() - 1, ' ') + "\n";
  std::string out(kMagic, kMagicLen);
  if (prefix == 10) {
    out += char(1);
    out += char(0);
    out += char(header.size() & 0xff);
    out += char((header.size() >> 8) & 0xff);
  } else {
    out += char(2);
    out += char(0);
    for (int i = 0; i < 4; i++) out += char((header.size() >> (8 * i)) & 0xff);
  }
  out += header;
  out.append(static_cast<const char*>(t.data()), t.nbytes());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(".npy '" + path + "': cannot create the file");
  std::string b = to_npy_bytes(t);
  f.write(b.data(), std::streamsize(b.size()));
  if (!f) throw Error(".npy '" + path + "': write failed");
}

}  // namespace ubfuse
