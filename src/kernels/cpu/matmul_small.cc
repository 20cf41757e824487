// f32 MatMul with few rows (a decode step's projections: [1, K] x [K, N], short prompts) as Highway
// loops. Such products are bound by reading B, which both loops read as one contiguous stream:
// oneDNN's kernels, and a loop over column blocks of plain B, read it at a fraction of that rate,
// and oneDNN's per-call cost (stream, memory objects, its OpenMP region) is several microseconds.
// * Plain B (small_matmul_f32): row by row into the rows' sums, which stay in cache; threads
//   split K.
// * Constant B that oneDNN packed in 64-column panels (panel_matmul_f32): panel by panel, the
//   sums in registers; threads split the panels.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include "kernels/cpu/matmul_small.h"

#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_small.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc[r, :] += A[r, k0:k1) B[k0:k1, :] for the R rows at a (row stride K) and acc (row stride N).
// B is read one row after another, eight rows per sweep over the columns (two chains of sums):
// a contiguous stream the hardware prefetcher follows, where walking B by column blocks crosses a
// page on every row.
template <int R>
HWY_INLINE void AccumulateRows(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                               float* HWY_RESTRICT acc, int64_t K, int64_t N, int64_t k0,
                               int64_t k1) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t nv = N - N % L;
  int64_t k = k0;
  for (; k + 8 <= k1; k += 8) {
    const float* b0 = b + k * N;
    for (int64_t n = 0; n < nv; n += L) {
      hn::Vec<decltype(d)> v[8];
      for (int i = 0; i < 8; i++) v[i] = hn::LoadU(d, b0 + i * N + n);
      for (int r = 0; r < R; r++) {
        auto s = hn::LoadU(d, acc + r * N + n);
        auto t = hn::Mul(hn::Set(d, a[r * K + k + 4]), v[4]);
        s = hn::MulAdd(hn::Set(d, a[r * K + k]), v[0], s);
        t = hn::MulAdd(hn::Set(d, a[r * K + k + 5]), v[5], t);
        s = hn::MulAdd(hn::Set(d, a[r * K + k + 1]), v[1], s);
        t = hn::MulAdd(hn::Set(d, a[r * K + k + 6]), v[6], t);
        s = hn::MulAdd(hn::Set(d, a[r * K + k + 2]), v[2], s);
        t = hn::MulAdd(hn::Set(d, a[r * K + k + 7]), v[7], t);
        s = hn::MulAdd(hn::Set(d, a[r * K + k + 3]), v[3], s);
        hn::StoreU(hn::Add(s, t), d, acc + r * N + n);
      }
    }
    for (int64_t n = nv; n < N; n++) {
      for (int r = 0; r < R; r++) {
        float s = acc[r * N + n];
        for (int i = 0; i < 8; i++) s += a[r * K + k + i] * b0[i * N + n];
        acc[r * N + n] = s;
      }
    }
  }
  for (; k < k1; k++) {
    const float* brow = b + k * N;
    for (int r = 0; r < R; r++) {
      const auto x = hn::Set(d, a[r * K + k]);
      int64_t n = 0;
      for (; n < nv; n += L) {
        hn::StoreU(hn::MulAdd(x, hn::LoadU(d, brow + n), hn::LoadU(d, acc + r * N + n)), d,
                   acc + r * N + n);
      }
      for (; n < N; n++) acc[r * N + n] += a[r * K + k] * brow[n];
    }
  }
}

// Calls block(std::integral_constant<int, n>{}) for a run-time n in [1, 6].
template <class B>
HWY_INLINE void WithRowCount(int64_t n, const B& block) {
  switch (n) {
    case 6:
      return block(std::integral_constant<int, 6>{});
    case 5:
      return block(std::integral_constant<int, 5>{});
    case 4:
      return block(std::integral_constant<int, 4>{});
    case 3:
      return block(std::integral_constant<int, 3>{});
    case 2:
      return block(std::integral_constant<int, 2>{});
    case 1:
      return block(std::integral_constant<int, 1>{});
    default:
      HWY_ABORT("matmul_small: %d rows in a block", int(n));
  }
}

// Calls f(m, std::integral_constant<int, R>) for blocks of R rows covering [0, M) in order: four
// at a time, then the 1 to 3 left.
template <class F>
HWY_INLINE void InRowBlocks(int64_t M, const F& f) {
  int64_t m = 0;
  auto block = [&](auto rows) {
    f(m, rows);
    m += decltype(rows)::value;
  };
  while (M - m >= 4) block(std::integral_constant<int, 4>{});
  if (M > m) WithRowCount(M - m, block);
}

// acc[M, N] += A[:, k0:k1) B[k0:k1, :], the rows four at a time: B's eight rows of one sweep stay
// in cache for the next rows.
void SmallMatMulRange(const float* a, const float* b, float* acc, int64_t M, int64_t K, int64_t N,
                      int64_t k0, int64_t k1) {
  for (int64_t kb = k0; kb < k1; kb += 8) {
    const int64_t ke = std::min(k1, kb + 8);
    InRowBlocks(M, [&](int64_t m, auto rows) {
      AccumulateRows<decltype(rows)::value>(a + m * K, b, acc + m * N, K, N, kb, ke);
    });
  }
}

// Where one pass over a panel prefetches its share of the next panel into L2: the lines
// [t * 4 / passes, (t + 1) * 4 / passes) at its t-th step of the passes x K (a pass's row k of
// the panel, slice by slice), so the next panel arrives evenly over all passes of this one and
// memory works while the cores multiply.
struct PanelAhead {
  const float* next;  // the next panel, or null
  int64_t line;       // the next line of it to fetch (64 bytes, 16 floats)
  int64_t carry;      // 4 * steps so far, modulo passes
  int64_t passes;
};

// c[r, n0:n0+cols) (+)= A[r, k0:k1) times rows [k0, k1) of one W-column panel of packed B (row
// k at panel + k * W), for the R rows at a and c: the sums start at 0 when `first`, else at what
// c holds, and stay in registers while the panel's rows stream past.
template <int R, int W>
HWY_INLINE void PanelRows(const float* HWY_RESTRICT a, const float* HWY_RESTRICT panel,
                          PanelAhead& ahead, float* HWY_RESTRICT c, int64_t K, int64_t N,
                          int64_t n0, int64_t cols, int64_t k0, int64_t k1, bool first) {
  const hn::ScalableTag<float> d;
  constexpr int kL = int(hn::MaxLanes(d));
  static_assert(W % kL == 0 && W % 16 == 0, "a panel row is whole vectors and cache lines");
  constexpr int kV = W / kL;  // vectors per panel row
  hn::Vec<decltype(d)> acc[R][kV];
  HWY_ALIGN float tail[W];
  for (int r = 0; r < R; r++) {
    const float* in = c + r * N + n0;
    if (first) {
      for (int v = 0; v < kV; v++) acc[r][v] = hn::Zero(d);
    } else if (cols == W) {
      for (int v = 0; v < kV; v++) acc[r][v] = hn::LoadU(d, in + v * kL);
    } else {
      for (int64_t j = 0; j < W; j++) tail[j] = j < cols ? in[j] : 0.0f;
      for (int v = 0; v < kV; v++) acc[r][v] = hn::Load(d, tail + v * kL);
    }
  }
  for (int64_t k = k0; k < k1; k++) {
    if (ahead.next) {
      for (ahead.carry += W / 16; ahead.carry >= ahead.passes; ahead.carry -= ahead.passes) {
        __builtin_prefetch(ahead.next + ahead.line * 16, 0, 2);
        ahead.line++;
      }
    }
    hn::Vec<decltype(d)> bv[kV];
    for (int v = 0; v < kV; v++) bv[v] = hn::LoadU(d, panel + k * W + v * kL);
    for (int r = 0; r < R; r++) {
      const auto x = hn::Set(d, a[r * K + k]);
      for (int v = 0; v < kV; v++) acc[r][v] = hn::MulAdd(x, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; r++) {
    float* out = c + r * N + n0;
    if (cols == W) {
      for (int v = 0; v < kV; v++) hn::StoreU(acc[r][v], d, out + v * kL);
      continue;
    }
    for (int v = 0; v < kV; v++) hn::Store(acc[r][v], d, tail + v * kL);
    for (int64_t j = 0; j < cols; j++) out[j] = tail[j];
  }
}

// Calls f(m, std::integral_constant<int, R>) for blocks of R <= 6 rows covering [0, M) in order,
// in as few passes as blocks of six allow and none of fewer than three rows where M >= 3 (a block
// of one or two rows multiplies at a fraction of the rate: too few independent sums).
template <class F>
HWY_INLINE void InPanelRowBlocks(int64_t M, const F& f) {
  int64_t m = 0;
  auto block = [&](auto rows) {
    f(m, rows);
    m += decltype(rows)::value;
  };
  while (M - m > 8) block(std::integral_constant<int, 6>{});
  if (M - m >= 7) block(std::integral_constant<int, 4>{});  // 7 = 4 + 3, 8 = 4 + 4
  if (M > m) WithRowCount(M - m, block);
}

// Rows of a panel per slice when A's rows take several passes over it: 128 rows of 64 floats
// (32 KiB) stay in L1 while every pass runs over them, where a whole panel (K x 256 bytes) sits in
// L2 and its rows came from there on every pass.
constexpr int64_t kPanelSliceRows = 128;

// The panels [p0, p1) of C = A B for B packed as oneDNN's 64-column panels (panel p at
// panels + (p - first) * panel_stride), each in passes of up to six rows of A (24 sums in
// registers), slice by slice of the panel's rows when there is more than one pass; the passes also
// fetch the next panel into L2 (PanelAhead), so every pass after a thread's first reads B from
// cache.
void PanelMatMulRange(const float* a, const float* panels, int64_t panel_stride, float* c,
                      int64_t M, int64_t K, int64_t N, int64_t p0, int64_t p1, int64_t first) {
  int64_t passes = 0;
  InPanelRowBlocks(M, [&](int64_t, auto) { passes++; });
  const int64_t slice = passes > 1 ? kPanelSliceRows : K;
  for (int64_t p = p0; p < p1; p++) {
    const float* panel = panels + (p - first) * panel_stride;
    PanelAhead ahead{p + 1 < p1 ? panel + panel_stride : nullptr, 0, 0, passes};
    const int64_t n0 = p * 64, cols = std::min<int64_t>(64, N - n0);
    for (int64_t k0 = 0; k0 < K; k0 += slice) {
      const int64_t k1 = std::min(K, k0 + slice);
      InPanelRowBlocks(M, [&](int64_t m, auto rows) {
        PanelRows<decltype(rows)::value, 64>(a + m * K, panel, ahead, c + m * N, K, N, n0, cols, k0,
                                             k1, k0 == 0);
      });
    }
  }
}

// The panels [p0, p1) of C = A B for B packed by ubfuse in panels of kOwnPanelWidth columns
// (panel p at panels + p * K * kOwnPanelWidth, row k at + k * kOwnPanelWidth): by groups of
// kOwnPanelGroup panels, each group slice by slice of kOwnPanelSliceRows rows of B (the group's
// slice, 64 KiB, stays in L2), each slice in passes of up to six rows of A, and each pass over the
// group's panels in turn (its rows of A stay in L1). With 8-lane vectors the six rows' sums are 12
// registers, the panel row 2 more.
constexpr int64_t kOwnPanelGroup = 4;
constexpr int64_t kOwnPanelSliceRows = 256;
void OwnPanelMatMulRange(const float* a, const float* panels, float* c, int64_t M, int64_t K,
                         int64_t N, int64_t p0, int64_t p1) {
  constexpr int W = int(ubfuse::cpu::kOwnPanelWidth);
  if constexpr (hn::MaxLanes(hn::ScalableTag<float>()) > size_t(W) || W % 16 != 0) {
    HWY_ABORT("ubfuse's own panels need vectors of at most %d floats", W);
  } else {
    // A panel is one cache line per row, read in order: the hardware prefetcher streams it (a
    // software prefetch of the next slice measured no faster).
    PanelAhead none{nullptr, 0, 0, 1};
    for (int64_t g0 = p0; g0 < p1; g0 += kOwnPanelGroup) {
      const int64_t g1 = std::min(p1, g0 + kOwnPanelGroup);
      for (int64_t k0 = 0; k0 < K; k0 += kOwnPanelSliceRows) {
        const int64_t k1 = std::min(K, k0 + kOwnPanelSliceRows);
        InPanelRowBlocks(M, [&](int64_t m, auto rows) {
          for (int64_t p = g0; p < g1; p++) {
            const int64_t n0 = p * W, cols = std::min<int64_t>(W, N - n0);
            PanelRows<decltype(rows)::value, W>(a + m * K, panels + p * K * W, none, c + m * N, K,
                                                N, n0, cols, k0, k1, k0 == 0);
          }
        });
      }
    }
  }
}

// Whether the own panels' loop fits this target's registers: 8-lane vectors (AVX2), 16 registers.
bool OwnPanelsFit() { return hn::Lanes(hn::ScalableTag<float>()) == 8; }

// dst[i] += src[i] for i in [lo, hi).
void AddInto(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, int64_t lo, int64_t hi) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t i = lo;
  for (; i + L <= hi; i += L) {
    hn::StoreU(hn::Add(hn::LoadU(d, dst + i), hn::LoadU(d, src + i)), d, dst + i);
  }
  for (; i < hi; i++) dst[i] += src[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cstring>
#include <vector>

namespace ubfuse::cpu {

HWY_EXPORT(SmallMatMulRange);
HWY_EXPORT(AddInto);
HWY_EXPORT(PanelMatMulRange);
HWY_EXPORT(OwnPanelMatMulRange);
HWY_EXPORT(OwnPanelsFit);

bool small_matmul_applies(int64_t M, int64_t K, int64_t N) {
  if (M < 1 || M > kSmallMatMulRows || K < 1 || N < 1) return false;
  // Past four rows the sums of a sweep outgrow L1 and oneDNN is faster, unless B is small (in L2).
  return M <= 4 || K * N <= (int64_t(1) << 18);
}

void small_matmul_f32(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N,
                      ThreadPool& pool) {
  std::fill(c, c + M * N, 0.0f);
  // Threads split K (each reads its own contiguous part of B) in whole groups of eight rows, each
  // part at least 64K multiply-adds: below that one thread finishes before another would have
  // woken. Part 0 sums into c, the others into the calling thread's scratch, added in order.
  const int64_t groups = (K + 7) / 8;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, 8 * M * N));
  const int64_t parts = std::min<int64_t>(pool.size(), groups / grain);
  if (parts <= 1) {
    HWY_DYNAMIC_DISPATCH(SmallMatMulRange)(a, b, c, M, K, N, 0, K);
    return;
  }
  thread_local std::vector<float> scratch;
  const size_t part = size_t(M * N);
  if (scratch.size() < part * size_t(parts - 1)) scratch.resize(part * size_t(parts - 1));
  float* const slots = scratch.data();  // the lambda names it: workers have their own `scratch`
  pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi, int) {
    for (int64_t p = lo; p < hi; p++) {
      float* acc = p == 0 ? c : slots + part * size_t(p - 1);
      if (p > 0) std::fill(acc, acc + part, 0.0f);
      const int64_t g0 = groups * p / parts, g1 = groups * (p + 1) / parts;
      HWY_DYNAMIC_DISPATCH(SmallMatMulRange)(a, b, acc, M, K, N, g0 * 8, std::min(K, g1 * 8));
    }
  });
  for (int64_t p = 1; p < parts; p++) {
    HWY_DYNAMIC_DISPATCH(AddInto)(c, slots + part * size_t(p - 1), 0, M * N);
  }
}

void panel_matmul_f32_one(const float* a, const float* panel, float* c, int64_t M, int64_t K,
                          int64_t N, int64_t p) {
  HWY_DYNAMIC_DISPATCH(PanelMatMulRange)(a, panel, K * 64, c, M, K, N, p, p + 1, p);
}

void panel_matmul_f32(const float* a, const float* panels, int64_t panel_stride, float* c,
                      int64_t M, int64_t K, int64_t N, ThreadPool& pool) {
  // Threads take contiguous runs of panels (each a contiguous stream of B), each run at least
  // 64K multiply-adds.
  const int64_t count = (N + 63) / 64;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, M * K * 64));
  auto run = [&](int64_t lo, int64_t hi, int) {
    HWY_DYNAMIC_DISPATCH(PanelMatMulRange)(a, panels, panel_stride, c, M, K, N, lo, hi, 0);
  };
  if (count <= grain || pool.size() <= 1) {
    run(0, count, 0);
    return;
  }
  pool.parallel_for(count, grain, run);
}

bool own_panels_fit() { return HWY_DYNAMIC_DISPATCH(OwnPanelsFit)(); }

int64_t own_panels_floats(int64_t K, int64_t N) {
  return (N + kOwnPanelWidth - 1) / kOwnPanelWidth * kOwnPanelWidth * K;
}

void pack_own_panels_f32(const float* b, int64_t K, int64_t N, float* out) {
  const int64_t W = kOwnPanelWidth;
  for (int64_t p = 0; p * W < N; p++) {
    float* panel = out + p * K * W;
    const int64_t cols = std::min<int64_t>(W, N - p * W);
    for (int64_t k = 0; k < K; k++) {
      std::memcpy(panel + k * W, b + k * N + p * W, size_t(cols) * sizeof(float));
      std::fill(panel + k * W + cols, panel + (k + 1) * W, 0.0f);
    }
  }
}

void own_panel_matmul_f32(const float* a, const float* panels, float* c, int64_t M, int64_t K,
                          int64_t N, ThreadPool& pool) {
  // Threads take contiguous runs of panels, each run at least 64K multiply-adds.
  const int64_t count = (N + kOwnPanelWidth - 1) / kOwnPanelWidth;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, M * K * kOwnPanelWidth));
  auto run = [&](int64_t lo, int64_t hi, int) {
    HWY_DYNAMIC_DISPATCH(OwnPanelMatMulRange)(a, panels, c, M, K, N, lo, hi);
  };
  if (count <= grain || pool.size() <= 1) {
    run(0, count, 0);
    return;
  }
  pool.parallel_for(count, grain, run);
}

}  // namespace ubfuse::cpu
#endif  // HWY_ONCE
