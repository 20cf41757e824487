// Vector math for f32 lanes: the ONE source of elementwise math for eager kernels, the fused-kernel
// code generator (generated C++ includes this header, compiled with -O3 -march=native as
// HWY_STATIC_TARGET) and the tile interpreter. Loads and stores of the storage dtypes are in
// vec_storage-inl.h, included here.
//
// A Highway per-target header: it may be included once per target (foreach_target.h) or once for
// the static target; it depends only on Highway headers. Everything lives in
// ubfuse::HWY_NAMESPACE. Functions take a float descriptor `d` (e.g. hn::ScalableTag<float>) and
// vectors of it; names end in F so they never collide with Highway's own Exp/Log through ADL.
//
// The trigonometric and hyperbolic functions are in vecmath_trig-inl.h, included at the end.
//
// Accuracy (f32 vs exact, max over dense sweeps; bounds asserted in tests/kernels_cpu_test.cc):
// ExpF 0.9 ulp (also for subnormal results), ExpNonPositiveF 1.3, ExpInRangeF 0.9 (1.3 on AVX-512),
// LogF 0.9, TanhF 2.6, SigmoidF 2.1, SiluF 2.4, ErfF 5.5, RsqrtF 1.5, PowF about 2 + |e ln x| ulp,
// SinF and CosF 0.94 for every finite x, TanF < 3, AsinF and AcosF 2, AtanF 3, SinhF 4, CoshF 3,
// AsinhF and AcoshF 3 (the inverse and hyperbolic ones mostly Highway's contrib math), PowTensorF 4
// + 2 |y ln x| (exact for integral |y| <= 64 where the power is representable). FmodF is exact;
// ModF adds b where the signs differ, which rounds as numpy's mod does. Floor, Ceil and Round
// (Highway's; Round ties to even) are exact. GeluTanhF 12 ulp for x > -3, 147 for x in [-9, -3] (x
// sigmoid(2u): relative accuracy where GELU is tiny). GeluErfF computes 1 + erf, so for x < -3 only
// its absolute error is small (~1e-7 |x|), as in PyTorch. NaN in gives NaN out unless stated.

// Per-target include guard (Highway idiom): toggled each time foreach_target re-includes us.
#if defined(UBFUSE_KERNELS_CPU_VECMATH_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_VECMATH_H_
#undef UBFUSE_KERNELS_CPU_VECMATH_H_
#else
#define UBFUSE_KERNELS_CPU_VECMATH_H_
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/vec_storage-inl.h"  // LoadF32 / StoreF32 / StreamF32 and friends

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------------------------------------
// Math on f32 vectors.

// -x.
template <class D, class V>
HWY_INLINE V NegF(D, V x) {
  return hn::Neg(x);
}
// |x|.
template <class D, class V>
HWY_INLINE V AbsF(D, V x) {
  return hn::Abs(x);
}
// max(a, b); NaN if either is NaN (numpy maximum).
template <class D, class V>
HWY_INLINE V MaxF(D, V a, V b) {
  const V r = hn::IfThenElse(hn::IsNaN(a), a, hn::Max(a, b));
  return hn::IfThenElse(hn::IsNaN(b), b, r);
}
// min(a, b); NaN if either is NaN (numpy minimum).
template <class D, class V>
HWY_INLINE V MinF(D, V a, V b) {
  const V r = hn::IfThenElse(hn::IsNaN(a), a, hn::Min(a, b));
  return hn::IfThenElse(hn::IsNaN(b), b, r);
}
// sqrt(x), correctly rounded.
template <class D, class V>
HWY_INLINE V SqrtF(D, V x) {
  return hn::Sqrt(x);
}
// 1/sqrt(x) as a correctly rounded sqrt and divide (<= 1.5 ulp); 0 -> inf.
template <class D, class V>
HWY_INLINE V RsqrtF(D d, V x) {
  return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x));
}
// 1/x, correctly rounded.
template <class D, class V>
HWY_INLINE V ReciprocalF(D d, V x) {
  return hn::Div(hn::Set(d, 1.0f), x);
}
// max(x, 0); NaN stays NaN, -0 stays -0.
template <class D, class V>
HWY_INLINE V ReluF(D d, V x) {
  return hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x);
}

namespace detail {
// x86 SIMD targets: min/max return the second operand when either is NaN, so Min(c, x) and
// Max(c, x) propagate a NaN x for free.
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
inline constexpr bool kMinMaxPropagateSecondNaN = true;
#else
inline constexpr bool kMinMaxPropagateSecondNaN = false;
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// AVX-512 VSCALEFPS: y * 2^floor(n) with IEEE overflow and gradual underflow, one instruction.
HWY_INLINE hn::Vec512<float> ScaleF(hn::Vec512<float> y, hn::Vec512<float> n) {
  return hn::Vec512<float>{_mm512_scalef_ps(y.raw, n.raw)};
}
HWY_INLINE hn::Vec256<float> ScaleF(hn::Vec256<float> y, hn::Vec256<float> n) {
  return hn::Vec256<float>{_mm256_scalef_ps(y.raw, n.raw)};
}
template <size_t N>
HWY_INLINE hn::Vec128<float, N> ScaleF(hn::Vec128<float, N> y, hn::Vec128<float, N> n) {
  return hn::Vec128<float, N>{_mm_scalef_ps(y.raw, n.raw)};
}
#endif
}  // namespace detail

// Rounding by the 1.5 * 2^23 trick: t = v + (kRoundMagic + kBias) rounds v (|v| < 2^22) to an
// integer n = t - (kRoundMagic + kBias), since floats in [2^23, 2^24) are the integers. t's bits
// are those of kRoundMagic plus n + kBias, and kRoundMagic's low 9 bits are 0, so bits(t) << 23 is
// (n + kBias) << 23 exactly: with kBias = 127 + e, an exponent field giving 2^(n + e) in ONE shift.
// That replaces a float-to-int conversion (which Highway's AVX2 ConvertTo follows with a
// 3-instruction overflow fix-up) and the integer add of the exponent bias.
constexpr float kRoundMagic = 12582912.0f;
constexpr int32_t kRoundMagicBits = 0x4B400000;
constexpr int kExpBias = 127;             // exponent field of 2^n
constexpr int kExpBiasPlus24 = 127 + 24;  // of 2^(n + 24)

namespace detail {
// round(x / ln2) as a float n, and t = n + kRoundMagic + kBias (|x| below ~2.9e6).
template <int kBias, class D, class V>
HWY_INLINE V RoundLog2F(D d, V x, V& t) {
  const V magic = hn::Set(d, kRoundMagic + float(kBias));
  t = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), magic);
  return hn::Sub(t, magic);
}
// 2^(n + kBias - 127) for t = n + kRoundMagic + kBias, n + kBias in [1, 254] (a normal float).
template <class D, class V>
HWY_INLINE V Pow2FromRoundedF(D d, V t) {
  const hn::RebindToSigned<D> di;
  return hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, t)));
}
}  // namespace detail

// y * 2^n for integral n in [-151, 129] (as floats), t = n + kRoundMagic + kExpBias: exact,
// overflowing to inf and underflowing gradually through the subnormals like IEEE multiplication.
template <class D, class V>
HWY_INLINE V Pow2ScaleF(D d, V y, V n, V t) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  (void)d;
  (void)t;
  return detail::ScaleF(y, n);
#else
  // 2^n as 2^n1 * 2^(n - n1), n1 = floor(n / 2): both factors stay normal.
  (void)n;
  const hn::RebindToSigned<D> di;
  const auto tb = hn::BitCast(di, t);  // kRoundMagicBits + kExpBias + n
  const auto n1 = hn::ShiftRight<1>(hn::Sub(tb, hn::Set(di, kRoundMagicBits + kExpBias)));
  const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, hn::Set(di, kExpBias))));
  const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Sub(tb, n1)));  // (n - n1 + kExpBias) << 23
  return hn::Mul(hn::Mul(y, s1), s2);
#endif
}

// 2^(n + 24) for integral n in [-150, 103] (a normal float), t = n + kRoundMagic + kExpBiasPlus24.
template <class D, class V>
HWY_INLINE V Pow2Plus24F(D d, V n, V t) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  (void)t;
  return detail::ScaleF(hn::Set(d, 0x1p24f), n);
#else
  (void)n;
  return detail::Pow2FromRoundedF(d, t);
#endif
}

namespace detail {
// ExpF's reduction and polynomial: e^xc = y * 2^n for xc in [-104, 88.8] (or NaN), with
// y = e^r, |r| <= ln2/2, and t = n + kRoundMagic + kExpBias (n = round(xc / ln2)).
template <class D, class V>
HWY_INLINE V ExpReducedF(D d, V xc, V& n, V& t) {
  n = RoundLog2F<kExpBias>(d, xc, t);
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), xc);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  // Degree 6, fitted for relative error with 1 + r fixed (3.1e-9 on |r| <= ln2/2).
  V p = hn::Set(d, 1.3814568205194212e-3f);
  p = hn::MulAdd(p, r, hn::Set(d, 8.368731626436806e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.166838947507237e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666520510143296e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.9999993439607626e-1f));
  const V one = hn::Set(d, 1.0f);
  return hn::MulAdd(hn::MulAdd(p, r, one), r, one);  // 1 + r (1 + r p(r))
}
}  // namespace detail

// e^x, < 1 ulp for all finite x including results in the subnormal range; +inf for
// x > 88.72, 0 for x < -104 and -inf. Cody-Waite reduction, a degree-6 polynomial in Horner form
// (cephes' degree 7 was one FMA more for no accuracy that survives f32 rounding), and an exact
// scaling by 2^n (VSCALEFPS on AVX-512).
template <class D, class V>
HWY_INLINE V ExpF(D d, V x) {
  // Operand order: x second, so x86 min/max keep a NaN x.
  const V xc = hn::Max(hn::Set(d, -104.0f), hn::Min(hn::Set(d, 88.8f), x));
  V n, t;
  const V res = Pow2ScaleF(d, detail::ExpReducedF(d, xc, n, t), n, t);
  if constexpr (detail::kMinMaxPropagateSecondNaN) {
    return res;
  } else {
    return hn::IfThenElse(hn::IsNaN(x), x, res);
  }
}

// The least x for which ExpInRangeF holds (2^n stays normal: n >= -126).
inline constexpr float kExpInRangeMin = -87.0f;

// e^x for x in [kExpInRangeMin, 0] or NaN, which the caller has checked (eager Softmax once per
// row, from the row's min and max), 0.9 ulp. Without VSCALEFPS, 2^n is then one exponent field
// and y * 2^n one multiply that rounds once, as ExpF's two-factor scaling does: 3 operations
// instead of 9. On AVX-512 it is ExpNonPositiveF's table form without its range tests.
template <class D, class V>
HWY_INLINE V ExpInRangeF(D d, V x);

namespace detail {
// ExpNonPositiveF without its test for results below float's least normal (see there).
template <class D, class V>
HWY_INLINE V ExpNonPositiveAnyF(D d, V x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(d) >= 16) {
    alignas(64) static constexpr float kPow2Sixteenths[16] = {
        // 2^(j/16), rounded
        1.0f,        1.04427373f, 1.09050775f, 1.13878858f, 1.18920708f, 1.24185777f,
        1.29683959f, 1.35425556f, 1.41421354f, 1.47682619f, 1.54221082f, 1.61049032f,
        1.68179286f, 1.75625217f, 1.8340081f,  1.91520655f};
    const hn::RebindToSigned<D> di;
    const V xc = hn::Max(hn::Set(d, -104.0f), x);  // x second: a NaN x stays NaN
    // t's low mantissa bits hold n = round(x 16 / ln2) (1.5 * 2^23 shifts the fraction out).
    const V magic = hn::Set(d, kRoundMagic);
    const V t = hn::MulAdd(xc, hn::Set(d, 23.0831206542234f), magic);
    const V n = hn::Sub(t, magic);
    V r = hn::NegMulAdd(n, hn::Set(d, 0.0433349609375f), xc);  // ln2/16 in two parts: n * hi
    r = hn::NegMulAdd(n, hn::Set(d, -1.32621525e-5f), r);      // is exact
    const auto j = hn::And(hn::BitCast(di, t), hn::Set(di, 15));
    const V tj = hn::TableLookupLanes(hn::Load(d, kPow2Sixteenths), hn::IndicesFromVec(d, j));
    V q = hn::MulAdd(hn::Set(d, 0.166666672f), r, hn::Set(d, 0.5f));
    q = hn::Mul(hn::MulAdd(q, r, hn::Set(d, 1.0f)), r);  // e^r - 1
    // VSCALEFPS takes floor(n / 16) = k itself.
    return detail::ScaleF(hn::MulAdd(tj, q, tj), hn::Mul(n, hn::Set(d, 0.0625f)));
  }
#else
  V n, t;
  const V xc = hn::Max(hn::Set(d, -104.0f), x);  // x second: a NaN x stays NaN
  const V res = Pow2ScaleF(d, detail::ExpReducedF(d, xc, n, t), n, t);
  if constexpr (detail::kMinMaxPropagateSecondNaN) {
    return res;
  } else {
    return hn::IfThenElse(hn::IsNaN(x), x, res);
  }
#endif
  return ExpF(d, x);
}
}  // namespace detail

// e^x for x <= 0 or NaN (softmax's exp(x - max)), < 1.3 ulp, subnormal results included, 0 below
// -104. On targets of 16 or more lanes (AVX-512) it splits x = (16k + j) ln2/16 + r, |r| <= ln2/32,
// and takes 2^(j/16) from a 16-entry table held in one register (one permute), e^r - 1 from a
// degree-3 polynomial and 2^k from VSCALEFPS: as many operations as ExpF, but 8 multiplies or
// FMAs to its 10 and a dependency chain half as long. The pipelined eager Softmax loop computes
// 9% more elements per second in cache with it. The table's rounding (half an ulp) is what
// ExpF's 0.9 ulp becomes 1.3 for; a second table of the rounding errors brought it to 0.7 ulp
// but gave back half the speed. Positive x is out of its contract. Other targets take
// ExpInRangeF's short scaling when every lane is in its range.
// A vector with a lane below kExpInRangeMin takes a second test: lanes below -104 (a masked
// score's exp) become 0 without the arithmetic, because an underflowing result costs a microcode
// assist per vector on Intel cores without flush-to-zero (a causal mask's softmax ran 2x slower on
// a Xeon with AMX); only real subnormal results, x in [-104, -87), take the underflowing path.
template <class D, class V>
HWY_INLINE V ExpNonPositiveF(D d, V x) {
  const auto low = hn::Lt(x, hn::Set(d, kExpInRangeMin));  // false for a NaN lane
  if (HWY_LIKELY(hn::AllFalse(d, low))) return ExpInRangeF(d, x);
  if (!hn::AllFalse(d, hn::And(low, hn::Ge(x, hn::Set(d, -104.0f))))) {
    return detail::ExpNonPositiveAnyF(d, x);
  }
  return hn::IfThenZeroElse(low, ExpInRangeF(d, hn::IfThenZeroElse(low, x)));
}

template <class D, class V>
HWY_INLINE V ExpInRangeF(D d, V x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(d) >= 16) return detail::ExpNonPositiveAnyF(d, x);
#endif
  V n, t;
  const V y = detail::ExpReducedF(d, x, n, t);
  return hn::Mul(y, detail::Pow2FromRoundedF(d, t));
}

// ln(x), < 1 ulp (Highway's Log, subnormals handled); 0 -> -inf, x < 0 -> NaN, +inf -> +inf.
template <class D, class V>
HWY_INLINE V LogF(D d, V x) {
  const V zero = hn::Zero(d);
  const V inf = hn::Set(d, hwy::HighestValue<float>() * 2.0f);
  V r = hn::Log(d, hn::IfThenElse(hn::Gt(x, zero), x, hn::Set(d, 1.0f)));
  r = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf), r);
  r = hn::IfThenElse(hn::Eq(x, inf), inf, r);
  const V nan = hn::BitCast(d, hn::Set(hn::RebindToUnsigned<D>(), 0x7fc00000u));
  return hn::IfThenElse(hn::Lt(x, zero), nan, hn::IfThenElse(hn::IsNaN(x), x, r));
}

// tanh(x), <= 2.6 ulp (Highway's Tanh via expm1: accurate near 0).
template <class D, class V>
HWY_INLINE V TanhF(D d, V x) {
  return hn::Tanh(d, x);
}

// 1 / (1 + e^-x), <= 2.1 ulp, also where the result is subnormal (x down to -104; 0 below); 1 for
// x > 17. With x = m ln2 + s (m integral, |s| <= ln2/2): sigmoid(x) = 2^m / (2^m + e^-s), so
// neither 1 + e^-x overflowing nor a reciprocal of a huge value (which the hardware estimate
// flushes) is ever needed. e^-s is a degree-6 polynomial (relative error 2e-9, fitted for this).
// Numerator and denominator are both scaled by 2^24 (folded into the coefficients): 2^m itself
// is not representable for m = -150 (x near -104), 2^(m+24) is, and the quotient rounds once.
// 15 operations, one a divide: on Zen 5 and Zen 3 the divide costs less than the reciprocal
// estimate and its Newton step (Zen 5: 7.2 vs 9.4 cycles per vector in L1) and rounds once.
// On an Intel Xeon (family 6 model 207) SiLU with the divide ran no slower (performance.md).
template <class D, class V>
HWY_INLINE V SigmoidF(D d, V x) {
  // Operand order: x second, so x86 min/max keep a NaN x. Above 60 the result is 1, and
  // 2^(m+24) stays finite.
  const V xc = hn::Max(hn::Set(d, -104.0f), hn::Min(hn::Set(d, 60.0f), x));
  V t;
  const V m = detail::RoundLog2F<kExpBiasPlus24>(d, xc, t);
  V s = hn::NegMulAdd(m, hn::Set(d, 0.693359375f), xc);
  s = hn::NegMulAdd(m, hn::Set(d, -2.12194440e-4f), s);
  constexpr float k = 0x1p24f;
  V p = hn::Set(d, k * 1.3836742145940661e-3f);  // 2^24 e^-s = sum 2^24 c_k s^k
  p = hn::MulAdd(p, s, hn::Set(d, k * -8.374898694455624e-3f));
  p = hn::MulAdd(p, s, hn::Set(d, k * 4.1668232530355453e-2f));
  p = hn::MulAdd(p, s, hn::Set(d, k * -1.6666419804096222e-1f));
  p = hn::MulAdd(p, s, hn::Set(d, k * 4.9999991059303284e-1f));
  p = hn::MulAdd(p, s, hn::Set(d, -k));
  p = hn::MulAdd(p, s, hn::Set(d, k));
  const V pow2m = Pow2Plus24F(d, m, t);  // 2^(m+24), normal for m >= -150
  const V r = hn::Div(pow2m, hn::Add(pow2m, p));
  if constexpr (detail::kMinMaxPropagateSecondNaN) {
    return r;
  } else {
    return hn::IfThenElse(hn::IsNaN(x), x, r);
  }
}

// x * sigmoid(x) = x / (1 + e^-x).
template <class D, class V>
HWY_INLINE V SiluF(D d, V x) {
  return hn::Mul(x, SigmoidF(d, x));
}

// erf(x): odd rational minimax (Eigen's generic_fast_erf_float) on x clamped to [-4, 4]; <= 5.5
// ulp; erf(+-inf) = +-1.
template <class D, class V>
HWY_INLINE V ErfF(D d, V x) {
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -4.0f)), hn::Set(d, 4.0f));
  const V x2 = hn::Mul(xc, xc);
  V p = hn::MulAdd(x2, hn::Set(d, -2.72614225801306e-10f), hn::Set(d, 2.77068142495902e-08f));
  p = hn::MulAdd(x2, p, hn::Set(d, -2.10102402082508e-06f));
  p = hn::MulAdd(x2, p, hn::Set(d, -5.69250639462346e-05f));
  p = hn::MulAdd(x2, p, hn::Set(d, -7.34990630326855e-04f));
  p = hn::MulAdd(x2, p, hn::Set(d, -2.95459980854025e-03f));
  p = hn::MulAdd(x2, p, hn::Set(d, -1.60960333262415e-02f));
  p = hn::Mul(xc, p);
  V q = hn::MulAdd(x2, hn::Set(d, -1.45660718464996e-05f), hn::Set(d, -2.13374055278905e-04f));
  q = hn::MulAdd(x2, q, hn::Set(d, -1.68282697438203e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, -7.37332916720468e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, -1.42647390514189e-02f));
  const V r = hn::Div(p, q);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

// The sign of x: 1, -1, or x itself for +-0 and NaN.
template <class D, class V>
HWY_INLINE V SignF(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V r = hn::IfThenElse(hn::Gt(x, hn::Zero(d)), one, x);
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Neg(one), r);
}

// Tests as 0/1 floats (stored as bool): x is NaN; x is +inf or -inf.
template <class D, class V>
HWY_INLINE V IsNaNF(D d, V x) {
  return hn::IfThenElseZero(hn::IsNaN(x), hn::Set(d, 1.0f));
}
template <class D, class V>
HWY_INLINE V IsInfF(D d, V x) {
  return hn::IfThenElseZero(hn::IsInf(x), hn::Set(d, 1.0f));
}

// GELU, exact form: 0.5 x (1 + erf(x / sqrt 2)).
template <class D, class V>
HWY_INLINE V GeluErfF(D d, V x) {
  const V e = ErfF(d, hn::Mul(x, hn::Set(d, 0.70710678118654752f)));
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.0f), e));
}

// GELU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x sigmoid(2u): the same function, but 1 + tanh(u) cancels for x below about -3 (at x = -8 it is
// 0 in f32, where GELU is -3e-21), and x sigmoid(2u) keeps relative accuracy there.
template <class D, class V>
HWY_INLINE V GeluTanhF(D d, V x) {
  const V x3 = hn::Mul(hn::Mul(x, x), x);
  const V u2 = hn::Mul(hn::Set(d, 1.5957691216057308f), hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
  return hn::Mul(x, SigmoidF(d, u2));
}

// x^e for a scalar exponent e (uniform over lanes, so the branches are free; the relative error of
// the general path grows with |e ln x|). Exact fast paths
// for e = 0, 1, 2, 3, -1, 0.5; otherwise exp(e ln|x|) with the sign of x for odd integer e, NaN
// for finite x < 0 and non-integer e, and C pow's results at +-0 and +-inf on every path (as
// ONNX and numpy; PyTorch's f32 pow(-inf, 0.5) is NaN).
template <class D, class V>
HWY_INLINE V PowF(D d, V x, float e) {
  if (e == 2.0f) return hn::Mul(x, x);
  if (e == 1.0f) return x;
  if (e == 0.5f) {  // sqrt, but pow(-inf, 0.5) = +inf and pow(-0, 0.5) = +0 (-0 + 0 = +0)
    const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
    return hn::IfThenElse(hn::Eq(x, hn::Neg(inf)), inf, hn::Add(hn::Sqrt(x), hn::Zero(d)));
  }
  if (e == -1.0f) return ReciprocalF(d, x);
  if (e == 3.0f) return hn::Mul(hn::Mul(x, x), x);
  if (e == 0.0f) return hn::Set(d, 1.0f);  // pow(NaN, 0) = 1 too
  if (e != e) return hn::Set(d, e);        // NaN exponent
  const float ae = e < 0.0f ? -e : e;
  bool is_int = true, odd = false;  // every float >= 2^24 is an even integer
  if (ae < 16777216.0f) {
    const int64_t k = int64_t(e);
    is_int = float(k) == e;
    odd = is_int && (k & 1) != 0;
  }
  V r = ExpF(d, hn::Mul(hn::Set(d, e), LogF(d, hn::Abs(x))));  // |x| = 0 or inf: exp(+-inf)
  if (odd) {
    r = hn::CopySign(r, x);  // odd integer: sign of x (also -0 -> -0, -inf)
  } else if (!is_int) {      // NaN for finite x < 0; pow(-inf, e) is inf or 0 like pow(inf, e)
    const V nan = hn::BitCast(d, hn::Set(hn::RebindToUnsigned<D>(), 0x7fc00000u));
    const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
    r = hn::IfThenElse(hn::And(hn::Lt(x, hn::Zero(d)), hn::Gt(x, neg_inf)), nan, r);
  }
  return r;
}

// C's fmod(a, b), exact (the remainder a - trunc(a / b) b is always representable): the sign of
// a; NaN for infinite a, b = 0 or NaN; a for infinite b. Each step takes r down by up to 2^23
// multiples of B = |b| 2^k (k >= 0 such that r / B < 2^24): q = trunc(r / B) is exact or, where
// the quotient rounded up to an integer, one too big, which a negative r - q B (exact by FMA)
// shows and adding B undoes. One step when |a / b| < 2^24; at most 12 for any finite a and b.
template <class D, class V>
HWY_INLINE V FmodF(D d, V a, V b) {
#if HWY_NATIVE_FMA
  const hn::RebindToSigned<D> di;
  const V zero = hn::Zero(d);
  const auto nan_lanes = hn::Or(hn::Not(hn::IsFinite(a)), hn::Not(hn::Gt(hn::Abs(b), zero)));
  const auto special = hn::Or(nan_lanes, hn::IsInf(b));                // kept out of the loop below
  const V bx = hn::IfThenElse(special, hn::Set(d, 1.0f), hn::Abs(b));  // finite, > 0
  V r = hn::IfThenZeroElse(special, hn::Abs(a));
  // The biased exponent of bx (of a subnormal one too: it is scaled up by 2^24 first).
  const auto sub = hn::Lt(bx, hn::Set(d, 0x1p-126f));
  const V bn = hn::IfThenElse(sub, hn::Mul(bx, hn::Set(d, 0x1p24f)), bx);
  const auto eb = hn::Sub(hn::ShiftRight<23>(hn::BitCast(di, bn)),
                          hn::IfThenElseZero(hn::RebindMask(di, sub), hn::Set(di, 24)));
  while (!hn::AllFalse(d, hn::Ge(r, bx))) {
    // k = e(r) - e(b) - 23, in [0, 253]: 2^k as two normal factors. Lanes already below bx
    // get k = 0 and q = 0 (or 1, undone), so they stay.
    const auto k =
        hn::Max(hn::Sub(hn::ShiftRight<23>(hn::BitCast(di, r)), hn::Add(eb, hn::Set(di, 23))),
                hn::Zero(di));
    const auto k1 = hn::ShiftRight<1>(k);
    const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k1, hn::Set(di, kExpBias))));
    const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::Sub(k, k1), hn::Set(di, kExpBias))));
    const V big_b = hn::Mul(hn::Mul(bx, s1), s2);
    const V q = hn::Trunc(hn::Div(r, big_b));
    r = hn::NegMulAdd(q, big_b, r);
    r = hn::IfThenElse(hn::Lt(r, zero), hn::Add(r, big_b), r);
  }
  const V nan = hn::BitCast(d, hn::Set(hn::RebindToUnsigned<D>(), 0x7fc00000u));
  r = hn::IfThenElse(hn::IsInf(b), a, hn::CopySign(r, a));
  return hn::IfThenElse(nan_lanes, nan, r);
#else
  // Without FMA, r - q B rounds: C's fmod lane by lane.
  constexpr size_t kN = hn::MaxLanes(d);
  HWY_ALIGN float as[kN], bs[kN];
  hn::Store(a, d, as);
  hn::Store(b, d, bs);
  for (size_t i = 0; i < hn::Lanes(d); i++) as[i] = fmodf(as[i], bs[i]);
  return hn::Load(d, as);
#endif
}

// a mod b with the sign of b (numpy's mod, Python's %): fmod, plus b where the signs differ; a
// zero takes b's sign.
template <class D, class V>
HWY_INLINE V ModF(D d, V a, V b) {
  const hn::RebindToSigned<D> di;
  const V r = FmodF(d, a, b);
  const auto signs_differ =
      hn::RebindMask(d, hn::Lt(hn::Xor(hn::BitCast(di, r), hn::BitCast(di, b)), hn::Zero(di)));
  const auto is_zero = hn::Eq(r, hn::Zero(d));
  const V adjusted = hn::IfThenElse(signs_differ, hn::Add(r, b), r);
  return hn::IfThenElse(is_zero, hn::CopySign(r, b), adjusted);
}

// x^y elementwise (C's pow on every special case, as numpy): integral |y| <= 64 by repeated
// squaring, exact where the power is representable, as an integer base's is (3^6 = 729, which
// exp(6 ln 3) misses by an ulp; a Cast to an integer would then truncate to 728), else within
// 0.75 |y| ulp (measured); other y as exp(y ln |x|), the sign of x for odd integral y and NaN for
// finite x < 0, within 4 + 2 |y ln x| ulp (measured; PowF's general path is the same).
template <class D, class V>
HWY_INLINE V PowTensorF(D d, V x, V y) {
  const hn::RebindToSigned<D> di;
  const V one = hn::Set(d, 1.0f);
  const V ay = hn::Abs(y);
  const auto integral = hn::Eq(hn::Round(y), y);  // +-inf too, NaN not
  const auto small = hn::And(integral, hn::Le(ay, hn::Set(d, 64.0f)));
  V by_squaring = one, by_exp = one;
  if (!hn::AllFalse(d, small)) {
    auto n = hn::ConvertTo(di, hn::IfThenElseZero(small, ay));
    V base = x;
    while (!hn::AllFalse(di, hn::Ne(n, hn::Zero(di)))) {
      const auto bit = hn::RebindMask(d, hn::Ne(hn::And(n, hn::Set(di, 1)), hn::Zero(di)));
      by_squaring = hn::IfThenElse(bit, hn::Mul(by_squaring, base), by_squaring);
      base = hn::Mul(base, base);
      n = hn::ShiftRight<1>(n);
    }
    by_squaring = hn::IfThenElse(hn::Lt(y, hn::Zero(d)), hn::Div(one, by_squaring), by_squaring);
    if (hn::AllTrue(d, small)) return by_squaring;
  }
  // |x| = 0 or inf and y = +-inf come out of exp(+-inf); |x| = 1 gives 1 even for y = +-inf.
  const V ax = hn::Abs(x);
  by_exp = ExpF(d, hn::Mul(y, LogF(d, ax)));
  by_exp = hn::IfThenElse(hn::Eq(ax, one), one, by_exp);
  // Every float from 2^24 on is even.
  const auto exact_int = hn::And(integral, hn::Lt(ay, hn::Set(d, 16777216.0f)));
  const auto yi = hn::ConvertTo(di, hn::IfThenElseZero(exact_int, y));
  const auto odd = hn::RebindMask(d, hn::Ne(hn::And(yi, hn::Set(di, 1)), hn::Zero(di)));
  by_exp = hn::IfThenElse(odd, hn::CopySign(by_exp, x), by_exp);
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto neg_finite = hn::And(hn::Lt(x, hn::Zero(d)), hn::Gt(x, neg_inf));
  const V nan = hn::BitCast(d, hn::Set(hn::RebindToUnsigned<D>(), 0x7fc00000u));
  by_exp = hn::IfThenElse(hn::AndNot(integral, neg_finite), nan, by_exp);
  return hn::IfThenElse(small, by_squaring, by_exp);
}

// ---------------------------------------------------------------------------------------------
// bf16-grade activations, for values that reach only bf16 outputs (eager bf16 kernels and
// generated kernels): e^x with one-constant range reduction and a degree-3 polynomial fitted for
// relative error with its constant term 1 (1.0e-4, and e^0 = 1), and the hardware reciprocal (14
// bits with AVX-512, 12 with AVX2 and SSE): sigmoid's relative error is at most 1.4e-4 and 3.4e-4
// there (a sweep of [-80, 80]; Taylor's degree 4 gave 8.7e-5 and 3.2e-4 for one FMA more),
// against bf16's 2^-9 rounding (ref::kBf16GradeRelError, 5e-4, bounds it for the fuzz oracle).
// About half the work of the exact forms.

template <class D, class V>
HWY_INLINE V ExpLowpF(D d, V x) {
  // ExpF's range: past 88.72 the scaling overflows to inf, below -87 it goes subnormal, then 0.
  const V xc = hn::Max(hn::Set(d, -104.0f), hn::Min(hn::Set(d, 88.8f), x));  // NaN x kept
  V t;
  const V n = detail::RoundLog2F<kExpBias>(d, xc, t);
  const V r = hn::NegMulAdd(n, hn::Set(d, 0.693147180559945f), xc);
  // e^r for |r| <= ln2 / 2 (the constant term 1, so that e^0 = 1).
  V p = hn::MulAdd(r, hn::Set(d, 1.651797593e-1f), hn::Set(d, 5.041303635e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.000195861f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  return Pow2ScaleF(d, p, n, t);
}
// sigmoid(x) = 2^m / (2^m + e^-s) as in SigmoidF (both scaled by 2^24), with ExpLowpF's
// reduction and polynomial; degree 3 made the bf16 seed block kernel 8% faster in cache.
template <class D, class V>
HWY_INLINE V SigmoidLowpF(D d, V x) {
  const V xc = hn::Max(hn::Set(d, -104.0f), hn::Min(hn::Set(d, 60.0f), x));  // NaN x kept
  V t;
  const V m = detail::RoundLog2F<kExpBiasPlus24>(d, xc, t);
  const V s = hn::NegMulAdd(m, hn::Set(d, 0.693147180559945f), xc);
  constexpr float k = 0x1p24f;
  V p = hn::MulAdd(s, hn::Set(d, k * -1.651797593e-1f), hn::Set(d, k * 5.041303635e-1f));
  p = hn::MulAdd(p, s, hn::Set(d, k * -1.000195861f));
  p = hn::MulAdd(p, s, hn::Set(d, k));  // 2^24 e^-s
  const V pow2m = Pow2Plus24F(d, m, t);
  return hn::Mul(pow2m, hn::ApproximateReciprocal(hn::Add(pow2m, p)));
}
template <class D, class V>
HWY_INLINE V SiluLowpF(D d, V x) {
  return hn::Mul(x, SigmoidLowpF(d, x));
}
// 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
template <class D, class V>
HWY_INLINE V GeluTanhLowpF(D d, V x) {
  const V x3 = hn::Mul(hn::Mul(x, x), x);
  const V u2 = hn::Mul(hn::Set(d, 1.5957691216057308f), hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
  return hn::Mul(x, SigmoidLowpF(d, u2));
}

// ---------------------------------------------------------------------------------------------
// Horizontal reductions of one vector (f32).

// Sum of all lanes.
template <class D, class V>
HWY_INLINE float ReduceSumF(D d, V v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}
// Max of all lanes; NaN if any lane is NaN (x86's max would return the other operand).
template <class D, class V>
HWY_INLINE float ReduceMaxF(D d, V v) {
  if (!hn::AllFalse(d, hn::IsNaN(v))) return std::numeric_limits<float>::quiet_NaN();
  return hn::GetLane(hn::MaxOfLanes(d, v));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

// Trigonometric and hyperbolic functions (SinF ... AtanhF), built on the functions above.
#include "kernels/cpu/vecmath_trig-inl.h"

#endif  // UBFUSE_KERNELS_CPU_VECMATH_H_
