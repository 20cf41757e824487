// Vector helpers of fused kernels that vecmath.h (the shared elementwise math) does not cover:
// loads and stores of any storage dtype including bool (as uint8 0/1), partial vectors for row
// tails, explicit rounding casts, comparisons and select as 0/1 floats. Used by generated C++
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

// Full-vector load / store / stream of a storage dtype as f32 lanes.
template <class D, typename T>
HWY_INLINE hn::VFromD<D> UbLoad(D d, const T* HWY_RESTRICT p) {
  return LoadF32(d, p);
}
template <class D>
HWY_INLINE hn::VFromD<D> UbLoad(D d, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, D> du8;
  const hn::RebindToSigned<D> di32;
  return hn::ConvertTo(
      d, hn::BitCast(di32, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(du8, p))));
}
template <class D, typename T>
HWY_INLINE void UbStore(hn::VFromD<D> v, D d, T* HWY_RESTRICT p) {
  StoreF32(v, d, p);
}
template <class D>
HWY_INLINE void UbStore(hn::VFromD<D> v, D d, uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, D> du8;
  const hn::RebindToSigned<D> di32;
  const auto bits =
      hn::IfThenElseZero(hn::RebindMask(di32, hn::Ne(v, hn::Zero(d))), hn::Set(di32, 1));
  hn::StoreU(hn::DemoteTo(du8, bits), du8, p);
}
template <class D, typename T>
HWY_INLINE void UbStream(hn::VFromD<D> v, D d, T* HWY_RESTRICT p) {
  StreamF32(v, d, p);
}
template <class D>
HWY_INLINE void UbStream(hn::VFromD<D> v, D d, uint8_t* HWY_RESTRICT p) {
  UbStore(v, d, p);
}

// The first n (< Lanes) elements; other lanes 0. Never touches memory past p[n-1].
template <class D, typename T>
HWY_INLINE hn::VFromD<D> UbLoadN(D d, const T* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN T tmp[hn::MaxLanes(d)];
  memset(tmp, 0, sizeof(tmp));
  memcpy(tmp, p, n * sizeof(T));
  return UbLoad(d, tmp);
}
template <class D, typename T>
HWY_INLINE void UbStoreN(hn::VFromD<D> v, D d, T* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN T tmp[hn::MaxLanes(d)];
  UbStore(v, d, tmp);
  memcpy(p, tmp, n * sizeof(T));
}

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
