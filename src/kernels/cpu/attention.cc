// Flash-style attention (attention.h). A task is one batch and a chunk of query rows. It walks
// the keys in blocks of kKeyBlock: for every 4 query rows it computes their scores against the
// block into a tile, applies the graph's steps (scale, mask), folds the tile into the rows'
// running max and sum (rescaling what was accumulated when the max grows) and adds the tile's
// exp times the block's values to the rows' outputs. The block of K^T and V stays in L1 while
// the chunk's rows pass over it; the scores never reach memory. Everything is computed in f32;
// bf16/f16 operands are widened into per-thread buffers first.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include "kernels/cpu/attention.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/kernel_util.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/attention_mask-inl.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

#ifndef UBFUSE_KERNELS_CPU_ATTENTION_DETAIL_
#define UBFUSE_KERNELS_CPU_ATTENTION_DETAIL_
namespace ubfuse::cpu::attention_detail {

// Bytes the packed blocks of K^T and V may take together, so that both stay in L1 while a chunk's
// tiles pass over them: the core's L1 data cache less 4 KiB for the tile of scores and the rows
// being accumulated (the speech encoder's d = 36 then takes blocks of 128 keys on a 48 KiB L1, 64
// on a 32 KiB one: 1.22 -> 1.12 ms per attention, Zen 5); 28 KiB where the size is not known.
inline size_t block_bytes() {
  static const size_t bytes = [] {
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return size_t(l1 >= (16 << 10) && l1 <= (1 << 20) ? l1 : 32 << 10) - (size_t(4) << 10);
  }();
  return bytes;
}

// Per-thread staging: the chunk's query rows, K^T and V widened to f32, the output rows being
// accumulated with their running max and sum, and one tile of scores; the MaskRows of one mask
// by query row (`have` marks those read), kept for the rest of the call: the chunks of other
// heads that share the mask (causal, padding) on this thread reuse them.
struct Scratch {
  std::vector<float> q, kt, v, o, m, l, s, row, pack_row;
  std::vector<MaskRow> mask_rows;
  std::vector<uint8_t> mask_have;
  uint64_t mask_call = 0;
  const void* mask_at = nullptr;
};
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
inline void fit(std::vector<float>& b, size_t n) {
  if (b.size() < n) b.resize(n);
}
// Room for n floats in b, starting at a 64-byte boundary.
inline float* aligned(std::vector<float>& b, size_t n) {
  fit(b, n + 16);
  const uintptr_t a = reinterpret_cast<uintptr_t>(b.data());
  return b.data() + ((64 - a % 64) % 64) / sizeof(float);
}

}  // namespace ubfuse::cpu::attention_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

namespace ad = cpu::attention_detail;

constexpr size_t kRows = 4;  // query rows per tile
// Keys per block: at most kKeyBlock, fewer where the packed K^T and V blocks would not fit
// ad::block_bytes() together.
constexpr size_t kKeyBlock = 128;
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

// Widens n elements of src (dtype t) into dst; a copy for f32.
template <typename T>
void Widen(const T* src, float* dst, size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    cpu::convert_floats(std::is_same_v<T, hwy::bfloat16_t> ? DType::bf16 : DType::f16, src,
                        DType::f32, dst, int64_t(n));
  }
}

template <typename T, typename TM>
void Chunk(const cpu::AttentionProblem& p, int64_t b, int64_t i0, int64_t i1, uint64_t call) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const size_t depth = size_t(p.d), lk = size_t(p.lk), dv = size_t(p.dv);
  ad::Scratch& sc = ad::scratch();
  // The chunk's query rows, in whole tiles (rows past i1 are zeros; their results are dropped).
  const size_t rows = size_t(i1 - i0);
  const size_t tiles = (rows + kRows - 1) / kRows;
  float* q = ad::aligned(sc.q, tiles * kRows * depth);
  std::fill(q + rows * depth, q + tiles * kRows * depth, 0.0f);
  const size_t q_ld = p.q_ld ? size_t(p.q_ld) : depth, k_ld = p.k_ld ? size_t(p.k_ld) : depth,
               v_ld = p.v_ld ? size_t(p.v_ld) : dv;
  const T* q_src = static_cast<const T*>(p.q) + p.q_off[size_t(b)] + size_t(i0) * q_ld;
  if (q_ld == depth) {
    Widen(q_src, q, rows * depth);
  } else {
    for (size_t r = 0; r < rows; r++) Widen(q_src + r * q_ld, q + r * depth, depth);
  }
  // A scale right after the product is applied to q instead (one multiply per query element, not
  // per score; the scores differ from the graph's by a rounding). A factor of 0 or inf stays a
  // step: 0 * inf in the scores must still give NaN.
  size_t first_step = 0;
  if (!p.steps.empty() && (p.steps[0].kind == cpu::AttentionStep::kMul ||
                           p.steps[0].kind == cpu::AttentionStep::kDiv)) {
    const float c =
        p.steps[0].kind == cpu::AttentionStep::kMul ? p.steps[0].scalar : 1.0f / p.steps[0].scalar;
    if (std::isfinite(c) && c != 0.0f) {
      for (size_t i = 0; i < rows * depth; i++) q[i] *= c;
      first_step = 1;
    }
  }
  // The value columns in whole vectors (ValueTiles) and, where fewer than half a vector are left
  // over, those as dot products (TailTiles): an output row holds the whole vectors' columns, then
  // one vector of partial sums per tail column.
  const size_t full = dv / N * N, tail = dv - full;
  const bool dot_tail = tail > 0 && 2 * tail <= N;
  const size_t ldv = dot_tail ? full : (dv + N - 1) / N * N;  // the packed V block's row stride
  const size_t ldo = ldv + (dot_tail ? tail * N : 0);
  float* o = ad::aligned(sc.o, tiles * kRows * ldo);
  std::fill(o, o + tiles * kRows * ldo, 0.0f);
  ad::fit(sc.m, tiles * kRows);
  float* lsum = ad::aligned(sc.l, tiles * kRows * N);  // each row's sum, in N lanes
  std::fill(sc.m.begin(), sc.m.end(), -std::numeric_limits<float>::infinity());
  std::fill(lsum, lsum + tiles * kRows * N, 0.0f);
  // A single tile reuses no block, so it takes the largest (fewer softmax updates per row).
  const size_t step = kScoreVecs * N;  // ScoreTile's widest column group
  const size_t kb =
      tiles == 1 ? kKeyBlock
                 : std::clamp<size_t>(ad::block_bytes() /
                                          ((depth + ldv + (dot_tail ? tail : 0)) * sizeof(float)) /
                                          step * step,
                                      step, kKeyBlock);
  const size_t lds = kKeyBlock + N;
  float* s = ad::aligned(sc.s, kRows * lds);
  // Each block of K^T ([depth, kb], wider for a merged last block) and V ([kb, ldv]) is packed
  // into aligned rows padded with zeros (widened from bf16/f16 on the way): whole aligned
  // vectors, no line splits; V's dot-product tail transposed after it ([tail, kKeyBlock]).
  // With K given as rows (k_rows) the block is transposed while it is packed.
  float* ktp = ad::aligned(sc.kt, depth * kKeyBlock);
  float* vp = ad::aligned(sc.v, kKeyBlock * (ldv + tail));
  float* vt = vp + kKeyBlock * ldv;  // 64-byte aligned: kKeyBlock * ldv floats are whole lines
  const size_t ldt = kKeyBlock;
  const T* kt = static_cast<const T*>(p.kt) + p.kt_off[size_t(b)];
  const T* v = static_cast<const T*>(p.v) + p.v_off[size_t(b)];
  // f32 value rows of whole vectors, each at an aligned address: ValueTile reads them in place.
  const bool v_in_place = std::is_same_v<T, float> && !dot_tail && dv % N == 0 && v_ld % N == 0 &&
                          reinterpret_cast<uintptr_t>(v) % (N * sizeof(float)) == 0;
  const TM* mask = p.mask ? static_cast<const TM*>(p.mask) + p.mask_off[size_t(b)] : nullptr;
  // Blocks masked out for a tile's rows (a causal mask's upper triangle) are skipped where that
  // is exact: the mask is the last step, and the scores before it are bounded by
  // depth * max|q| * max|k| times the steps' factors (TileKeysNeeded).
  const bool mask_last = mask && first_step < p.steps.size() && IsMaskStep(p.steps.back());
  // The bound on a tile's scores before the mask: depth max|q| max|k| (the raw product), then
  // each step's factor in turn, every partial below half of float's max so that no step's
  // result overflows (an infinite score times a factor of 0 would be NaN); +inf otherwise.
  const auto score_bound = [&](float qm, float km) {
    const double half = 0.5 * double(std::numeric_limits<float>::max());
    double bnd = double(depth) * double(qm) * double(km);
    if (!(bnd <= half)) return std::numeric_limits<float>::infinity();
    for (size_t k = first_step; k + 1 < p.steps.size(); k++) {
      const double f = std::abs(double(p.steps[k].scalar));
      bnd = p.steps[k].kind == cpu::AttentionStep::kMul ? bnd * f : bnd / f;
      if (!(bnd <= half)) return std::numeric_limits<float>::infinity();
    }
    return float(bnd);
  };
  // K as rows: one tile scores them directly, more tiles share a transposed packed block.
  const bool direct = p.k_rows && tiles == 1;
  std::vector<float>& qmax = sc.row;      // per tile
  const ad::MaskRow* mrow_ext = nullptr;  // per row of the chunk
  if (mask_last && !direct) {
    ad::fit(qmax, tiles);
    for (size_t t = 0; t < tiles; t++) qmax[t] = MaxAbs(d, q + t * kRows * depth, kRows * depth);
    if (sc.mask_call != call || sc.mask_at != mask) {
      sc.mask_rows.resize(size_t(p.lq));
      sc.mask_have.assign(size_t(p.lq), 0);
      sc.mask_call = call;
      sc.mask_at = mask;
    }
    for (size_t r = 0; r < rows; r++) {
      const size_t i = size_t(i0) + r;
      if (sc.mask_have[i]) continue;
      // One mask row for all (a padding mask): the chunk's first row, read first.
      sc.mask_rows[i] = r > 0 && p.mask_row_stride == 0
                            ? sc.mask_rows[size_t(i0)]
                            : MaskExtent(d, p.steps.back(), mask + int64_t(i) * p.mask_row_stride,
                                         lk, p.mask_col_stride);
      sc.mask_have[i] = 1;
    }
    mrow_ext = sc.mask_rows.data() + i0;
  }
  size_t nj = 0;
  for (size_t j0 = 0; j0 < lk; j0 += nj) {
    // A last block of a quarter of kb or less joins the one before (513 keys: 64 x 7 and 65, not
    // 64 x 8 and 1): a block's softmax update costs about the same for one key as for kb.
    nj = std::min(kb, lk - j0);
    if (lk - j0 - nj <= kb / 4 && lk - j0 <= kKeyBlock) nj = lk - j0;
    const size_t njv = (nj + N - 1) / N * N;
    const size_t ldk = std::max(kb, njv);  // the packed K^T block's row stride
    if (!p.k_rows) {
      for (size_t k = 0; k < depth; k++) PackRow(d, kt + k * lk + j0, nj, ktp + k * ldk);
    } else if (!direct) {
      PackTransposed(d, kt + j0 * k_ld, k_ld, nj, njv, depth, ktp, ldk,
                     ad::aligned(sc.pack_row, depth + N));
    }
    // The block's values: read where they are when they are f32 rows of whole aligned vectors,
    // else packed.
    const float* vb = vp;
    size_t vld = ldv;
    if constexpr (std::is_same_v<T, float>) {
      if (v_in_place) {
        vb = v + j0 * v_ld;
        vld = v_ld;
      }
    }
    if (!v_in_place && !dot_tail) {
      for (size_t j = 0; j < nj; j++) PackRow(d, v + (j0 + j) * v_ld, dv, vp + j * ldv);
    } else if (dot_tail) {  // never in place
      HWY_ALIGN float tv[HWY_MAX_BYTES / sizeof(float)];
      for (size_t j = 0; j < nj; j++) {
        const T* row = v + (j0 + j) * v_ld;
        if (full) PackRow(d, row, full, vp + j * ldv);
        hn::Store(LoadNF32(d, row + full, tail), d, tv);
        for (size_t c = 0; c < tail; c++) vt[c * ldt + j] = tv[c];
      }
      for (size_t c = 0; c < tail; c++) std::fill(vt + c * ldt + nj, vt + c * ldt + njv, 0.0f);
    }
    // A masked key adds 0 * v[j] to the outputs: NaN where v is not finite, so such a block is
    // never skipped.
    bool may_skip = mask_last && !direct;
    float kmax = 0.0f;
    if (may_skip) {
      AbsMax<decltype(d)> km(d), vm(d);
      for (size_t k = 0; k < depth; k++) km.Add(d, ktp + k * ldk, nj);
      kmax = km.Get();
      if (!v_in_place) {
        vm.Add(d, vp, nj * ldv);
      } else {
        for (size_t j = 0; j < nj; j++) vm.Add(d, vb + j * vld, dv);
      }
      for (size_t c = 0; c < (dot_tail ? tail : 0); c++) vm.Add(d, vt + c * ldt, nj);
      may_skip = std::isfinite(vm.Get());
    }
    for (size_t t = 0; t < tiles; t++) {
      const size_t r0 = t * kRows;
      // The tile's mask rows at this block; a padding row reads the chunk's last one.
      const TM* mrows[kRows] = {};
      for (size_t r = 0; r < kRows && mask; r++) {
        const int64_t i = std::min(i0 + int64_t(r0 + r), i1 - 1);
        mrows[r] = mask + i * p.mask_row_stride + int64_t(j0) * p.mask_col_stride;
      }
      // The keys the tile needs: all, none (skipped), or up to a causal mask's diagonal.
      const size_t nt =
          may_skip ? TileKeysNeeded(p.steps.back(), score_bound(qmax[t], kmax), mrow_ext + r0,
                                    std::min(kRows, rows - r0), j0, nj, &sc.m[r0])
                   : nj;
      if (nt == 0) continue;
      // The mask step leaves the scores as they are where every row's keys up to nt have a
      // neutral mask value (the keys below a causal mask's diagonal): then it is not run.
      size_t end_step = p.steps.size();
      if (mrow_ext) {
        bool neutral = true;
        for (size_t r = 0; r < std::min(kRows, rows - r0); r++)
          neutral = neutral && mrow_ext[r0 + r].zeros >= int64_t(j0 + nt);
        if (neutral) end_step--;
      }
      const size_t ntv = (nt + N - 1) / N * N;
      if (direct) {
        ScoreRowsDirect(d, q + r0 * depth, depth, rows, kt + j0 * k_ld, k_ld, nj, s, lds);
      } else {
        ScoreTile(d, q + r0 * depth, depth, ktp, ldk, ntv, s, lds);
      }
      SoftmaxUpdate(d, s, lds, nt, p.steps, first_step, end_step, mrows, p.mask_col_stride,
                    &sc.m[r0], lsum + r0 * N, o + r0 * ldo, ldo);
      ValueTiles(d, s, lds, nt, vb, vld, ldv, o + r0 * ldo, ldo);
      if (dot_tail) TailTiles(d, s, lds, ntv, vt, ldt, tail, o + r0 * ldo + ldv, ldo);
    }
  }
  const size_t out_ld = p.out_ld ? size_t(p.out_ld) : dv;
  T* out = static_cast<T*>(p.out) + p.out_off[size_t(b)] + size_t(i0) * out_ld;
  for (size_t r = 0; r < rows; r++) {
    const hn::VFromD<decltype(d)> inv = hn::Set(d, 1.0f / ReduceSumF(d, hn::Load(d, lsum + r * N)));
    const float* orow = o + r * ldo;
    const size_t cols = dot_tail ? full : dv;
    for (size_t c = 0; c < cols; c += N) {
      const hn::VFromD<decltype(d)> x = hn::Mul(hn::LoadU(d, orow + c), inv);
      if (c + N <= cols) {
        StoreF32(x, d, out + r * out_ld + c);
      } else {
        StoreNF32(x, d, out + r * out_ld + c, cols - c);
      }
    }
    if (dot_tail) {
      HWY_ALIGN float ts[HWY_MAX_BYTES / sizeof(float)] = {};
      for (size_t c = 0; c < tail; c++) ts[c] = ReduceSumF(d, hn::Load(d, orow + full + c * N));
      StoreNF32(hn::Mul(hn::Load(d, ts), inv), d, out + r * out_ld + full, tail);
    }
  }
}

void AttentionChunk(const cpu::AttentionProblem& p, int64_t b, int64_t i0, int64_t i1,
                    uint64_t call) {
  WithStorage(cpu::float_code(p.dtype), [&](auto s) HWY_ATTR {
    using T = typename decltype(s)::type;
    if (!p.mask) return Chunk<T, float>(p, b, i0, i1, call);
    if (p.mask_dtype == DType::boolean) return Chunk<T, uint8_t>(p, b, i0, i1, call);
    WithStorage(cpu::float_code(p.mask_dtype), [&](auto sm) HWY_ATTR {
      Chunk<T, typename decltype(sm)::type>(p, b, i0, i1, call);
    });
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ubfuse {
HWY_EXPORT(AttentionChunk);

namespace cpu {

bool has_bf16_dot_products() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return has;
#else
  return false;
#endif
}

void run_attention(const AttentionProblem& p, ThreadPool& pool) {
  UBF_CHECK(p.d >= 0 && p.dv >= 0 && p.lq >= 0 && p.lk > 0, "attention problem sizes");
  UBF_CHECK(p.q_off.size() == size_t(p.batches) && p.kt_off.size() == size_t(p.batches) &&
                p.v_off.size() == size_t(p.batches) && p.out_off.size() == size_t(p.batches) &&
                (!p.mask || p.mask_off.size() == size_t(p.batches)),
            "attention offsets per batch");
  if (p.batches == 0 || p.lq == 0 || p.dv == 0) return;
  // Chunks of up to 256 query rows (each packs all of its batch's K and V once), 512 when K comes
  // as rows (transposed while packed, which costs more than a copy), smaller until every thread
  // has a few.
  int64_t rows = p.k_rows ? 512 : 256;
  const int64_t want = 4 * int64_t(pool.size());
  while (rows > 4 && p.batches * ((p.lq + rows - 1) / rows) < want) rows /= 2;
  // A remainder of up to an eighth of a chunk is spread over the chunks (ViT's 513 tokens: one
  // chunk of 513, not 512 and 1, which would pack all of K and V again for one row).
  const int64_t chunks = std::max<int64_t>(1, (p.lq + rows / 8) / rows);
  rows = ((p.lq + chunks - 1) / chunks + 3) / 4 * 4;
  const int64_t per = (p.lq + rows - 1) / rows;  // no empty chunk after the rounding to 4 rows
  // Chunks of at least ~32K multiply-adds: a decode step's few heads of one query row each run
  // on the calling thread, where waking a worker would cost more than they do.
  const int64_t chunk_macs = std::max<int64_t>(1, std::min(rows, p.lq) * p.lk * (p.d + p.dv));
  const int64_t grain = std::max<int64_t>(1, (int64_t(32) << 10) / chunk_macs);
  // Tells a thread's chunks of this call from those of earlier calls (MaskRows are reused within
  // one call only: the next may bring other mask values at the same address).
  static std::atomic<uint64_t> calls{0};
  const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  pool.parallel_for(p.batches * per, grain, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; t++) {
      const int64_t b = t / per, i0 = (t % per) * rows;
      HWY_DYNAMIC_DISPATCH(AttentionChunk)(p, b, i0, std::min(p.lq, i0 + rows), call);
    }
  });
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
