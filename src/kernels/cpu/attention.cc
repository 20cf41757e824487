// Flash-style attention (attention.h). A task is one batch and a chunk of query rows. It walks
// the keys in blocks of kKeyBlock: for every 4 query rows it computes their scores against the
// block into a tile, applies the graph's steps (scale, mask), folds the tile into the rows'
// running max and sum (rescaling what was accumulated when the max grows) and adds the tile's
// exp times the block's values to the rows' outputs (the tile kernels: attention_tiles-inl.h; the
// mask's: attention_mask-inl.h). The block of K^T and V stays in L1 while the chunk's rows pass
// over it; the scores never reach memory. Everything is computed in f32; bf16/f16 operands are
// widened into per-thread buffers first. Where the value columns are no whole number of vectors
// and there is no mask, ChunkLanes runs a chunk with its query rows across the lanes instead
// (attention_lanes-inl.h).
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
#include "kernels/cpu/attention_lanes-inl.h"
#include "kernels/cpu/attention_mask-inl.h"
#include "kernels/cpu/attention_tiles-inl.h"
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

// Keys per block: at most kKeyBlock, fewer where the packed K^T and V blocks would not fit
// ad::block_bytes() together.
constexpr size_t kKeyBlock = 128;

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

// A scale right after the product is applied to q instead (one multiply per query element, not
// per score; the scores differ from the graph's by a rounding). A factor of 0 or inf stays a
// step: 0 * inf in the scores must still give NaN. So does one above 1 in magnitude: q times it
// could overflow where the graph's product does not. Below 1, the graph's product overflows
// where the scaled one need not: such scores are made infinite (OverflowToInf). Returns the
// first step left to apply to the scores (1 where the scale went into q, else 0).
inline size_t QScale(const cpu::AttentionProblem& p, float* qscale) {
  *qscale = 1.0f;
  if (p.steps.empty() || (p.steps[0].kind != cpu::AttentionStep::kMul &&
                          p.steps[0].kind != cpu::AttentionStep::kDiv)) {
    return 0;
  }
  const float c =
      p.steps[0].kind == cpu::AttentionStep::kMul ? p.steps[0].scalar : 1.0f / p.steps[0].scalar;
  if (!std::isfinite(c) || c == 0.0f || std::abs(c) > 1.0f) return 0;
  *qscale = c;
  return 1;
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
  float qscale = 1.0f;
  const size_t first_step = QScale(p, &qscale);
  // Row by row, each scaled while it is in L1 (a chunk's rows may not all fit there).
  for (size_t r = 0; r < rows; r++) {
    float* qr = q + r * depth;
    Widen(q_src + r * q_ld, qr, depth);
    if (first_step == 1) {
      for (size_t i = 0; i < depth; i++) qr[i] *= qscale;
    }
  }
  // A scaled score at or above this in magnitude is one whose unscaled product overflows float.
  const float overflow_at = std::numeric_limits<float>::max() * std::abs(qscale);
  const float q_max = first_step == 1 ? MaxAbs(d, q, rows * depth) : 0.0f;
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
    if (may_skip || (first_step == 1 && !direct)) {
      AbsMax<decltype(d)> km(d);
      for (size_t k = 0; k < depth; k++) km.Add(d, ktp + k * ldk, nj);
      kmax = km.Get();
    }
    // Whether a scaled score of this block may reach overflow_at: by the bound in double where the
    // block is packed (read again by every tile), always where K's rows are scored in place (a
    // decode step's one tile, which would otherwise read K twice).
    const bool may_overflow =
        first_step == 1 &&
        (direct || double(depth) * double(q_max) * double(kmax) >= double(overflow_at));
    if (may_skip) {
      AbsMax<decltype(d)> vm(d);
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
      if (may_overflow) OverflowToInf(d, s, lds, ntv, overflow_at);
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

// Chunk with the query rows across the lanes (attention_lanes-inl.h) for f32 operands, no mask
// and no step but a scale folded into q, where the value columns are no whole number of vectors
// (the speech encoder's 36): there Chunk's per-row max and sum reductions and its dot products
// for the columns past the whole vectors cost more than transposing Q and O for the chunk
// ([8,512,36] on one core: 2.59-2.80 ms against 2.84-3.28, Intel Xeon). False (nothing done)
// where it does not apply: rows that fill tiles less than 7/8 (a decode step's few), inputs
// whose scores may not be finite (Chunk handles their overflow to infinity and NaN).
bool ChunkLanes(const cpu::AttentionProblem& p, int64_t b, int64_t i0, int64_t i1) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const size_t depth = size_t(p.d), lk = size_t(p.lk), dv = size_t(p.dv), rows = size_t(i1 - i0);
  const size_t tile = kLaneVecs * N, tiles = (rows + tile - 1) / tile, rp = tiles * tile;
  float qscale = 1.0f;
  if (p.dtype != DType::f32 || p.mask || QScale(p, &qscale) != p.steps.size() || dv % N == 0 ||
      depth == 0 || rows == 0 || (rp - rows) * 8 > rows) {
    return false;
  }
  const size_t q_ld = p.q_ld ? size_t(p.q_ld) : depth, k_ld = p.k_ld ? size_t(p.k_ld) : depth,
               v_ld = p.v_ld ? size_t(p.v_ld) : dv;
  const float* q_src = static_cast<const float*>(p.q) + p.q_off[size_t(b)] + size_t(i0) * q_ld;
  const float* kt = static_cast<const float*>(p.kt) + p.kt_off[size_t(b)];
  const float* v = static_cast<const float*>(p.v) + p.v_off[size_t(b)];
  // Every score finite, also before the scale (whose factor is at most 1): depth max|q| max|k|
  // below float's max (a NaN or infinity in q or K fails it too); else Chunk's.
  AbsMax<decltype(d)> km(d);
  if (p.k_rows) {
    for (size_t j = 0; j < lk; j++) km.Add(d, kt + j * k_ld, depth);
  } else {
    km.Add(d, kt, depth * lk);
  }
  AbsMax<decltype(d)> qm(d);
  for (size_t r = 0; r < rows; r++) qm.Add(d, q_src + r * q_ld, depth);
  if (!(double(depth) * double(qm.Get()) * double(km.Get()) <
        double(std::numeric_limits<float>::max()))) {
    return false;
  }
  ad::Scratch& sc = ad::scratch();
  // Q^T scaled ([depth, rp], zeros past the chunk's rows), O^T ([dv, rp]), the rows' max and sum.
  float* qt = ad::aligned(sc.q, depth * rp);
  for (size_t dd = 0; dd < depth; dd++) {
    float* row = qt + dd * rp;
    for (size_t r = 0; r < rows; r++) row[r] = q_src[r * q_ld + dd] * qscale;
    std::fill(row + rows, row + rp, 0.0f);
  }
  float* ot = ad::aligned(sc.o, dv * rp);
  std::fill(ot, ot + dv * rp, 0.0f);
  float* m = ad::aligned(sc.l, 2 * rp);
  float* l = m + rp;
  std::fill(m, m + rp, -std::numeric_limits<float>::infinity());
  std::fill(l, l + rp, 0.0f);
  // Blocks of keys whose rows of K and V and the tile's scores stay in L1 together.
  const size_t kb = std::clamp<size_t>(
      ad::block_bytes() / ((depth + dv + tile) * sizeof(float)) / kLaneKeys * kLaneKeys, kLaneKeys,
      kKeyBlock);
  float* kp = ad::aligned(sc.kt, kKeyBlock * depth);
  float* vp = ad::aligned(sc.v, kKeyBlock * dv);
  float* st = ad::aligned(sc.s, kKeyBlock * tile);
  size_t nj = 0;
  for (size_t j0 = 0; j0 < lk; j0 += nj) {
    // A last block of a quarter of kb or less joins the one before (as in Chunk).
    nj = std::min(kb, lk - j0);
    if (lk - j0 - nj <= kb / 4 && lk - j0 <= kKeyBlock) nj = lk - j0;
    for (size_t j = 0; j < nj; j++) {
      float* kr = kp + j * depth;
      if (p.k_rows) {
        std::memcpy(kr, kt + (j0 + j) * k_ld, depth * sizeof(float));
      } else {
        for (size_t dd = 0; dd < depth; dd++) kr[dd] = kt[dd * lk + j0 + j];
      }
      std::memcpy(vp + j * dv, v + (j0 + j) * v_ld, dv * sizeof(float));
    }
    for (size_t t = 0; t < tiles; t++) {
      LaneScores(d, qt + t * tile, rp, depth, kp, nj, st);
      LaneSoftmax(d, st, nj, m + t * tile, l + t * tile, ot + t * tile, rp, dv);
      LaneValues(d, st, nj, vp, dv, ot + t * tile, rp);
    }
  }
  const size_t out_ld = p.out_ld ? size_t(p.out_ld) : dv;
  float* out = static_cast<float*>(p.out) + p.out_off[size_t(b)] + size_t(i0) * out_ld;
  for (size_t r = 0; r < rows; r++) {
    const float inv = 1.0f / l[r];
    for (size_t c = 0; c < dv; c++) out[r * out_ld + c] = ot[c * rp + r] * inv;
  }
  return true;
}

void AttentionChunk(const cpu::AttentionProblem& p, int64_t b, int64_t i0, int64_t i1,
                    uint64_t call) {
  if (ChunkLanes(p, b, i0, i1)) return;
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
