// Vector helpers of fused kernels that vecmath.h (the shared elementwise math, loads and stores of
// every storage dtype) does not cover: explicit rounding casts, comparisons and select as 0/1
// floats, neutral row tails for reductions. Used by generated C++
// (static target) and by the tile interpreter (every dispatched target). A Highway per-target
// header, like vecmath.h; embedded into the library for generated sources.

#if defined(UBFUSE_CODEGEN_UBK_VEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_CODEGEN_UBK_VEC_INL_H_
#undef UBFUSE_CODEGEN_UBK_VEC_INL_H_
#else
#define UBFUSE_CODEGEN_UBK_VEC_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hwy/highway.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Round to bf16 / f16 and widen back (an explicit Cast inside a fused group).
template <class D>
HWY_INLINE hn::VFromD<D> RoundBf16F(D d, hn::VFromD<D> v) {
  const hn::RebindToUnsigned<D> du32;
  const auto bits = hn::PromoteTo(du32, BF16BitsFromF32V(d, v));
  return hn::BitCast(d, hn::ShiftLeft<16>(bits));
}
template <class D>
HWY_INLINE hn::VFromD<D> RoundF16F(D d, hn::VFromD<D> v) {
  HWY_ALIGN hwy::float16_t tmp[hn::MaxLanes(d)];
  StoreF32(v, d, tmp);
  return LoadF32(d, tmp);
}

// Comparisons and logic on 0/1 floats.
template <class D, class V>
HWY_INLINE V EqF(D d, V a, V b) {
  return hn::IfThenElseZero(hn::Eq(a, b), hn::Set(d, 1.0f));
}
template <class D, class V>
HWY_INLINE V LtF(D d, V a, V b) {
  return hn::IfThenElseZero(hn::Lt(a, b), hn::Set(d, 1.0f));
}
template <class D, class V>
HWY_INLINE V GtF(D d, V a, V b) {
  return hn::IfThenElseZero(hn::Gt(a, b), hn::Set(d, 1.0f));
}
template <class D, class V>
HWY_INLINE V ToBoolF(D d, V x) {
  return hn::IfThenElseZero(hn::Ne(x, hn::Zero(d)), hn::Set(d, 1.0f));
}
template <class D, class V>
HWY_INLINE V NotF(D d, V x) {
  return hn::IfThenElseZero(hn::Eq(x, hn::Zero(d)), hn::Set(d, 1.0f));
}
template <class D, class V>
HWY_INLINE V WhereF(D d, V c, V a, V b) {
  return hn::IfThenElse(hn::Ne(c, hn::Zero(d)), a, b);
}

// Lanes past n neutral for a sum (0) or a max (-inf): the tail of a row.
template <class D, class V>
HWY_INLINE V TailForSum(D d, V v, size_t n) {
  return hn::IfThenElseZero(hn::FirstN(d, n), v);
}
template <class D, class V>
HWY_INLINE V TailForMax(D d, V v, size_t n) {
  return hn::IfThenElse(hn::FirstN(d, n), v, hn::Set(d, -hwy::HighestValue<float>() * 2.0f));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_CODEGEN_UBK_VEC_INL_H_
