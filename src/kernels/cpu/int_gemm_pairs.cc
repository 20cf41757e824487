// The exact int8 product on pair panels (int_gemm_pairs.h): each row of A - za as i16 pairs of
// K, one 32-bit broadcast per pair, multiplied against a panel's pair row by Highway's
// ReorderWidenMulAccumulate (VPMADDWD on x86), the sums of six rows x two vectors of columns in
// registers. Blocked as ubfuse's own f32 panels are (matmul_small.cc): groups of four panels, K in
// slices of 256 rows (the group's slice, 64 KiB, stays in L2; the rows' pairs in L1).
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include "kernels/cpu/int_gemm_pairs.h"

#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int_gemm_pairs.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x86 targets with 256- or 512-bit vectors: their ReorderWidenMulAccumulate is one VPMADDWD on
// whole i32 lanes of two i16 (the pair layout). Other targets do not compile the loop.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr bool kPairsFit = true;
constexpr int64_t kPW = ubfuse::cpu::kPairPanelWidth;
constexpr int64_t kGroup = 4;         // panels per group
constexpr int64_t kSlicePairs = 128;  // pairs of K per slice (256 rows)

// c[r, n0:n0+cols) (+)= the R rows of pairs ap (row stride Kp) over pairs [q0, q1) times a tile
// of kV vectors of columns of one panel (tile: its first column's pairs, 2 * kPW apart): the sums
// start at 0 when `first`, else at what c holds. cols: the tile's columns that exist.
template <int R, int kV>
HWY_INLINE void PairRows(const uint32_t* HWY_RESTRICT ap, int64_t Kp,
                         const int16_t* HWY_RESTRICT tile, int32_t* HWY_RESTRICT c, int64_t N,
                         int64_t n0, int64_t cols, int64_t q0, int64_t q1, bool first) {
  const hn::ScalableTag<int32_t> d32;
  const hn::Repartition<int16_t, decltype(d32)> d16;
  constexpr int kL = int(hn::MaxLanes(d32));
  constexpr int kT = kV * kL;  // columns
  using V32 = hn::Vec<decltype(d32)>;
  V32 acc[R][kV], spare[R][kV];  // spare: ReorderWidenMulAccumulate's second sums (unused here)
  HWY_ALIGN int32_t tail[kT];
  for (int r = 0; r < R; r++) {
    const int32_t* in = c + r * N + n0;
    for (int v = 0; v < kV; v++) spare[r][v] = hn::Zero(d32);
    if (first) {
      for (int v = 0; v < kV; v++) acc[r][v] = hn::Zero(d32);
    } else if (cols == kT) {
      for (int v = 0; v < kV; v++) acc[r][v] = hn::LoadU(d32, in + v * kL);
    } else {
      for (int64_t j = 0; j < kT; j++) tail[j] = j < cols ? in[j] : 0;
      for (int v = 0; v < kV; v++) acc[r][v] = hn::Load(d32, tail + v * kL);
    }
  }
  for (int64_t q = q0; q < q1; q++) {
    const int16_t* bq = tile + q * 2 * kPW;
    hn::Vec<decltype(d16)> bv[kV];
    for (int v = 0; v < kV; v++) bv[v] = hn::LoadU(d16, bq + v * 2 * kL);
    for (int r = 0; r < R; r++) {
      const auto x = hn::BitCast(d16, hn::Set(d32, int32_t(ap[r * Kp + q])));
      for (int v = 0; v < kV; v++) {
        acc[r][v] = hn::ReorderWidenMulAccumulate(d32, x, bv[v], acc[r][v], spare[r][v]);
      }
    }
  }
  for (int r = 0; r < R; r++) {
    int32_t* out = c + r * N + n0;
    for (int v = 0; v < kV; v++) acc[r][v] = hn::RearrangeToOddPlusEven(acc[r][v], spare[r][v]);
    if (cols == kT) {
      for (int v = 0; v < kV; v++) hn::StoreU(acc[r][v], d32, out + v * kL);
      continue;
    }
    for (int v = 0; v < kV; v++) hn::Store(acc[r][v], d32, tail + v * kL);
    for (int64_t j = 0; j < cols; j++) out[j] = tail[j];
  }
}

// Calls f(m, std::integral_constant<int, R>) for blocks of kMax rows covering [m0, m1), the last
// block the rows left.
template <int kMax, class F>
HWY_INLINE void InRowBlocks(int64_t m0, int64_t m1, const F& f) {
  int64_t m = m0;
  for (; m + kMax <= m1; m += kMax) f(m, std::integral_constant<int, kMax>{});
  const int64_t left = m1 - m;
  if (left == 0) return;
  if constexpr (kMax > 1) {
    if (left == kMax - 1) return f(m, std::integral_constant<int, kMax - 1>{});
    InRowBlocks<kMax - 1>(m, m1, f);
  }
}

// Rows [m0, m1) by panels [p0, p1) of C = A B on pair panels (ap: A's rows as pairs, Kp apiece).
void PairPanelRange(const uint32_t* ap, int64_t Kp, const int16_t* panels, int32_t* c, int64_t N,
                    int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  // Tiles of six rows by two vectors of columns: 12 sum registers, a panel in one tile on
  // AVX-512 and two on AVX2 (six rows of the whole panel there would need 24).
  constexpr int kRows = 6, kV = 2;
  constexpr int64_t kT = kV * int64_t(hn::MaxLanes(hn::ScalableTag<int32_t>()));
  static_assert(kPW % kT == 0, "a panel is whole tiles");
  for (int64_t g0 = p0; g0 < p1; g0 += kGroup) {
    const int64_t g1 = std::min(p1, g0 + kGroup);
    for (int64_t q0 = 0; q0 < Kp; q0 += kSlicePairs) {
      const int64_t q1 = std::min(Kp, q0 + kSlicePairs);
      InRowBlocks<kRows>(m0, m1, [&](int64_t m, auto rows) {
        for (int64_t p = g0; p < g1; p++) {
          for (int64_t t = 0; t < kPW && p * kPW + t < N; t += kT) {
            const int64_t n0 = p * kPW + t, cols = std::min<int64_t>(kT, N - n0);
            PairRows<decltype(rows)::value, kV>(ap + m * Kp, Kp, panels + p * Kp * 2 * kPW + 2 * t,
                                                c + m * N, N, n0, cols, q0, q1, q0 == 0);
          }
        }
      });
    }
  }
}
#else
constexpr bool kPairsFit = false;

void PairPanelRange(const uint32_t*, int64_t, const int16_t*, int32_t*, int64_t, int64_t, int64_t,
                    int64_t, int64_t) {
  HWY_ABORT("pair panels need AVX2 or AVX-512 (pair_panels_available)");
}
#endif

bool PairsFit() { return kPairsFit; }

}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <memory>

#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {

HWY_EXPORT(PairPanelRange);
HWY_EXPORT(PairsFit);

bool pair_panels_available() { return HWY_DYNAMIC_DISPATCH(PairsFit)(); }

namespace {

int64_t pairs_of(int64_t K) { return (K + 1) / 2; }

template <class T>
void pack_typed(const T* b, int64_t K, int64_t N, int16_t* out) {
  const int64_t Kp = pairs_of(K);
  for (int64_t p = 0; p * kPairPanelWidth < N; p++) {
    const int64_t n0 = p * kPairPanelWidth, cols = std::min<int64_t>(kPairPanelWidth, N - n0);
    int16_t* panel = out + p * Kp * 2 * kPairPanelWidth;
    for (int64_t q = 0; q < Kp; q++) {
      int16_t* row = panel + q * 2 * kPairPanelWidth;
      const T* b0 = b + 2 * q * N + n0;
      const T* b1 = 2 * q + 1 < K ? b0 + N : nullptr;
      for (int64_t j = 0; j < cols; j++) {
        row[2 * j] = int16_t(b0[j]);
        row[2 * j + 1] = b1 ? int16_t(b1[j]) : int16_t(0);
      }
    }
  }
}

// Row i of A - za as pairs of i16 in u32 (the low half the even column), and its sum.
template <class T>
uint32_t pair_row(const T* a, int32_t za, int64_t K, uint32_t* out) {
  uint32_t sum = 0;
  int64_t q = 0;
  for (; 2 * q + 1 < K; q++) {
    const int32_t lo = int32_t(a[2 * q]) - za, hi = int32_t(a[2 * q + 1]) - za;
    sum += uint32_t(lo + hi);
    out[q] = uint32_t(uint16_t(lo)) | (uint32_t(uint16_t(hi)) << 16);
  }
  if (K % 2) {
    const int32_t lo = int32_t(a[K - 1]) - za;
    sum += uint32_t(lo);
    out[q] = uint32_t(uint16_t(lo));
  }
  return sum;
}

}  // namespace

int64_t pair_panels_elems(int64_t K, int64_t N) {
  return (N + kPairPanelWidth - 1) / kPairPanelWidth * pairs_of(K) * 2 * kPairPanelWidth;
}

std::vector<int16_t> pack_pair_panels(const void* b, DType tb, int64_t K, int64_t N) {
  std::vector<int16_t> out(size_t(pair_panels_elems(K, N)), 0);
  if (tb == DType::i8) {
    pack_typed(static_cast<const int8_t*>(b), K, N, out.data());
  } else {
    pack_typed(static_cast<const uint8_t*>(b), K, N, out.data());
  }
  return out;
}

void pair_panel_gemm(const void* a, DType ta, const int32_t* za, const int32_t* zb,
                     const int16_t* panels, int32_t* c, int64_t M, int64_t K, int64_t N,
                     ThreadPool& pool) {
  if (M == 0 || N == 0) return;
  const int64_t Kp = pairs_of(K);
  // Every pair and row sum is written below, so neither buffer is zero-filled first.
  const auto ap = std::make_unique_for_overwrite<uint32_t[]>(static_cast<size_t>(M * Kp));
  const auto asum = std::make_unique_for_overwrite<uint32_t[]>(static_cast<size_t>(M));
  auto prepare = [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; i++) {
      uint32_t* out = ap.get() + i * Kp;
      asum[size_t(i)] = ta == DType::i8
                            ? pair_row(static_cast<const int8_t*>(a) + i * K, za[i], K, out)
                            : pair_row(static_cast<const uint8_t*>(a) + i * K, za[i], K, out);
    }
  };
  const int64_t count = (N + kPairPanelWidth - 1) / kPairPanelWidth;
  // A call below about 64K multiply-adds per worker runs on this thread: waking one costs more.
  const bool parallel = pool.size() > 1 && M * K * N >= (int64_t(1) << 17);
  if (parallel) {
    pool.parallel_for(M, grain_for(K), prepare);
  } else {
    prepare(0, M, 0);
  }
  // Where there are fewer panels than threads (a narrow B), threads take runs of rows instead.
  const bool by_rows = count < pool.size() && M >= 2 * pool.size();
  auto run = [&](int64_t lo, int64_t hi, int) {
    if (by_rows) {
      HWY_DYNAMIC_DISPATCH(PairPanelRange)(ap.get(), Kp, panels, c, N, lo, hi, 0, count);
    } else {
      HWY_DYNAMIC_DISPATCH(PairPanelRange)(ap.get(), Kp, panels, c, N, 0, M, lo, hi);
    }
  };
  if (!parallel) {
    HWY_DYNAMIC_DISPATCH(PairPanelRange)(ap.get(), Kp, panels, c, N, 0, M, 0, count);
  } else {
    pool.parallel_for(by_rows ? M : count, 1, run);
  }
  // B's zero points: c[i, j] -= zb[j] sum_k (A - za)[i, k], in wrapping u32 lanes.
  if (std::any_of(zb, zb + N, [](int32_t z) { return z != 0; })) {
    auto correct = [&](int64_t r0, int64_t r1, int) {
      for (int64_t i = r0; i < r1; i++) {
        uint32_t* ci = reinterpret_cast<uint32_t*>(c + i * N);
        const uint32_t s = asum[size_t(i)];
        for (int64_t j = 0; j < N; j++) ci[j] -= s * uint32_t(zb[j]);
      }
    };
    if (parallel) {
      pool.parallel_for(M, grain_for(N), correct);
    } else {
      correct(0, M, 0);
    }
  }
}

}  // namespace ubfuse::cpu
#endif  // HWY_ONCE
