// Trigonometric and hyperbolic functions on f32 lanes: SinF, CosF, TanF, AsinF, AcosF, AtanF,
// SinhF, CoshF, AsinhF, AcoshF, AtanhF (accuracy: vecmath.h's header). Included at the end of
// vecmath.h, whose exp and helpers they use; include vecmath.h, not this file.
//
// A Highway per-target header like vecmath.h: it may be included once per target
// (foreach_target.h) or once for the static target.

// Per-target include guard (Highway idiom): toggled each time foreach_target re-includes us.
#if defined(UBFUSE_KERNELS_CPU_VECMATH_TRIG_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_VECMATH_TRIG_INL_H_
#undef UBFUSE_KERNELS_CPU_VECMATH_TRIG_INL_H_
#else
#define UBFUSE_KERNELS_CPU_VECMATH_TRIG_INL_H_
#endif

#include <stdint.h>
#include <string.h>

#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// sin and cos: x = j pi/2 + r with |r| <= pi/4 (r carried as hi + lo), then minimax polynomials
// for sin r and cos r on [-pi/4, pi/4] (fitted for relative error, 3.8e-9 and 2.6e-10 before
// rounding the coefficients to f32) and the quadrant j mod 4 picks one and its sign.

// Below it, |x| reduces by Cody-Waite; from it on (and on targets without FMA) lane by lane.
inline constexpr float kSinCosFastMax = 131072.0f;  // 2^17

namespace detail {
// The binary fraction of 2/pi, 32 bits a word, most significant first (bit p weighs 2^-p).
inline constexpr uint32_t kTwoOverPiWords[10] = {0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0,
                                                 0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561,
                                                 0xB7246E3A, 0x424DD2E0};
// Bits k .. k + 31 of 2/pi's fraction as an integer; bits at p <= 0 are 0 (k <= 256).
inline uint32_t TwoOverPiBits(int k) {
  const int i = k - 1;  // bit k's index from the first fraction bit
  if (i <= -32) return 0;
  if (i < 0) return kTwoOverPiWords[0] >> -i;
  const uint64_t two = (uint64_t(kTwoOverPiWords[i / 32]) << 32) | kTwoOverPiWords[i / 32 + 1];
  return uint32_t((two << (i % 32)) >> 32);
}
// x = j pi/2 + hi + lo for one finite float of any size; returns j mod 4 (Payne-Hanek). With
// |x| = m 2^s (m < 2^24 an integer), x 2/pi mod 4 = m (2/pi's bits s-1 .. s+126) 2^-126 mod 4:
// earlier bits add multiples of 4, later ones less than 2^-102. One 128-bit product.
inline int32_t ReduceHalfPiWide(float x, float* hi, float* lo) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  const int biased = int((bits >> 23) & 0xff);
  const uint32_t m = biased ? (bits & 0x7fffff) | 0x800000 : bits & 0x7fffff;
  const int k = (biased ? biased : 1) - 127 - 23 - 1;
  __extension__ typedef unsigned __int128 U128;
  __extension__ typedef __int128 I128;
  const U128 g = (U128(TwoOverPiBits(k)) << 96) | (U128(TwoOverPiBits(k + 32)) << 64) |
                 (U128(TwoOverPiBits(k + 64)) << 32) | U128(TwoOverPiBits(k + 96));
  const U128 v = U128(m) * g;                    // |x| 2/pi mod 4, 126 fraction bits
  const U128 j = (v + (U128(1) << 125)) >> 126;  // rounded to the nearest quadrant
  const I128 f = I128(v - (j << 126));           // in [-2^125, 2^125): r 2^126 / (pi/2)
  const double frac = double(int64_t(f >> 64)) + double(uint64_t(f)) * 0x1p-64;
  double r = frac * 0x1p-62 * 1.5707963267948966;
  int32_t q = int32_t(j & 3);
  if (bits >> 31) {
    r = -r;
    q = (4 - q) & 3;
  }
  *hi = float(r);
  *lo = float(r - double(*hi));
  return q;
}
// The same for |x| < kSinCosFastMax in double (for targets without FMA): pi/2's first 33 bits
// times j < 2^17 is exact, and so is x minus it.
inline int32_t ReduceHalfPiDouble(float x, float* hi, float* lo) {
  const double magic = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double j = (double(x) * 0.63661977236758134 + magic) - magic;
  const double r = (double(x) - j * 1.5707963267341256) - j * 6.077100506506192e-11;
  *hi = float(r);
  *lo = float(r - double(*hi));
  return int32_t(int64_t(j) & 3);
}
}  // namespace detail

// x = j pi/2 + hi + lo, |hi + lo| <= pi/4 (a hair more near the quadrant edges), j mod 4 in q;
// NaN hi for inf and NaN x. Cody-Waite with FMA: j pi/2 in three parts, the first product
// exact, the second's rounding and r1 - j P2's kept in lo (TwoProduct and TwoSum). What it
// drops, j (pi/2 - P1 - P2 - P3) = 1e-23 j, grows with |x|: SinF and CosF stay within 0.93 ulp
// for every float below 2^17 (swept), but reach 1.1 ulp by 2^20. Past 2^17, ReduceHalfPiWide.
template <class D, class V>
HWY_INLINE V ReduceHalfPiF(D d, V x, V& lo, hn::Vec<hn::RebindToSigned<D>>& q) {
  const hn::RebindToSigned<D> di;
  V hi;
#if HWY_NATIVE_FMA
  const V magic = hn::Set(d, kRoundMagic);
  const V t = hn::MulAdd(x, hn::Set(d, 0.636619747f), magic);  // round(x 2/pi) + kRoundMagic
  const V j = hn::Sub(t, magic);
  q = hn::BitCast(di, t);  // j in the low bits
  const V p2 = hn::Set(d, -4.37113883e-08f);
  const V r1 = hn::NegMulAdd(j, hn::Set(d, 1.57079637f), x);  // x - j P1, exact
  const V p = hn::Mul(j, p2);
  const V p_err = hn::MulSub(j, p2, p);  // j P2 - p, exact
  hi = hn::Sub(r1, p);
  const V bb = hn::Sub(hi, r1);
  const V sum_err = hn::Sub(hn::Sub(r1, hn::Sub(hi, bb)), hn::Add(p, bb));  // r1 - p - hi
  lo = hn::NegMulAdd(j, hn::Set(d, -1.71512451e-15f), hn::Sub(sum_err, p_err));
  const auto slow = hn::And(hn::Ge(hn::Abs(x), hn::Set(d, kSinCosFastMax)), hn::IsFinite(x));
  if (HWY_LIKELY(hn::AllFalse(d, slow))) return hi;
#else
  hi = hn::Sub(x, x);  // NaN for inf and NaN
  lo = hn::Zero(d);
  q = hn::Zero(di);
#endif
  constexpr size_t kN = hn::MaxLanes(d);
  HWY_ALIGN float xs[kN], his[kN], los[kN];
  HWY_ALIGN int32_t qs[kN];
  hn::Store(x, d, xs);
  hn::Store(hi, d, his);
  hn::Store(lo, d, los);
  hn::Store(q, di, qs);
  for (size_t i = 0; i < hn::Lanes(d); i++) {
    const float a = xs[i] < 0 ? -xs[i] : xs[i];
    if (a >= kSinCosFastMax && a <= std::numeric_limits<float>::max()) {
      qs[i] = detail::ReduceHalfPiWide(xs[i], &his[i], &los[i]);
    } else if (!HWY_NATIVE_FMA && a < kSinCosFastMax) {
      qs[i] = detail::ReduceHalfPiDouble(xs[i], &his[i], &los[i]);
    }
  }
  lo = hn::Load(d, los);
  q = hn::Load(di, qs);
  return hn::Load(d, his);
}

namespace detail {
// sin x (kCos false) or cos x, sin(-0) being +0.
template <bool kCos, class D, class V>
HWY_INLINE V SinCosF(D d, V x) {
  const hn::RebindToSigned<D> di;
  V lo;
  hn::Vec<decltype(di)> q;
  const V r = ReduceHalfPiF(d, x, lo, q);
  const V z = hn::Mul(r, r);
  // sin(r + lo) = r + (r^3 S(z) + lo)
  V s = hn::MulAdd(hn::Set(d, -1.95152832e-4f), z, hn::Set(d, 8.33216076e-3f));
  s = hn::MulAdd(s, z, hn::Set(d, -1.66666546e-1f));
  const V sin_r = hn::Add(r, hn::MulAdd(hn::Mul(r, z), s, lo));
  // cos(r + lo) = (1 - z/2) + (z^2 C(z) - r lo), 1 - z/2 as w + tail, with z's rounding error ze
  // (0.56 ulp where 1.1 without them).
  const V ze = hn::MulSub(r, r, z);
  const V half_z = hn::Mul(z, hn::Set(d, 0.5f));
  const V one = hn::Set(d, 1.0f);
  const V w = hn::Sub(one, half_z);
  const V tail = hn::Sub(hn::Sub(one, w), half_z);
  V c = hn::MulAdd(hn::Set(d, 2.44638374e-5f), z, hn::Set(d, -1.38876544e-3f));
  c = hn::MulAdd(c, z, hn::Set(d, 4.16666547e-2f));
  const V corr = hn::MulAdd(r, lo, hn::Mul(hn::Set(d, 0.5f), ze));
  const V cos_r = hn::Add(w, hn::Add(tail, hn::MulSub(hn::Mul(z, z), c, corr)));
  // sin x = sin r, cos r, -sin r, -cos r for j mod 4 = 0 .. 3; cos x = sin(x + pi/2).
  if (kCos) q = hn::Add(q, hn::Set(di, 1));
  const auto odd = hn::RebindMask(d, hn::Ne(hn::And(q, hn::Set(di, 1)), hn::Zero(di)));
  const V v = hn::IfThenElse(odd, cos_r, sin_r);
  const auto sign = hn::ShiftLeft<30>(hn::And(q, hn::Set(di, 2)));
  return hn::BitCast(d, hn::Xor(hn::BitCast(di, v), sign));
}
}  // namespace detail

// sin x, < 1 ulp for every finite x (0.93 over every float below 2^17, 0.94 sampled past it);
// NaN for +-inf; sin(-0) = -0.
template <class D, class V>
HWY_INLINE V SinF(D d, V x) {
  const V s = detail::SinCosF<false>(d, x);
  return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, s);
}

// cos x, < 1 ulp for every finite x (as SinF); NaN for +-inf.
template <class D, class V>
HWY_INLINE V CosF(D d, V x) {
  return detail::SinCosF<true>(d, x);
}

// tan x = sin x / cos x, each < 1 ulp and one rounded divide (< 3 ulp); NaN for +-inf.
template <class D, class V>
HWY_INLINE V TanF(D d, V x) {
  return hn::Div(SinF(d, x), CosF(d, x));
}

namespace detail {
template <class D>
HWY_INLINE hn::Vec<D> QuietNaNF(D d) {
  return hn::Set(d, std::numeric_limits<float>::quiet_NaN());
}
}  // namespace detail

// asin x and acos x (Highway's, 2 ulp); NaN outside [-1, 1].
template <class D, class V>
HWY_INLINE V AsinF(D d, V x) {
  return hn::IfThenElse(hn::Gt(hn::Abs(x), hn::Set(d, 1.0f)), detail::QuietNaNF(d), hn::Asin(d, x));
}
template <class D, class V>
HWY_INLINE V AcosF(D d, V x) {
  return hn::IfThenElse(hn::Gt(hn::Abs(x), hn::Set(d, 1.0f)), detail::QuietNaNF(d), hn::Acos(d, x));
}
// atan x (Highway's, 3 ulp); +-pi/2 for +-inf.
template <class D, class V>
HWY_INLINE V AtanF(D d, V x) {
  return hn::Atan(d, x);
}

namespace detail {
// e^|x| / 2 as (e^(|x|/2) / 2) e^(|x|/2) (< 3 ulp): finite up to sinh's and cosh's own overflow,
// past e^|x|'s.
template <class D, class V>
HWY_INLINE V HalfExpAbsF(D d, V x) {
  const V h = ExpF(d, hn::Mul(hn::Abs(x), hn::Set(d, 0.5f)));
  return hn::Mul(hn::Mul(h, hn::Set(d, 0.5f)), h);
}
}  // namespace detail

// sinh x: Highway's (4 ulp, through expm1: exact near 0) for |x| <= 9; beyond, e^-|x| is below
// half an ulp of e^|x| and sinh is +-e^|x| / 2.
template <class D, class V>
HWY_INLINE V SinhF(D d, V x) {
  const V big = hn::CopySign(detail::HalfExpAbsF(d, x), x);
  return hn::IfThenElse(hn::Gt(hn::Abs(x), hn::Set(d, 9.0f)), big, hn::Sinh(d, x));
}
// cosh x = e^|x| / 2 + 1 / (2 e^|x|) (< 3 ulp, a sum of positives) for |x| <= 9, beyond e^|x| / 2.
template <class D, class V>
HWY_INLINE V CoshF(D d, V x) {
  const V half = hn::Set(d, 0.5f);
  const V e = ExpF(d, hn::Abs(x));
  const V small = hn::MulAdd(e, half, hn::Div(half, e));
  return hn::IfThenElse(hn::Gt(hn::Abs(x), hn::Set(d, 9.0f)), detail::HalfExpAbsF(d, x), small);
}
// asinh x (Highway's, 3 ulp); acosh x (3 ulp) NaN below 1; atanh x (Highway's, through log1p)
// NaN outside [-1, 1] and +-inf at +-1.
template <class D, class V>
HWY_INLINE V AsinhF(D d, V x) {
  return hn::Asinh(d, x);
}
template <class D, class V>
HWY_INLINE V AcoshF(D d, V x) {
  return hn::IfThenElse(hn::Lt(x, hn::Set(d, 1.0f)), detail::QuietNaNF(d), hn::Acosh(d, x));
}
template <class D, class V>
HWY_INLINE V AtanhF(D d, V x) {
  const V a = hn::Abs(x), one = hn::Set(d, 1.0f);
  const V pole = hn::CopySign(hn::Set(d, std::numeric_limits<float>::infinity()), x);
  const V r = hn::IfThenElse(hn::Eq(a, one), pole, hn::Atanh(d, x));
  return hn::IfThenElse(hn::Gt(a, one), detail::QuietNaNF(d), r);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_KERNELS_CPU_VECMATH_TRIG_INL_H_
