// Vector helpers of fused kernels that vecmath.h (the shared elementwise math, and through
// vec_storage-inl.h loads and stores of every storage dtype) does not cover: explicit rounding
// casts, comparisons and select as 0/1 floats, neutral row tails for reductions. Used by generated
// C++ (static target) and by the tile interpreter (every dispatched target). A Highway per-target
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

// kir::Op::DownScale: the power of two 2^-k that brings m (>= 0) below 2^40, or 1 when m already
// is below it (then scaling by it changes nothing, bit for bit). Inf or NaN m gives 2^-88.
template <class D, class V>
HWY_INLINE V DownScaleF(D d, V m) {
  const hn::RebindToSigned<D> di;
  const auto biased = hn::And(hn::ShiftRight<23>(hn::BitCast(di, m)), hn::Set(di, 0xff));
  const auto k = hn::Max(hn::Sub(biased, hn::Set(di, 127 + 40)), hn::Zero(di));
  return hn::BitCast(d, hn::ShiftLeft<23>(hn::Sub(hn::Set(di, 127), k)));
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

// e^a for a <= 0, without exp's per-vector range test where the row's flag is nonzero
// (kir::Op::ExpInRangeIf). Generated loops pass the row's scalar flag, the same for every step;
// the interpreter its splatted vector.
template <class D, class V>
HWY_INLINE V ExpInRangeIfF(D d, V a, float in_range) {
  return in_range != 0.0f ? ExpInRangeF(d, a) : ExpNonPositiveF(d, a);
}
template <class D, class V>
HWY_INLINE V ExpInRangeIfF(D d, V a, V in_range) {
  return ExpInRangeIfF(d, a, hn::GetLane(in_range));
}

// The row reductions of the kernel IR (kir::Op::RowSum, RowSumSq, RowMax, RowMaxAbs, RowMin) as
// accumulators over vectors: Init, Step (one vector, or the first n lanes of the row's tail),
// Finish (to a scalar). Generated kernels name them RowAcc<kRowSum> etc.; the interpreter picks one
// per reduction.
enum RowAccKind { kRowSum, kRowSumSq, kRowMax, kRowMaxAbs, kRowMin };
template <RowAccKind K>
struct RowAcc {
  template <class D>
  static HWY_INLINE hn::VFromD<D> Init(D d) {
    if constexpr (K == kRowMin) return hn::Set(d, hwy::HighestValue<float>() * 2.0f);
    return K == kRowMax ? hn::Set(d, -hwy::HighestValue<float>() * 2.0f) : hn::Zero(d);
  }
  template <class D, class V>
  static HWY_INLINE V Step(D d, V acc, V v) {
    if constexpr (K == kRowSum) return hn::Add(acc, v);
    if constexpr (K == kRowSumSq) return hn::MulAdd(v, v, acc);
    if constexpr (K == kRowMax) return MaxF(d, acc, v);  // NaN-aware, as ReduceMax
    if constexpr (K == kRowMin) return hn::Min(v, acc);  // x86 drops a NaN v, others keep it
    return hn::Max(acc, hn::Abs(v));                     // 2 ops: only a scale hangs on it
  }
  template <class D, class V>
  static HWY_INLINE V StepTail(D d, V acc, V v, size_t n) {
    if constexpr (K == kRowMin) {
      return Step(d, acc, hn::IfThenElse(hn::FirstN(d, n), v, Init(d)));
    }
    return Step(d, acc, K == kRowMax ? TailForMax(d, v, n) : TailForSum(d, v, n));
  }
  template <class D, class V>
  static HWY_INLINE float Finish(D d, V acc, V acc2) {
    if constexpr (K == kRowSum || K == kRowSumSq) return ReduceSumF(d, hn::Add(acc, acc2));
    if constexpr (K == kRowMin) return -ReduceMaxF(d, hn::Neg(hn::Min(acc, acc2)));
    return ReduceMaxF(d, K == kRowMax ? MaxF(d, acc, acc2) : hn::Max(acc, acc2));
  }
};

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_CODEGEN_UBK_VEC_INL_H_
