// The flash attention's tile micro-kernels (attention.cc), per Highway target: a tile of kRows
// query rows against a block of keys. ScoreTile computes the tile's scores into a small buffer,
// SoftmaxUpdate applies the graph's steps and folds them into the rows' running max and sum,
// ValueTiles and TailTiles add exp(scores) times the block's values to the rows' outputs; PackRow
// and PackTransposed lay the blocks of K^T and V out for them, AbsMax bounds their values for the
// skip test (attention_mask-inl.h). Everything here is f32.
#if defined(UBFUSE_KERNELS_CPU_ATTENTION_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_ATTENTION_TILES_INL_H_
#undef UBFUSE_KERNELS_CPU_ATTENTION_TILES_INL_H_
#else
#define UBFUSE_KERNELS_CPU_ATTENTION_TILES_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "hwy/highway.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_mask-inl.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

constexpr size_t kRows = 4;  // query rows per tile
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kScoreVecs = 4;  // 16 accumulators of 32 registers
constexpr size_t kOutVecs = 4;
#else
constexpr size_t kScoreVecs = 2;  // 8 accumulators of 16 registers
constexpr size_t kOutVecs = 2;
#endif

// f(std::integral_constant<size_t, n>{}) for a count n from 1 to kOutVecs: a run-time count of
// vectors or columns as the template argument of an unrolled tile.
template <class F>
HWY_INLINE void WithCount(size_t n, const F& f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<size_t, 1>{});
    case 2:
      return f(std::integral_constant<size_t, 2>{});
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    case 3:
      return f(std::integral_constant<size_t, 3>{});
    case 4:
      return f(std::integral_constant<size_t, 4>{});
#endif
    default:
      HWY_ABORT("attention: %zu vectors or columns per tile", n);
  }
}

// s[r * lds + j + (0, kV * N)] = q[r] . kt[:, j + ...] for the kRows rows of q ([kRows, depth])
// and kV vectors of columns of kt ([depth, ldk]) from j.
template <size_t kV, class D>
HWY_INLINE void ScoreCols(D d, const float* HWY_RESTRICT q, size_t depth,
                          const float* HWY_RESTRICT kt, size_t ldk, size_t j, float* HWY_RESTRICT s,
                          size_t lds) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  V acc[kRows][kV];
  for (size_t r = 0; r < kRows; r++) {
    for (size_t u = 0; u < kV; u++) acc[r][u] = hn::Zero(d);
  }
  for (size_t k = 0; k < depth; k++) {
    const float* kr = kt + k * ldk + j;
    V kv[kV];
    for (size_t u = 0; u < kV; u++) kv[u] = hn::Load(d, kr + u * N);
    for (size_t r = 0; r < kRows; r++) {
      const V qb = hn::Set(d, q[r * depth + k]);
      for (size_t u = 0; u < kV; u++) acc[r][u] = hn::MulAdd(qb, kv[u], acc[r][u]);
    }
  }
  for (size_t r = 0; r < kRows; r++) {
    for (size_t u = 0; u < kV; u++) hn::StoreU(acc[r][u], d, s + r * lds + j + u * N);
  }
}

// The tile's scores against the nj columns of kt (a multiple of Lanes(d)): groups of kScoreVecs
// vectors, then the rest as one narrower group (a causal block cut at the diagonal leaves up to
// kScoreVecs - 1).
static_assert(kScoreVecs - 1 <= kOutVecs, "ScoreTile's last group goes through WithCount");
template <class D>
HWY_INLINE void ScoreTile(D d, const float* HWY_RESTRICT q, size_t depth,
                          const float* HWY_RESTRICT kt, size_t ldk, size_t nj,
                          float* HWY_RESTRICT s, size_t lds) {
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + kScoreVecs * N <= nj; j += kScoreVecs * N)
    ScoreCols<kScoreVecs>(d, q, depth, kt, ldk, j, s, lds);
  if (j < nj) {
    WithCount((nj - j) / N, [&](auto nv) HWY_ATTR {
      ScoreCols<decltype(nv)::value>(d, q, depth, kt, ldk, j, s, lds);
    });
  }
}

// The tile's scores s[r * lds + (0, nj)] at or above `at` in magnitude become infinities of their
// sign: scores of a scaled q whose unscaled product, as the graph computes it, overflows.
template <class D>
HWY_INLINE void OverflowToInf(D d, float* HWY_RESTRICT s, size_t lds, size_t nj, float at) {
  const size_t N = hn::Lanes(d);
  const auto limit = hn::Set(d, at);
  const auto inf = hn::Set(d, std::numeric_limits<float>::infinity());
  for (size_t r = 0; r < kRows; r++) {
    for (size_t i = 0; i < nj; i += N) {
      const auto x = hn::LoadU(d, s + r * lds + i);
      hn::StoreU(hn::IfThenElse(hn::Ge(hn::Abs(x), limit), hn::CopySign(inf, x), x), d,
                 s + r * lds + i);
    }
  }
}

// The tile's rows of scores s[r * lds + (0, nj)] for the block: the steps [first_step, end_step)
// (row r's mask row at mrows[r]), then the online softmax update of each row's running max m[r]
// and sum, kept as N lanes l[r * N + (0, N)] summed when the chunk ends (rescaling those and its
// accumulated output o[r * ldo + (0, ldo)] when the max grows); leaves exp(s - max) in s, 0 past
// nj up to the next vector. A mask as the last step is applied in the pass that finds the
// block's max. A row's max is only reduced to one number when a lane of the block exceeds the
// running max, or is NaN, or the running max is still -inf (after the first blocks, rarely). The
// rows' loops are interleaved: their reductions are independent chains the core overlaps.
template <class D, typename TM>
HWY_INLINE void SoftmaxUpdate(D d, float* HWY_RESTRICT s, size_t lds, size_t nj,
                              const std::vector<cpu::AttentionStep>& steps, size_t first_step,
                              size_t end_step, const TM* const* mrows, int64_t mcol, float* m,
                              float* HWY_RESTRICT l, float* HWY_RESTRICT o, size_t ldo) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  const size_t nv = (nj + N - 1) / N;  // s has room for whole vectors
  const cpu::AttentionStep* last_mask =
      end_step > first_step && IsMaskStep(steps[end_step - 1]) ? &steps[end_step - 1] : nullptr;
  for (size_t k = first_step; k < end_step - (last_mask ? 1 : 0); k++) {
    const cpu::AttentionStep& st = steps[k];
    const V c = hn::Set(d, st.scalar);
    for (size_t r = 0; r < kRows; r++) {
      float* sr = s + r * lds;
      for (size_t i = 0; i < nv; i++) {
        const V x = hn::LoadU(d, sr + i * N);
        hn::StoreU(IsMaskStep(st) ? ApplyMask(d, st, mrows[r], mcol, i, nj, x)
                   : st.kind == cpu::AttentionStep::kMul ? hn::Mul(x, c)
                                                         : hn::Div(x, c),
                   d, sr + i * N);
      }
    }
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  V mx[kRows];
  for (size_t r = 0; r < kRows; r++) mx[r] = hn::Set(d, ninf);
  for (size_t i = 0; i < nv; i++) {
    const auto valid = hn::FirstN(d, nj - i * N);
    for (size_t r = 0; r < kRows; r++) {
      float* sr = s + r * lds + i * N;
      V x = hn::LoadU(d, sr);
      if (last_mask) {
        x = ApplyMask(d, *last_mask, mrows[r], mcol, i, nj, x);
        hn::StoreU(x, d, sr);
      }
      mx[r] = hn::Max(mx[r], hn::IfThenElse(valid, x, hn::Set(d, ninf)));
    }
  }
  V vm[kRows];
  // exp(old max - new max) of the rows whose max grew, for all rows in one vector exp (lanes
  // past kRows and rows whose max stayed hold 0).
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float corr[kRows + kMaxLanes] = {};
  bool grew[kRows], any_grew = false;
  for (size_t r = 0; r < kRows; r++) {
    const V cur = hn::Set(d, m[r]);
    grew[r] = false;
    vm[r] = cur;
    // No lane above the running max (and none NaN): the max stays.
    if (m[r] != ninf && hn::AllFalse(d, hn::Or(hn::Gt(mx[r], cur), hn::IsNaN(mx[r])))) continue;
    const float bmax = ReduceMaxF(d, mx[r]);
    const float m_new = std::isnan(bmax) ? bmax : std::max(m[r], bmax);
    // All keys so far masked out: exp(-inf - 0) = 0 keeps the sum at 0 (and the row NaN at the
    // end).
    const float m_use = m_new == ninf ? 0.0f : m_new;
    grew[r] = m[r] != ninf && m[r] != m_use;
    any_grew |= grew[r];
    if (grew[r]) corr[r] = m[r] - m_use;
    vm[r] = hn::Set(d, m_use);
    m[r] = m_new;
  }
  if (any_grew) {
    for (size_t r = 0; r < kRows; r += N)
      hn::Store(ExpNonPositiveF(d, hn::Load(d, corr + r)), d, corr + r);
    for (size_t r = 0; r < kRows; r++) {
      if (!grew[r]) continue;
      const V vc = hn::Set(d, corr[r]);
      hn::Store(hn::Mul(hn::Load(d, l + r * N), vc), d, l + r * N);
      float* orow = o + r * ldo;
      for (size_t i = 0; i < ldo; i += N)
        hn::StoreU(hn::Mul(hn::LoadU(d, orow + i), vc), d, orow + i);
    }
  }
  V sum[kRows];
  for (size_t r = 0; r < kRows; r++) sum[r] = hn::Load(d, l + r * N);
  for (size_t i = 0; i < nv; i++) {
    const auto valid = hn::FirstN(d, nj - i * N);
    for (size_t r = 0; r < kRows; r++) {
      float* sr = s + r * lds + i * N;
      const V e = hn::IfThenElseZero(valid, ExpNonPositiveF(d, hn::Sub(hn::LoadU(d, sr), vm[r])));
      hn::StoreU(e, d, sr);
      sum[r] = hn::Add(sum[r], e);
    }
  }
  for (size_t r = 0; r < kRows; r++) hn::Store(sum[r], d, l + r * N);
}

// o[r][c0, c0 + kNV * N) += sum_j p[r][j] v[j][c0, ...) for the kRows rows of the tile p (row
// stride lds) and the nj value rows of v (row stride ldv, padded with zeros to whole vectors).
template <size_t kNV, class D>
HWY_INLINE void ValueTile(D d, const float* HWY_RESTRICT p, size_t lds, size_t nj,
                          const float* HWY_RESTRICT v, size_t ldv, float* HWY_RESTRICT o,
                          size_t ldo) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  V acc[kRows][kNV];
  for (size_t r = 0; r < kRows; r++) {
    for (size_t u = 0; u < kNV; u++) acc[r][u] = hn::LoadU(d, o + r * ldo + u * N);
  }
  for (size_t j = 0; j < nj; j++) {
    V vv[kNV];
    for (size_t u = 0; u < kNV; u++) vv[u] = hn::Load(d, v + j * ldv + u * N);
    for (size_t r = 0; r < kRows; r++) {
      const V pb = hn::Set(d, p[r * lds + j]);
      for (size_t u = 0; u < kNV; u++) acc[r][u] = hn::MulAdd(pb, vv[u], acc[r][u]);
    }
  }
  for (size_t r = 0; r < kRows; r++) {
    for (size_t u = 0; u < kNV; u++) hn::StoreU(acc[r][u], d, o + r * ldo + u * N);
  }
}

template <class D>
HWY_INLINE void ValueTiles(D d, const float* p, size_t lds, size_t nj, const float* v, size_t ldv,
                           size_t width, float* o, size_t ldo) {
  const size_t N = hn::Lanes(d);
  for (size_t c0 = 0; c0 < width; c0 += kOutVecs * N) {
    WithCount(std::min(kOutVecs, (width - c0) / N), [&](auto nv) HWY_ATTR {
      ValueTile<decltype(nv)::value>(d, p, lds, nj, v + c0, ldv, o + c0, ldo);
    });
  }
}

// The last columns of the values when they are fewer than half a vector (d = 36: 4 past two whole
// vectors) are dot products over the keys instead: o[r][u * N, +N) += p[r][0, njv) * vt[u][0,
// njv) lane by lane for the kRows rows of the tile p and kNC of those columns, transposed into vt
// (rows ldt apart, zeros past the block's keys); the lanes are summed when the chunk ends. A
// whole padded vector per row and key would cost N / kNC times the multiply-adds.
template <size_t kNC, class D>
HWY_INLINE void TailTile(D d, const float* HWY_RESTRICT p, size_t lds, size_t njv,
                         const float* HWY_RESTRICT vt, size_t ldt, float* HWY_RESTRICT o,
                         size_t ldo) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  V acc[kRows][kNC];
  for (size_t r = 0; r < kRows; r++) {
    for (size_t u = 0; u < kNC; u++) acc[r][u] = hn::Load(d, o + r * ldo + u * N);
  }
  for (size_t j = 0; j < njv; j += N) {
    V pv[kRows];
    for (size_t r = 0; r < kRows; r++) pv[r] = hn::LoadU(d, p + r * lds + j);
    for (size_t u = 0; u < kNC; u++) {
      const V vv = hn::Load(d, vt + u * ldt + j);
      for (size_t r = 0; r < kRows; r++) acc[r][u] = hn::MulAdd(pv[r], vv, acc[r][u]);
    }
  }
  for (size_t r = 0; r < kRows; r++) {
    for (size_t u = 0; u < kNC; u++) hn::Store(acc[r][u], d, o + r * ldo + u * N);
  }
}

template <class D>
HWY_INLINE void TailTiles(D d, const float* p, size_t lds, size_t njv, const float* vt, size_t ldt,
                          size_t tail, float* o, size_t ldo) {
  const size_t N = hn::Lanes(d);
  // kOutVecs columns at a time: as many accumulators as ValueTile's widest tile.
  for (size_t c0 = 0; c0 < tail; c0 += kOutVecs) {
    WithCount(std::min(kOutVecs, tail - c0), [&](auto nc) HWY_ATTR {
      TailTile<decltype(nc)::value>(d, p, lds, njv, vt + c0 * ldt, ldt, o + c0 * N, ldo);
    });
  }
}

// dst[0, n) = src[0, n) as f32, and zeros up to the next whole vector.
template <class D, typename T>
HWY_INLINE void PackRow(D d, const T* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT dst) {
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::Store(LoadF32(d, src + i), d, dst + i);
  if (i < n) hn::Store(LoadNF32(d, src + i, n - i), d, dst + i);
}

// kt[k * ldk + j] = k_rows[j * ldr + k] as f32 for the nj rows of K, zeros for j in [nj, njv):
// a block of K^T packed from K's rows (ldr elements apart).
template <class D, typename T>
void PackTransposed(D d, const T* HWY_RESTRICT k_rows, size_t ldr, size_t nj, size_t njv,
                    size_t depth, float* HWY_RESTRICT kt, size_t ldk, float* HWY_RESTRICT row) {
  for (size_t k = 0; k < depth; k++) std::fill(kt + k * ldk + nj, kt + k * ldk + njv, 0.0f);
  size_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (std::is_same_v<T, float>) {
    // 4 x 4 blocks transposed in registers: one 16-byte store per column of 4 keys instead of
    // four scalar ones (ldk and j are multiples of 4, so the stores stay in one line).
    const hn::Full128<float> d4;
    for (; j + 4 <= nj; j += 4) {
      const float* r0 = k_rows + j * ldr;
      const float* r1 = r0 + ldr;
      const float* r2 = r1 + ldr;
      const float* r3 = r2 + ldr;
      size_t k = 0;
      for (; k + 4 <= depth; k += 4) {
        const auto a0 = hn::LoadU(d4, r0 + k), a1 = hn::LoadU(d4, r1 + k);
        const auto a2 = hn::LoadU(d4, r2 + k), a3 = hn::LoadU(d4, r3 + k);
        const auto t0 = hn::InterleaveLower(d4, a0, a1), t1 = hn::InterleaveLower(d4, a2, a3);
        const auto t2 = hn::InterleaveUpper(d4, a0, a1), t3 = hn::InterleaveUpper(d4, a2, a3);
        hn::StoreU(hn::ConcatLowerLower(d4, t1, t0), d4, kt + k * ldk + j);
        hn::StoreU(hn::ConcatUpperUpper(d4, t1, t0), d4, kt + (k + 1) * ldk + j);
        hn::StoreU(hn::ConcatLowerLower(d4, t3, t2), d4, kt + (k + 2) * ldk + j);
        hn::StoreU(hn::ConcatUpperUpper(d4, t3, t2), d4, kt + (k + 3) * ldk + j);
      }
      for (; k < depth; k++) {
        kt[k * ldk + j] = r0[k];
        kt[k * ldk + j + 1] = r1[k];
        kt[k * ldk + j + 2] = r2[k];
        kt[k * ldk + j + 3] = r3[k];
      }
    }
  }
#endif
  for (; j < nj; j++) {
    PackRow(d, k_rows + j * ldr, depth, row);  // widened once, then scattered
    for (size_t k = 0; k < depth; k++) kt[k * ldk + j] = row[k];
  }
}

// s[r * lds + j] = q[r] . K[j] for the first `real` rows of q and the nj rows of K ([nj, depth],
// rows ldr apart): one dot product per score, for tiles of a few query rows (a decoder's step)
// where transposing K into blocks would cost more than the scores.
template <class D, typename T>
HWY_INLINE void ScoreRowsDirect(D d, const float* HWY_RESTRICT q, size_t depth, size_t real,
                                const T* HWY_RESTRICT k_rows, size_t ldr, size_t nj,
                                float* HWY_RESTRICT s, size_t lds) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  for (size_t r = real; r < kRows; r++) std::fill(s + r * lds, s + r * lds + nj, 0.0f);
  for (size_t j = 0; j < nj; j++) {
    const T* row = k_rows + j * ldr;
    for (size_t r = 0; r < real; r++) {
      V acc = hn::Zero(d);
      size_t k = 0;
      for (; k + N <= depth; k += N)
        acc = hn::MulAdd(hn::LoadU(d, q + r * depth + k), LoadF32(d, row + k), acc);
      if (k < depth) {  // q's row is zero-padded past depth only in the tile buffer's last row
        acc = hn::MulAdd(LoadNF32(d, q + r * depth + k, depth - k), LoadNF32(d, row + k, depth - k),
                         acc);
      }
      s[r * lds + j] = ReduceSumF(d, acc);
    }
  }
}

// The largest |x| of floats, as the bits of |x| taken as unsigned integers: their order is |x|'s,
// and a NaN or an infinity gives 0x7f800000 or more. One AND and one integer max per vector, where
// a float max (which drops NaN) needs a second test, and one reduction for many rows.
template <class D>
class AbsMax {
 public:
  explicit AbsMax(D) : acc_(hn::Zero(du_)) {}
  // Takes the n floats at p into account.
  HWY_INLINE void Add(D d, const float* HWY_RESTRICT p, size_t n) {
    const size_t N = hn::Lanes(d);
    const auto magnitude = hn::Set(du_, 0x7fffffffu);
    size_t i = 0;
    for (; i + N <= n; i += N)
      acc_ = hn::Max(acc_, hn::And(hn::BitCast(du_, hn::LoadU(d, p + i)), magnitude));
    if (i < n)
      acc_ = hn::Max(acc_, hn::And(hn::BitCast(du_, LoadNF32(d, p + i, n - i)), magnitude));
  }
  // The largest |x| so far (0 if none); +inf when one was not finite (NaN included).
  HWY_INLINE float Get() const {
    const uint32_t bits = hn::GetLane(hn::MaxOfLanes(du_, acc_));
    if (bits >= 0x7f800000u) return std::numeric_limits<float>::infinity();
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }

 private:
  hn::RebindToUnsigned<D> du_;
  hn::VFromD<hn::RebindToUnsigned<D>> acc_;
};

// The largest |x| of the n floats at p; +inf when one is not finite (NaN included).
template <class D>
HWY_INLINE float MaxAbs(D d, const float* HWY_RESTRICT p, size_t n) {
  AbsMax<D> m(d);
  m.Add(d, p, n);
  return m.Get();
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_KERNELS_CPU_ATTENTION_TILES_INL_H_
