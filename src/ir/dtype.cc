#include "ubfuse/dtype.h"

#include <cmath>

#include "ubfuse/error.h"

namespace ubfuse {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::bf16:
      return 2;
    case DType::f16:
      return 2;
    case DType::i64:
      return 8;
    case DType::i32:
      return 4;
    case DType::boolean:
    case DType::i8:
    case DType::u8:
      return 1;
  }
  UBF_CHECK(false, "bad dtype");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::i64:
      return "i64";
    case DType::i32:
      return "i32";
    case DType::boolean:
      return "bool";
    case DType::i8:
      return "i8";
    case DType::u8:
      return "u8";
  }
  UBF_CHECK(false, "bad dtype");
}

DType parse_dtype(std::string_view s) {
  if (s == "f32" || s == "float32" || s == "float") return DType::f32;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "i64" || s == "int64") return DType::i64;
  if (s == "i32" || s == "int32") return DType::i32;
  if (s == "i8" || s == "int8") return DType::i8;
  if (s == "u8" || s == "uint8") return DType::u8;
  if (s == "bool" || s == "boolean") return DType::boolean;
  throw Error("unknown dtype '" + std::string(s) +
              "'; valid: f32, bf16, f16, i64, i32, i8, u8, bool");
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x47800000u) return uint16_t(sign | 0x7c00u);  // >= 65536: inf (65520.. rounds below)
  if (a < 0x38800000u) {                                  // subnormal or zero in f16
    if (a < 0x33000000u) return uint16_t(sign);           // rounds to zero
    uint32_t e = a >> 23;
    uint32_t man = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 113 - e + 13
    uint32_t half = 1u << (shift - 1);
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t r = man >> shift;
    if (rem > half || (rem == half && (r & 1u))) r++;
    return uint16_t(sign | r);
  }
  uint32_t r = ((a >> 13) - (112u << 10));
  uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
  return uint16_t(sign | r);
}

}  // namespace ubfuse
