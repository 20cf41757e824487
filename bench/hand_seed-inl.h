// The seed block silu(layer_norm(x + residual, w, b)) written by hand for f32, the yardstick the
// generated kernel is held to: per row, x + residual into a row buffer (in L1/L2) with its sum,
// the variance from the buffer, then silu((s - mean) * rstd * w + b) stored, with the same
// SiluF (and exp) as ubfuse's kernels. A Highway per-target header (bench/fusion_bench.cc).
#if defined(UBFUSE_BENCH_HAND_SEED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_BENCH_HAND_SEED_INL_H_
#undef UBFUSE_BENCH_HAND_SEED_INL_H_
#else
#define UBFUSE_BENCH_HAND_SEED_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <vector>

#include "hwy/highway.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

// Rows [r0, r1) of [rows, cols] f32 tensors; cols a multiple of the vector length. Non-temporal
// stores when `stream` (y 64-byte aligned rows).
inline void HandSeedRows(const float* x, const float* res, const float* w, const float* b, float* y,
                         int64_t r0, int64_t r1, int64_t cols, bool stream) {
  const hn::ScalableTag<float> d;
  using V = hn::VFromD<decltype(d)>;
  const size_t N = hn::Lanes(d);
  thread_local std::vector<float> row;
  if (row.size() < size_t(cols)) row.resize(size_t(cols));
  float* s = row.data();
  for (int64_t r = r0; r < r1; r++) {
    const float* xr = x + r * cols;
    const float* rr = res + r * cols;
    float* yr = y + r * cols;
    V sum0 = hn::Zero(d), sum1 = hn::Zero(d);
    for (size_t i = 0; i < size_t(cols); i += 2 * N) {
      const V a = hn::Add(hn::LoadU(d, xr + i), hn::LoadU(d, rr + i));
      const V c = hn::Add(hn::LoadU(d, xr + i + N), hn::LoadU(d, rr + i + N));
      hn::StoreU(a, d, s + i);
      hn::StoreU(c, d, s + i + N);
      sum0 = hn::Add(sum0, a);
      sum1 = hn::Add(sum1, c);
    }
    const float mean = ReduceSumF(d, hn::Add(sum0, sum1)) / float(cols);
    const V vm = hn::Set(d, mean);
    V q0 = hn::Zero(d), q1 = hn::Zero(d);
    for (size_t i = 0; i < size_t(cols); i += 2 * N) {
      const V a = hn::Sub(hn::LoadU(d, s + i), vm);
      const V c = hn::Sub(hn::LoadU(d, s + i + N), vm);
      q0 = hn::MulAdd(a, a, q0);
      q1 = hn::MulAdd(c, c, q1);
    }
    const float var = ReduceSumF(d, hn::Add(q0, q1)) / float(cols);
    const V rstd = hn::Set(d, 1.0f / std::sqrt(var + 1e-5f));
    for (size_t i = 0; i < size_t(cols); i += N) {
      const V n = hn::Mul(hn::Sub(hn::LoadU(d, s + i), vm), rstd);
      const V o = SiluF(d, hn::MulAdd(n, hn::LoadU(d, w + i), hn::LoadU(d, b + i)));
      if (stream) {
        hn::Stream(o, d, yr + i);
      } else {
        hn::StoreU(o, d, yr + i);
      }
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_BENCH_HAND_SEED_INL_H_
