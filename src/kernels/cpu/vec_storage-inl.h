// Storage dtypes <-> f32 vectors for the eager kernels, generated fused kernels and the tile
// interpreter: scalar f16 conversions, and loads, stores and non-temporal stores of f32 / bf16 /
// f16 / bool (uint8) storage as vectors of f32 lanes, with partial (first n lanes) forms.
// Included by vecmath.h, whose math works on the vectors these produce.
//
// A Highway per-target header like vecmath.h: it may be included once per target
// (foreach_target.h) or once for the static target; it depends only on Highway headers.

// Per-target include guard (Highway idiom): toggled each time foreach_target re-includes us.
#if defined(UBFUSE_KERNELS_CPU_VEC_STORAGE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_VEC_STORAGE_INL_H_
#undef UBFUSE_KERNELS_CPU_VEC_STORAGE_INL_H_
#else
#define UBFUSE_KERNELS_CPU_VEC_STORAGE_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------------------------------------
// Scalar storage conversions (target-independent code, but defined per target so the header stays
// a pure per-target header).

// f32 -> IEEE half bits, round to nearest even; overflow -> inf, NaN -> quiet NaN.
HWY_INLINE uint16_t F16BitsFromF32(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (ax < 0x38800000u) {                                  // below the smallest normal half
    if (ax < 0x33000000u) return uint16_t(sign);           // < 2^-25: rounds to zero
    const uint32_t e = ax >> 23;                           // 102..112
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24: m >> shift is in units of 2^-24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

// IEEE half bits -> f32 (exact).
HWY_INLINE float F32FromF16Bits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0) {
    float f = float(m) * (1.0f / 16777216.0f);  // m * 2^-24
    memcpy(&x, &f, 4);
    x |= sign;
  } else if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

// ---------------------------------------------------------------------------------------------
// Loads and stores: storage dtype f32 / bf16 / f16 / bool (uint8) <-> f32 vector of Lanes(d).
// Pointers need no alignment unless the name says Stream (aligned to the stored bytes' width).

// Loads Lanes(d) floats.
template <class D>
HWY_INLINE hn::VFromD<D> LoadF32(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
// Loads Lanes(d) bf16 values widened to f32 (exact).
template <class D>
HWY_INLINE hn::VFromD<D> LoadF32(D d, const hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::RebindToUnsigned<D> du32;
  const auto bits = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
  return hn::BitCast(d, hn::ShiftLeft<16>(bits));
}
// Loads Lanes(d) f16 values widened to f32 (exact).
template <class D>
HWY_INLINE hn::VFromD<D> LoadF32(D d, const hwy::float16_t* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const hn::Rebind<hwy::float16_t, D> df16;
  return hn::PromoteTo(d, hn::LoadU(df16, p));
#else
  HWY_ALIGN float tmp[hn::MaxLanes(d)];
  const uint16_t* u = reinterpret_cast<const uint16_t*>(p);
  for (size_t i = 0; i < hn::Lanes(d); ++i) tmp[i] = F32FromF16Bits(u[i]);
  return hn::Load(d, tmp);
#endif
}

// Loads Lanes(d) bools (uint8 0/1, how tensors store bool) as 0/1 floats.
template <class D>
HWY_INLINE hn::VFromD<D> LoadF32(D d, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, D> du8;
  const hn::RebindToSigned<D> di32;
  return hn::ConvertTo(
      d, hn::BitCast(di32, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(du8, p))));
}

// Loads Lanes(d) int32 values converted to f32, rounded to nearest even past 2^24 as a Cast does
// (fused kernels read i32 inputs only through a Cast to f32: MatMulInteger's output).
template <class D>
HWY_INLINE hn::VFromD<D> LoadF32(D d, const int32_t* HWY_RESTRICT p) {
  return hn::ConvertTo(d, hn::LoadU(hn::RebindToSigned<D>(), p));
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && !defined(__AVX512BF16__) && \
    (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
namespace detail {
// Whether the CPU has AVX512_BF16 (checked once at load time): the dispatched AVX-512 code then
// narrows with VCVTNEPS2BF16 through inline asm (no compiler target flag needed).
inline const bool kCpuHasAvx512Bf16 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") != 0;
}();
}  // namespace detail
#endif

// f32 lanes rounded to bf16 the way ubfuse stores bf16 (include/ubfuse/dtype.h): nearest even,
// a NaN stays a quiet NaN, a subnormal becomes its sign's zero (as VCVTNEPS2BF16 makes it). The
// bf16 bits are each 32-bit lane's upper half; the lower half is unspecified. 11 integer and
// compare operations, no narrowing: a caller that interleaves two vectors' halves (even/odd
// lanes) shifts and masks them into place without demoting to 16-bit lanes and widening again.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> BF16HighBitsFromF32V(D d, hn::VFromD<D> v) {
  (void)d;
  const hn::RebindToUnsigned<D> du32;
  const auto u = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  auto r = hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), lsb));
  r = hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), hn::Or(u, hn::Set(du32, 0x400000u)), r);
  const auto exponent = hn::And(u, hn::Set(du32, 0x7f800000u));
  return hn::IfThenElse(hn::Eq(exponent, hn::Zero(du32)), hn::And(u, hn::Set(du32, 0x80000000u)),
                        r);
}

// Narrows f32 lanes to bf16 bits with round-to-nearest-even (Highway 1.0.3's DemoteTo truncates)
// and subnormals flushed to signed zero (ubfuse's bf16 rule, include/ubfuse/dtype.h). One
// VCVTNEPS2BF16 where the CPU has AVX512_BF16 (it flushes them itself), else
// BF16HighBitsFromF32V and a narrowing: every target stores the same bits.
template <class D>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, D>> BF16BitsFromF32V(D d, hn::VFromD<D> v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && defined(__AVX512BF16__)
  // Compiled for a CPU with AVX512_BF16 (e.g. generated code with -march=native).
  if constexpr (hn::MaxLanes(D()) == 16) {
    return hn::Vec256<uint16_t>{(__m256i)_mm512_cvtneps_pbh(v.raw)};
  }
#elif HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
  if constexpr (hn::MaxLanes(D()) == 16) {
    if (detail::kCpuHasAvx512Bf16) {
      __m256i r;
      asm("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(v.raw));
      return hn::Vec256<uint16_t>{r};
    }
  }
#endif
  const hn::RebindToSigned<D> di32;
  const hn::Rebind<uint16_t, D> du16;
  const auto r = hn::ShiftRight<16>(BF16HighBitsFromF32V(d, v));
  return hn::DemoteTo(du16, hn::BitCast(di32, r));  // values < 2^16: exact
}

// Stores Lanes(d) floats.
template <class D>
HWY_INLINE void StoreF32(hn::VFromD<D> v, D d, float* HWY_RESTRICT p) {
  hn::StoreU(v, d, p);
}
// Stores Lanes(d) values rounded to bf16 (nearest even).
template <class D>
HWY_INLINE void StoreF32(hn::VFromD<D> v, D d, hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, D> du16;
  hn::StoreU(BF16BitsFromF32V(d, v), du16, reinterpret_cast<uint16_t*>(p));
}
// Stores Lanes(d) values rounded to f16 (nearest even; overflow -> inf).
template <class D>
HWY_INLINE void StoreF32(hn::VFromD<D> v, D d, hwy::float16_t* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)d;
  const hn::Rebind<hwy::float16_t, D> df16;
  hn::StoreU(hn::DemoteTo(df16, v), df16, p);
#else
  HWY_ALIGN float tmp[hn::MaxLanes(d)];
  hn::Store(v, d, tmp);
  uint16_t* u = reinterpret_cast<uint16_t*>(p);
  for (size_t i = 0; i < hn::Lanes(d); ++i) u[i] = F16BitsFromF32(tmp[i]);
#endif
}

// Stores Lanes(d) values as bools (uint8: 1 where nonzero or NaN, else 0).
template <class D>
HWY_INLINE void StoreF32(hn::VFromD<D> v, D d, uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, D> du8;
  const hn::RebindToSigned<D> di32;
  const auto bits =
      hn::IfThenElseZero(hn::RebindMask(di32, hn::Ne(v, hn::Zero(d))), hn::Set(di32, 1));
  hn::StoreU(hn::DemoteTo(du8, bits), du8, p);
}

// Non-temporal store of Lanes(d) floats; p aligned to the vector width. Call hwy::FlushStream()
// before other threads read the data.
template <class D>
HWY_INLINE void StreamF32(hn::VFromD<D> v, D d, float* HWY_RESTRICT p) {
  hn::Stream(v, d, p);
}
// Non-temporal store as bf16; p aligned to Lanes(d) * 2 bytes.
template <class D>
HWY_INLINE void StreamF32(hn::VFromD<D> v, D d, hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, D> du16;
  hn::Stream(BF16BitsFromF32V(d, v), du16, reinterpret_cast<uint16_t*>(p));
}
// Non-temporal store as f16 (plain store where the target has no F16C); p aligned to Lanes*2.
template <class D>
HWY_INLINE void StreamF32(hn::VFromD<D> v, D d, hwy::float16_t* HWY_RESTRICT p) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)d;
  const hn::Rebind<hwy::float16_t, D> df16;
  const hn::Rebind<uint16_t, D> du16;
  hn::Stream(hn::BitCast(du16, hn::DemoteTo(df16, v)), du16, reinterpret_cast<uint16_t*>(p));
#else
  StoreF32(v, d, p);
#endif
}
// Bools (a quarter of a vector's bytes, rarely aligned for a stream): a plain store.
template <class D>
HWY_INLINE void StreamF32(hn::VFromD<D> v, D d, uint8_t* HWY_RESTRICT p) {
  StoreF32(v, d, p);
}

// StorePairF32's general form: two stores.
template <class D, typename T>
HWY_INLINE void StorePairF32Separately(hn::VFromD<D> a, hn::VFromD<D> b, D d, T* HWY_RESTRICT p,
                                       bool nt) {
  if (nt) {
    StreamF32(a, d, p);
    StreamF32(b, d, p + hn::Lanes(d));
  } else {
    StoreF32(a, d, p);
    StoreF32(b, d, p + hn::Lanes(d));
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
namespace detail {
// One 64-byte store of v at p; non-temporal when nt (p then 64-byte aligned).
HWY_INLINE void Store64Bytes(__m512i v, void* HWY_RESTRICT p, bool nt) {
  if (nt) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}
}  // namespace detail
#endif

// Stores a at p and b at p + Lanes(d), as StoreF32 / StreamF32 (nt) would: the same bits. For
// bf16 on a CPU with AVX512_BF16, one VCVTNE2PS2BF16 narrows both (it costs what VCVTNEPS2BF16
// costs for one: about two FMA slots) and one 64-byte store writes them. Generated kernels pair
// their unrolled steps' bf16 outputs so (7-9% faster seed block in cache), as do the eager
// elementwise loops (MapStore). With nt, p is aligned to the pair's bytes.
template <class D, typename T>
HWY_INLINE void StorePairF32(hn::VFromD<D> a, hn::VFromD<D> b, D d, T* HWY_RESTRICT p, bool nt) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && (HWY_COMPILER_GCC || HWY_COMPILER_CLANG)
  if constexpr (hn::MaxLanes(D()) == 16 && hwy::IsSame<T, hwy::bfloat16_t>()) {
    __m512i both;  // a in the low half
#if defined(__AVX512BF16__)
    both = (__m512i)_mm512_cvtne2ps_pbh(b.raw, a.raw);
#else
    if (!detail::kCpuHasAvx512Bf16) return StorePairF32Separately(a, b, d, p, nt);
    // The dispatched (eager) code, as BF16BitsFromF32V.
    asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(both) : "v"(b.raw), "v"(a.raw));
#endif
    return detail::Store64Bytes(both, p, nt);
  }
#endif
  StorePairF32Separately(a, b, d, p, nt);
}

// bf16 in even/odd lanes: 2 * Lanes(d) bf16 elements load with one load and one shift or AND per
// vector (the even elements in the first vector, the odd in the second) instead of a
// zero-extension and a shift, and store back interleaved. Used where lane order does not matter:
// generated kernels whose column inputs and outputs are all bf16 (their UB slots hold the same
// order, so every pass agrees) and eager bf16 elementwise loops on targets without AVX-512.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "bf16 lane pairs assume little endian");
template <class D>
HWY_INLINE void LoadEvenOddBf16(D d, const hwy::bfloat16_t* HWY_RESTRICT p, hn::VFromD<D>& even,
                                hn::VFromD<D>& odd) {
  const hn::RebindToUnsigned<D> du32;
  const auto v = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(p));
  even = hn::BitCast(d, hn::ShiftLeft<16>(v));
  odd = hn::BitCast(d, hn::And(v, hn::Set(du32, 0xffff0000u)));
}
// Stores even and odd lanes interleaved as 2 * Lanes(d) bf16 (the bits StoreF32 would write);
// with nt, p is aligned to those bytes. With AVX512_BF16, one VCVTNE2PS2BF16 and one VPERMW.
template <class D>
HWY_INLINE void StoreEvenOddBf16(hn::VFromD<D> even, hn::VFromD<D> odd, D d,
                                 hwy::bfloat16_t* HWY_RESTRICT p, bool nt) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && defined(__AVX512BF16__)
  if constexpr (hn::MaxLanes(D()) == 16) {
    const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(odd.raw, even.raw);  // even first
    const __m512i order =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return detail::Store64Bytes(_mm512_permutexvar_epi16(order, halves), p, nt);
  }
#endif
  const hn::RebindToUnsigned<D> du32;
  const auto lo = hn::ShiftRight<16>(BF16HighBitsFromF32V(d, even));
  const auto both = hn::Or(lo, hn::And(BF16HighBitsFromF32V(d, odd), hn::Set(du32, 0xffff0000u)));
  uint32_t* q = reinterpret_cast<uint32_t*>(p);
  if (nt) {
    hn::Stream(both, du32, q);
  } else {
    hn::StoreU(both, du32, q);
  }
}

// Loads the first n (< Lanes(d) allowed, also 0) elements; other lanes are 0. Never reads past
// p[n-1].
template <class D, typename T>
HWY_INLINE hn::VFromD<D> LoadNF32(D d, const T* HWY_RESTRICT p, size_t n) {
#if !HWY_MEM_OPS_MIGHT_FAULT
  // One masked load (AVX2, AVX-512): a copy through memory would stall on store forwarding,
  // about 40 cycles a row tail (a 36-float RoPE row has one per input).
  if constexpr (std::is_same_v<T, float>) return hn::MaskedLoad(hn::FirstN(d, n), d, p);
#endif
  HWY_ALIGN T tmp[hn::MaxLanes(d)];
  memset(tmp, 0, sizeof(tmp));
  memcpy(tmp, p, n * sizeof(T));
  return LoadF32(d, tmp);
}
// Stores the first n lanes; never writes past p[n-1].
template <class D, typename T>
HWY_INLINE void StoreNF32(hn::VFromD<D> v, D d, T* HWY_RESTRICT p, size_t n) {
#if !HWY_MEM_OPS_MIGHT_FAULT
  if constexpr (std::is_same_v<T, float>) return hn::BlendedStore(v, hn::FirstN(d, n), d, p);
#endif
  HWY_ALIGN T tmp[hn::MaxLanes(d)];
  StoreF32(v, d, tmp);
  memcpy(p, tmp, n * sizeof(T));
}

// RotateHalf's read of a row: column j of the rotation of the row's first r columns (0 from r
// on), the source's sign bit flipped in storage where the rotation negates (exact, as Neg is).
// Halves (kir::Align::RotHalf): cat(-row[r/2:r], row[:r/2]); pairs (kir::Align::RotPairs, GPT-J's
// rotate_every_two): column 2k reads -row[2k+1], column 2k+1 reads row[2k].
template <typename T>
HWY_INLINE T RotatedElement(const T* HWY_RESTRICT row, int64_t j, int64_t r, bool pairs) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
  constexpr Bits kSign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  Bits bits = 0;
  if (j < r) {
    const int64_t h = r / 2;
    const bool neg = pairs ? j % 2 == 0 : j < h;
    const int64_t src = pairs ? (neg ? j + 1 : j - 1) : (neg ? j + h : j - h);
    memcpy(&bits, row + src, sizeof(bits));
    if (neg) bits = Bits(bits ^ kSign);
  }
  T out;
  memcpy(&out, &bits, sizeof(out));
  return out;
}
// Lanes i .. i + n - 1 of the rotated row, lanes from n on 0 (n <= Lanes(d)), element by element:
// for a vector across r or the middle of the halves, and the tail.
template <class D, typename T>
HWY_INLINE hn::VFromD<D> LoadNRotatedF32(D d, const T* HWY_RESTRICT row, int64_t i, int64_t r,
                                         size_t n, bool pairs) {
  if (i >= r) return hn::Zero(d);  // the columns past the rotary dims (a partial rotary's tail)
  HWY_ALIGN T tmp[hn::MaxLanes(d)];
  memset(tmp, 0, sizeof(tmp));
  for (size_t k = 0; k < n; k++) tmp[k] = RotatedElement(row, i + int64_t(k), r, pairs);
  return LoadF32(d, tmp);
}
template <class D, typename T>
HWY_INLINE hn::VFromD<D> LoadNRotHalfF32(D d, const T* HWY_RESTRICT row, int64_t i, int64_t r,
                                         size_t n) {
  return LoadNRotatedF32(d, row, i, r, n, false);
}
template <class D, typename T>
HWY_INLINE hn::VFromD<D> LoadNRotPairsF32(D d, const T* HWY_RESTRICT row, int64_t i, int64_t r,
                                          size_t n) {
  return LoadNRotatedF32(d, row, i, r, n, true);
}
// A whole vector of the halves' rotation: one load, negated below the middle.
template <class D, typename T>
HWY_INLINE hn::VFromD<D> LoadRotHalfF32(D d, const T* HWY_RESTRICT row, int64_t i, int64_t r) {
  const int64_t lanes = int64_t(hn::Lanes(d)), h = r / 2;
  if (i + lanes <= h) return hn::Neg(LoadF32(d, row + i + h));
  if (i >= h && i + lanes <= r) return LoadF32(d, row + i - h);
  if (i >= r) return hn::Zero(d);
  return LoadNRotatedF32(d, row, i, r, size_t(lanes), false);
}
// A whole vector of the pairs' rotation (i even, as every vector's first column is): one load,
// adjacent lanes swapped and the even ones negated.
template <class D, typename T>
HWY_INLINE hn::VFromD<D> LoadRotPairsF32(D d, const T* HWY_RESTRICT row, int64_t i, int64_t r) {
  const int64_t lanes = int64_t(hn::Lanes(d));
  if constexpr (hn::MaxLanes(D()) >= 2) {
    if (i + lanes <= r) {
      const hn::VFromD<D> swapped = hn::Reverse2(d, LoadF32(d, row + i));
      return hn::OddEven(swapped, hn::Neg(swapped));
    }
  }
  if (i >= r) return hn::Zero(d);
  return LoadNRotatedF32(d, row, i, r, size_t(lanes), true);
}

// LoadEvenOddBf16 of the rotated view of a bf16 row: columns i .. i + 2 * Lanes(d) - 1. Pairs:
// the even columns are the odd ones negated and the odd the even. Halves: a run on one side of
// the middle is one load (negated on the left). A run across r or the middle is gathered with the
// sign bits flipped in storage (exact), then loaded the same way.
template <class D>
HWY_INLINE void LoadEvenOddRotatedBf16(D d, const hwy::bfloat16_t* HWY_RESTRICT row, int64_t i,
                                       int64_t r, bool pairs, hn::VFromD<D>& even,
                                       hn::VFromD<D>& odd) {
  const int64_t run = 2 * int64_t(hn::Lanes(d)), h = r / 2;
  if (pairs && i + run <= r) {
    hn::VFromD<D> e, o;
    LoadEvenOddBf16(d, row + i, e, o);
    even = hn::Neg(o);
    odd = e;
    return;
  }
  if (!pairs && i + run <= h) {
    LoadEvenOddBf16(d, row + i + h, even, odd);
    even = hn::Neg(even);
    odd = hn::Neg(odd);
    return;
  }
  if (!pairs && i >= h && i + run <= r) return LoadEvenOddBf16(d, row + i - h, even, odd);
  if (i >= r) {
    even = odd = hn::Zero(d);
    return;
  }
  HWY_ALIGN hwy::bfloat16_t tmp[2 * hn::MaxLanes(d)];
  for (int64_t k = 0; k < run; k++) tmp[k] = RotatedElement(row, i + k, r, pairs);
  LoadEvenOddBf16(d, tmp, even, odd);
}
template <class D>
HWY_INLINE void LoadEvenOddRotHalfBf16(D d, const hwy::bfloat16_t* HWY_RESTRICT row, int64_t i,
                                       int64_t r, hn::VFromD<D>& even, hn::VFromD<D>& odd) {
  LoadEvenOddRotatedBf16(d, row, i, r, false, even, odd);
}
template <class D>
HWY_INLINE void LoadEvenOddRotPairsBf16(D d, const hwy::bfloat16_t* HWY_RESTRICT row, int64_t i,
                                        int64_t r, hn::VFromD<D>& even, hn::VFromD<D>& odd) {
  LoadEvenOddRotatedBf16(d, row, i, r, true, even, odd);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_KERNELS_CPU_VEC_STORAGE_INL_H_
