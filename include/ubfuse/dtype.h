// Element types. Storage types f32/bf16/f16 are computed in f32; i64/i32/bool serve indices,
// shapes and masks; i8/u8 hold quantized tensors (movement ops, Cast and the quantization ops).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ubfuse {

enum class DType : uint8_t { f32, bf16, f16, i64, i32, boolean, i8, u8 };

inline constexpr DType f32 = DType::f32;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType f16 = DType::f16;
inline constexpr DType i64 = DType::i64;
inline constexpr DType i32 = DType::i32;
inline constexpr DType boolean = DType::boolean;
inline constexpr DType i8 = DType::i8;
inline constexpr DType u8 = DType::u8;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses "f32", "float32", "bf16", "f16", "float16", "i64", "i32", "i8", "int8", "u8", "uint8",
// "bool"; throws on others.
DType parse_dtype(std::string_view s);
inline bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }
// The 8-bit integers of quantized models: data movement, Cast, the integer elementwise arithmetic
// and comparisons and the quantization ops take them (shape inference says so for the others).
inline bool is_int8(DType t) { return t == DType::i8 || t == DType::u8; }

// Scalar conversions (round to nearest even, NaN preserved). bf16 has no subnormals in ubfuse: a
// subnormal f32 becomes a zero of its sign, as the CPUs' own conversion (x86 VCVTNEPS2BF16) does,
// on every path (kernels' stores, casts, Tensor::set, the reference), so results do not depend on
// the CPU. A bf16 subnormal read from user data (raw bytes) still loads exactly.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  if ((u & 0x7f800000u) == 0) return uint16_t((u >> 16) & 0x8000u);        // flush to +-0
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace ubfuse
