// f32 MatMul with a few rows (a decode step's projections: [1, K] x [K, N]) as a Highway loop:
// each block of output columns keeps up to four rows' sums in registers while it reads B once.
// oneDNN's per-call cost (stream, memory objects, its OpenMP region) is several microseconds,
// more than such a product takes; large B are split by columns over the pool.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_small.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// C[r, n0:n1) = A[r, :] B[:, n0:n1) for the R rows at a, c (row strides K and N).
template <int R>
HWY_INLINE void RowsTimesB(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                           float* HWY_RESTRICT c, int64_t K, int64_t N, int64_t n0, int64_t n1) {
  const hn::ScalableTag<float> d;
  const int64_t L = int64_t(hn::Lanes(d));
  int64_t n = n0;
  for (; n + 2 * L <= n1; n += 2 * L) {
    hn::Vec<decltype(d)> s0[R], s1[R];
    for (int r = 0; r < R; r++) s0[r] = s1[r] = hn::Zero(d);
    for (int64_t k = 0; k < K; k++) {
      const auto b0 = hn::LoadU(d, b + k * N + n);
      const auto b1 = hn::LoadU(d, b + k * N + n + L);
      for (int r = 0; r < R; r++) {
        const auto x = hn::Set(d, a[r * K + k]);
        s0[r] = hn::MulAdd(x, b0, s0[r]);
        s1[r] = hn::MulAdd(x, b1, s1[r]);
      }
    }
    for (int r = 0; r < R; r++) {
      hn::StoreU(s0[r], d, c + r * N + n);
      hn::StoreU(s1[r], d, c + r * N + n + L);
    }
  }
  for (; n + L <= n1; n += L) {
    hn::Vec<decltype(d)> s[R];
    for (int r = 0; r < R; r++) s[r] = hn::Zero(d);
    for (int64_t k = 0; k < K; k++) {
      const auto b0 = hn::LoadU(d, b + k * N + n);
      for (int r = 0; r < R; r++) s[r] = hn::MulAdd(hn::Set(d, a[r * K + k]), b0, s[r]);
    }
    for (int r = 0; r < R; r++) hn::StoreU(s[r], d, c + r * N + n);
  }
  for (; n < n1; n++) {
    for (int r = 0; r < R; r++) {
      float s = 0;
      for (int64_t k = 0; k < K; k++) s += a[r * K + k] * b[k * N + n];
      c[r * N + n] = s;
    }
  }
}

void SmallMatMulColumns(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N,
                        int64_t n0, int64_t n1) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) RowsTimesB<4>(a + m * K, b, c + m * N, K, N, n0, n1);
  switch (M - m) {
    case 3:
      RowsTimesB<3>(a + m * K, b, c + m * N, K, N, n0, n1);
      break;
    case 2:
      RowsTimesB<2>(a + m * K, b, c + m * N, K, N, n0, n1);
      break;
    case 1:
      RowsTimesB<1>(a + m * K, b, c + m * N, K, N, n0, n1);
      break;
    default:
      break;
  }
}

int64_t LanesF32() { return int64_t(hn::Lanes(hn::ScalableTag<float>())); }

}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/matmul_small.h"

namespace ubfuse::cpu {

HWY_EXPORT(SmallMatMulColumns);
HWY_EXPORT(LanesF32);

bool small_matmul_applies(int64_t M, int64_t K, int64_t N) {
  if (M < 1 || M > kSmallMatMulRows || K < 1 || N < 1) return false;
  // Past four rows B is read once per four: only while it stays in the core's L2.
  return M <= 4 || K * N <= (int64_t(1) << 18);
}

void small_matmul_f32(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N,
                      ThreadPool& pool) {
  // Column chunks of whole vector pairs, each at least 64K multiply-adds: below that one thread
  // finishes before another would have woken.
  const int64_t block = 2 * HWY_DYNAMIC_DISPATCH(LanesF32)();
  const int64_t blocks = (N + block - 1) / block;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, M * K * block));
  auto cols = [&](int64_t lo, int64_t hi) {
    HWY_DYNAMIC_DISPATCH(SmallMatMulColumns)
    (a, b, c, M, K, N, lo * block, std::min(N, hi * block));
  };
  if (blocks <= grain || pool.size() <= 1) {
    cols(0, blocks);
    return;
  }
  pool.parallel_for(blocks, grain, [&](int64_t lo, int64_t hi, int) { cols(lo, hi); });
}

}  // namespace ubfuse::cpu
#endif  // HWY_ONCE
