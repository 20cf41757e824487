// The mask of the flash attention (attention.cc), per Highway target: a mask step applied to a
// vector of scores (ApplyMask), and each mask row's summary, read once per call and thread
// (MaskExtent), from which a tile learns how many keys of a block it needs (TileKeysNeeded): none
// above a causal diagonal, only those up to the tile's last row on it.
#ifndef UBFUSE_KERNELS_CPU_ATTENTION_MASK_ROW_
#define UBFUSE_KERNELS_CPU_ATTENTION_MASK_ROW_
#include <cstdint>

namespace ubfuse::cpu::attention_detail {

// What a tile needs to know of one mask row, read once per call and thread (MaskExtent): `last`
// is the last of its lk keys whose mask value is above kMaskFloor or NaN (an added mask) or keeps
// the score (a Where), -1 if none; `top` at least the largest mask value after it (-inf if none);
// `zeros` how many of its first keys leave the scores as they are (a mask value of 0, or kept by
// a Where).
struct MaskRow {
  int64_t last, zeros;
  float top;
};

}  // namespace ubfuse::cpu::attention_detail
#endif  // UBFUSE_KERNELS_CPU_ATTENTION_MASK_ROW_

#if defined(UBFUSE_KERNELS_CPU_ATTENTION_MASK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_ATTENTION_MASK_INL_H_
#undef UBFUSE_KERNELS_CPU_ATTENTION_MASK_INL_H_
#else
#define UBFUSE_KERNELS_CPU_ATTENTION_MASK_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <limits>

#include "hwy/highway.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

namespace ad = cpu::attention_detail;

// Whether a step is the mask (an Add of it, or a Where on it).
inline bool IsMaskStep(const cpu::AttentionStep& st) {
  return st.kind == cpu::AttentionStep::kAddMask || st.kind == cpu::AttentionStep::kWhere;
}

// The c mask values of a row from key j, widened to f32 (mrow's columns mcol apart; mcol 0: its
// one value in every lane).
template <class D, typename TM>
HWY_INLINE hn::VFromD<D> MaskVec(D d, const TM* mrow, int64_t mcol, size_t j, size_t c) {
  if (mcol == 0) return hn::Set(d, hn::GetLane(LoadNF32(d, mrow, 1)));
  return c == hn::Lanes(d) ? LoadF32(d, mrow + j) : LoadNF32(d, mrow + j, c);
}

// The lanes whose score a Where step keeps: a bool mask loads as 0/1, kept where it is 1 (0 when
// !keep_when_true).
template <class D>
HWY_INLINE auto Kept(D d, const cpu::AttentionStep& st, hn::VFromD<D> mv) {
  return hn::Eq(mv, hn::Set(d, st.keep_when_true ? 1.0f : 0.0f));
}

// The scores x of lanes [i * N, +N) of a row after the mask step st (the row's mask at mrow, its
// columns mcol apart; nj keys in the block).
template <class D, typename TM>
HWY_INLINE hn::VFromD<D> ApplyMask(D d, const cpu::AttentionStep& st, const TM* mrow, int64_t mcol,
                                   size_t i, size_t nj, hn::VFromD<D> x) {
  const size_t N = hn::Lanes(d);
  const auto mv = MaskVec(d, mrow, mcol, i * N, std::min(N, nj - i * N));
  if (st.kind == cpu::AttentionStep::kAddMask) return hn::Add(x, mv);
  return hn::IfThenElse(Kept(d, st, mv), x, hn::Set(d, st.scalar));
}

// How far below a row's running max every score of a block must be for the block to add exactly
// nothing to that row: the exp this kernel uses is 0 below -104. The test also allows a relative
// 1e-5 for the roundings of the scores and of their difference to the max (each a few ulps).
constexpr float kSkipMargin = 128.0f;
constexpr double kSkipSlack = 1e-5;

// Mask values at or below this (and not NaN) are taken as masking a key out when a chunk's mask
// rows are first read (MaskExtent); whether one really adds nothing is decided per tile against
// its row's running max (TileKeysNeeded). -inf, float's lowest and -1e4 masks are all below it.
constexpr float kMaskFloor = -1000.0f;

// The highest lane set in a mask of lanes (one at least); StoreMaskBits puts lane i at bit i % 8
// of byte i / 8.
template <class D, class M>
HWY_INLINE size_t LastLane(D d, M lanes) {
  uint8_t bits[HWY_MAX_BYTES / sizeof(float) / 8 + 8] = {};
  const size_t bytes = hn::StoreMaskBits(d, lanes, bits);
  size_t i = bytes;
  while (i > 1 && bits[i - 1] == 0) i--;
  return (i - 1) * 8 + size_t(31 - __builtin_clz(unsigned(bits[i - 1])));
}

// The MaskRow of mrow's lk keys (col_stride 0: one value for all). Reads the row from its end back
// to the last key that counts and from its start to the first non-zero value: for a causal mask,
// each value once.
template <class D, typename TM>
HWY_INLINE ad::MaskRow MaskExtent(D d, const cpu::AttentionStep& st, const TM* mrow, size_t lk,
                                  int64_t col_stride) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  const bool add = st.kind == cpu::AttentionStep::kAddMask;
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const V floor = hn::Set(d, kMaskFloor);
  const size_t n = col_stride == 0 ? 1 : lk;
  const auto load = [&](size_t j, size_t c) HWY_ATTR { return MaskVec(d, mrow, col_stride, j, c); };
  // Lanes that may count (NaN too: !(x <= floor)), and lanes that leave the scores unchanged.
  const auto counts = [&](V mv)
                          HWY_ATTR { return add ? hn::Not(hn::Le(mv, floor)) : Kept(d, st, mv); };
  const auto neutral = [&](V mv)
                           HWY_ATTR { return add ? hn::Eq(mv, hn::Zero(d)) : Kept(d, st, mv); };
  ad::MaskRow mr{-1, int64_t(lk), -std::numeric_limits<float>::infinity()};
  V tv = ninf;
  for (size_t j = (n - 1) / N * N + N; j > 0;) {
    j -= N;
    const size_t c = std::min(N, n - j);
    const V mv = load(j, c);
    const auto in = hn::FirstN(d, c);
    const auto k = hn::And(in, counts(mv));
    // The lanes before the last that counts may join top too: a larger top is only stricter.
    tv = hn::Max(tv, hn::IfThenElse(hn::AndNot(k, in), mv, ninf));
    if (!hn::AllFalse(d, k)) {
      mr.last = col_stride == 0 ? int64_t(lk) - 1 : int64_t(j + LastLane(d, k));
      break;
    }
  }
  mr.top = ReduceMaxF(d, tv);
  for (size_t j = 0; j < n; j += N) {
    const size_t c = std::min(N, n - j);
    const auto in = hn::FirstN(d, c);
    const auto other = hn::AndNot(neutral(load(j, c)), in);
    if (!hn::AllFalse(d, other)) {
      mr.zeros = col_stride == 0 ? 0 : int64_t(j + hn::FindKnownFirstTrue(d, other));
      break;
    }
  }
  return mr;
}

// How many of the nj keys of the block at j0 the `real` rows of a tile need (0 skips the block,
// nj takes it all), from each row's MaskRow and running max m. Past a row's last key that counts,
// each score after the mask step (the last step) is at most top + bound (an added mask; `bound`
// bounds the scores before it) or the fill value (a Where); where that lies kSkipMargin below the
// row's max, those keys change no row's max, sum or output. A causal mask's blocks above the
// diagonal then come out 0 and the block on it is cut after the tile's last row. Rows whose max
// is still -inf take every key.
inline size_t TileKeysNeeded(const cpu::AttentionStep& st, float bound, const ad::MaskRow* rows,
                             size_t real, size_t j0, size_t nj, const float* m) {
  const bool add = st.kind == cpu::AttentionStep::kAddMask;
  // An added mask keeps what the scores are: an infinite or NaN one (bound not finite) makes the
  // masked score NaN. A Where replaces them whatever they are.
  if (add && !std::isfinite(bound)) return nj;
  size_t need = 0;
  for (size_t r = 0; r < real; r++) {
    const int64_t keys = rows[r].last + 1 - int64_t(j0);  // the row's keys in this block that count
    if (keys >= int64_t(nj)) return nj;
    need = std::max(need, size_t(std::max<int64_t>(keys, 0)));
    const float mr = m[r];
    if (!(mr > -std::numeric_limits<float>::infinity())) return nj;
    const double hi = add ? double(rows[r].top) + double(bound) : double(st.scalar);
    if (hi == -std::numeric_limits<double>::infinity()) continue;  // exp gives exactly 0
    const double slack =
        kSkipSlack * (std::abs(hi) + std::abs(double(bound)) + std::abs(double(mr)));
    if (!(hi + slack < double(mr) - kSkipMargin)) return nj;
  }
  return need;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_KERNELS_CPU_ATTENTION_MASK_INL_H_
