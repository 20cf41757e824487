// The flash attention's tiles with the query rows across the lanes (attention.cc, ChunkLanes), per
// Highway target: a tile is kLaneVecs vectors of query rows, its scores S^T = K Q^T one vector
// per key and row vector, so a row's running max and sum are lanes of a vector (elementwise, no
// reduction across lanes), and no lane is padding for a head size that is not a multiple of the
// vector (the speech encoder's 36). Q^T ([depth, rows]) and the outputs O^T ([dv, rows]) are
// kept transposed for the chunk; K and V come in row blocks ([keys, depth], [keys, dv]).
// Everything here is f32.
#if defined(UBFUSE_KERNELS_CPU_ATTENTION_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_ATTENTION_LANES_INL_H_
#undef UBFUSE_KERNELS_CPU_ATTENTION_LANES_INL_H_
#else
#define UBFUSE_KERNELS_CPU_ATTENTION_LANES_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kLaneVecs = 2;   // row vectors per tile: 32 query rows
constexpr size_t kLaneCols = 12;  // output columns per pass: 24 sums of 32 registers
constexpr size_t kLaneKeys = 8;   // keys per score group: 16 sums
#else
// 16 registers: 2 row vectors (16 rows on AVX2) by 6 keys or 6 columns, 12 sums, where one row
// vector by 8 keys or 12 columns had a broadcast per multiply-add (Zen 5's AVX2 target, speech
// encoder's [8,512,36] on one core: 3.77-3.84 against 4.36-4.60 ms; 3 vectors by 4: 3.82-3.84).
constexpr size_t kLaneVecs = 2;
constexpr size_t kLaneCols = 6;
constexpr size_t kLaneKeys = 6;
#endif

// f(std::integral_constant<size_t, n>{}) for a run-time n from 1 to 12.
template <class F>
HWY_INLINE void WithLaneCount(size_t n, const F& f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<size_t, 1>{});
    case 2:
      return f(std::integral_constant<size_t, 2>{});
    case 3:
      return f(std::integral_constant<size_t, 3>{});
    case 4:
      return f(std::integral_constant<size_t, 4>{});
    case 5:
      return f(std::integral_constant<size_t, 5>{});
    case 6:
      return f(std::integral_constant<size_t, 6>{});
    case 7:
      return f(std::integral_constant<size_t, 7>{});
    case 8:
      return f(std::integral_constant<size_t, 8>{});
    case 9:
      return f(std::integral_constant<size_t, 9>{});
    case 10:
      return f(std::integral_constant<size_t, 10>{});
    case 11:
      return f(std::integral_constant<size_t, 11>{});
    case 12:
      return f(std::integral_constant<size_t, 12>{});
    default:
      HWY_ABORT("attention: %zu keys or columns per lane group", n);
  }
}

// st[(j + k) * kLaneVecs * N + v * N, +N) = K[j + k] . Q^T[:, v * N, +N) for kK keys from j of
// the block kp ([keys, depth]) and the tile's row vectors at qt (row dd at qt + dd * ldq).
template <size_t kK, class D>
HWY_INLINE void LaneScoreKeys(D d, const float* HWY_RESTRICT qt, size_t ldq, size_t depth,
                              const float* HWY_RESTRICT kp, size_t j, float* HWY_RESTRICT st) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  V acc[kK][kLaneVecs];
  for (size_t k = 0; k < kK; k++) {
    for (size_t v = 0; v < kLaneVecs; v++) acc[k][v] = hn::Zero(d);
  }
  const float* kr = kp + j * depth;
  for (size_t dd = 0; dd < depth; dd++) {
    V q[kLaneVecs];
    for (size_t v = 0; v < kLaneVecs; v++) q[v] = hn::Load(d, qt + dd * ldq + v * N);
    for (size_t k = 0; k < kK; k++) {
      const V kb = hn::Set(d, kr[k * depth + dd]);
      for (size_t v = 0; v < kLaneVecs; v++) acc[k][v] = hn::MulAdd(kb, q[v], acc[k][v]);
    }
  }
  for (size_t k = 0; k < kK; k++) {
    for (size_t v = 0; v < kLaneVecs; v++) {
      hn::Store(acc[k][v], d, st + ((j + k) * kLaneVecs + v) * N);
    }
  }
}

// The tile's scores against the nj keys of the block kp: groups of kLaneKeys, then the rest.
template <class D>
HWY_INLINE void LaneScores(D d, const float* HWY_RESTRICT qt, size_t ldq, size_t depth,
                           const float* HWY_RESTRICT kp, size_t nj, float* HWY_RESTRICT st) {
  size_t j = 0;
  for (; j + kLaneKeys <= nj; j += kLaneKeys)
    LaneScoreKeys<kLaneKeys>(d, qt, ldq, depth, kp, j, st);
  if (j < nj) {
    WithLaneCount(nj - j, [&](auto n) HWY_ATTR {
      LaneScoreKeys<decltype(n)::value>(d, qt, ldq, depth, kp, j, st);
    });
  }
}

// The online softmax update of the tile's rows for the block's nj keys, lane by lane: the rows'
// running max m and sum l (kLaneVecs vectors each), and their outputs ot (dv rows ldo apart) are
// rescaled where the max grows; leaves exp(score - max) in st. The same steps, per lane, as
// SoftmaxUpdate's per row.
template <class D>
HWY_INLINE void LaneSoftmax(D d, float* HWY_RESTRICT st, size_t nj, float* HWY_RESTRICT m,
                            float* HWY_RESTRICT l, float* HWY_RESTRICT ot, size_t ldo, size_t dv) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  // The block's max per lane in two chains per row vector (even and odd keys): one chain waits on
  // the max's latency at every key.
  V mx[kLaneVecs][2];
  for (size_t v = 0; v < kLaneVecs; v++) mx[v][0] = mx[v][1] = ninf;
  for (size_t j = 0; j < nj; j++) {
    for (size_t v = 0; v < kLaneVecs; v++) {
      mx[v][j & 1] = hn::Max(mx[v][j & 1], hn::Load(d, st + (j * kLaneVecs + v) * N));
    }
  }
  V m_use[kLaneVecs];
  for (size_t v = 0; v < kLaneVecs; v++) {
    // A NaN lane of either chain stays NaN (x86's max returns its second operand when one is
    // NaN, so the chains' own maxima may have dropped it: it shows in the exps).
    const V bm = hn::IfThenElse(hn::IsNaN(mx[v][0]), mx[v][0], hn::Max(mx[v][1], mx[v][0]));
    const V old = hn::Load(d, m + v * N);
    // A NaN lane of the block's max stays NaN; else the larger, with a NaN running max kept.
    const V m_new = hn::IfThenElse(hn::IsNaN(bm), bm, hn::IfThenElse(hn::Lt(old, bm), bm, old));
    // All keys so far -inf: exp(-inf - 0) = 0 keeps the sum at 0.
    m_use[v] = hn::IfThenZeroElse(hn::Eq(m_new, ninf), m_new);
    hn::Store(m_new, d, m + v * N);
    // Lanes whose finite max grew (or is NaN) rescale what they hold by exp(old - new); the
    // others by exp(0) = 1.
    const auto grew = hn::AndNot(hn::Eq(old, ninf), hn::Not(hn::Eq(old, m_use[v])));
    if (!hn::AllFalse(d, grew)) {
      const V corr = ExpNonPositiveF(d, hn::IfThenElseZero(grew, hn::Sub(old, m_use[v])));
      hn::Store(hn::Mul(hn::Load(d, l + v * N), corr), d, l + v * N);
      for (size_t c = 0; c < dv; c++) {
        float* o = ot + c * ldo + v * N;
        hn::Store(hn::Mul(hn::Load(d, o), corr), d, o);
      }
    }
  }
  V sum[kLaneVecs][2];
  for (size_t v = 0; v < kLaneVecs; v++) {
    sum[v][0] = hn::Load(d, l + v * N);
    sum[v][1] = hn::Zero(d);
  }
  for (size_t j = 0; j < nj; j++) {
    for (size_t v = 0; v < kLaneVecs; v++) {
      float* s = st + (j * kLaneVecs + v) * N;
      const V e = ExpNonPositiveF(d, hn::Sub(hn::Load(d, s), m_use[v]));
      hn::Store(e, d, s);
      sum[v][j & 1] = hn::Add(sum[v][j & 1], e);
    }
  }
  for (size_t v = 0; v < kLaneVecs; v++) hn::Store(hn::Add(sum[v][0], sum[v][1]), d, l + v * N);
}

// ot[c0 + c][tile] += sum_j vp[j][c0 + c] p[j][tile] for kC columns from c0: kC x kLaneVecs sums
// in registers while the block's keys pass.
template <size_t kC, class D>
HWY_INLINE void LaneValueCols(D d, const float* HWY_RESTRICT st, size_t nj,
                              const float* HWY_RESTRICT vp, size_t dv, size_t c0,
                              float* HWY_RESTRICT ot, size_t ldo) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  V acc[kC][kLaneVecs];
  for (size_t c = 0; c < kC; c++) {
    for (size_t v = 0; v < kLaneVecs; v++) acc[c][v] = hn::Load(d, ot + (c0 + c) * ldo + v * N);
  }
  for (size_t j = 0; j < nj; j++) {
    V p[kLaneVecs];
    for (size_t v = 0; v < kLaneVecs; v++) p[v] = hn::Load(d, st + (j * kLaneVecs + v) * N);
    const float* vr = vp + j * dv + c0;
    for (size_t c = 0; c < kC; c++) {
      const V vb = hn::Set(d, vr[c]);
      for (size_t v = 0; v < kLaneVecs; v++) acc[c][v] = hn::MulAdd(vb, p[v], acc[c][v]);
    }
  }
  for (size_t c = 0; c < kC; c++) {
    for (size_t v = 0; v < kLaneVecs; v++) hn::Store(acc[c][v], d, ot + (c0 + c) * ldo + v * N);
  }
}

// The tile's outputs ot += P V for the block's nj keys (vp [keys, dv]), kLaneCols columns a pass.
template <class D>
HWY_INLINE void LaneValues(D d, const float* HWY_RESTRICT st, size_t nj,
                           const float* HWY_RESTRICT vp, size_t dv, float* HWY_RESTRICT ot,
                           size_t ldo) {
  for (size_t c0 = 0; c0 < dv; c0 += kLaneCols) {
    WithLaneCount(std::min(kLaneCols, dv - c0), [&](auto n) HWY_ATTR {
      LaneValueCols<decltype(n)::value>(d, st, nj, vp, dv, c0, ot, ldo);
    });
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_KERNELS_CPU_ATTENTION_LANES_INL_H_
