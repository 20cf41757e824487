// The vector loops of the recurrent kernel's steps (recurrent.cc), per Highway target: a row
// vector times R^T's rows (the step's recurrence) and a row's activation.
#include <algorithm>
#include <cmath>
#include <cstdint>

// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include "kernels/cpu/recurrent_steps.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/recurrent_steps.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "ir/recurrent.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc[0, n) += sum_k v[k] rt[k * ld + (0, n)]: four vectors of columns held in registers while
// the k rows pass, then the next four.
void RecurGemv(const float* HWY_RESTRICT rt, int64_t ld, const float* HWY_RESTRICT v, int64_t k,
               float* HWY_RESTRICT acc, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t j = 0;
  for (; j + 4 * N <= n; j += 4 * N) {
    auto a0 = hn::LoadU(d, acc + j), a1 = hn::LoadU(d, acc + j + N),
         a2 = hn::LoadU(d, acc + j + 2 * N), a3 = hn::LoadU(d, acc + j + 3 * N);
    for (int64_t i = 0; i < k; i++) {
      const auto s = hn::Set(d, v[i]);
      const float* row = rt + i * ld + j;
      a0 = hn::MulAdd(s, hn::LoadU(d, row), a0);
      a1 = hn::MulAdd(s, hn::LoadU(d, row + N), a1);
      a2 = hn::MulAdd(s, hn::LoadU(d, row + 2 * N), a2);
      a3 = hn::MulAdd(s, hn::LoadU(d, row + 3 * N), a3);
    }
    hn::StoreU(a0, d, acc + j);
    hn::StoreU(a1, d, acc + j + N);
    hn::StoreU(a2, d, acc + j + 2 * N);
    hn::StoreU(a3, d, acc + j + 3 * N);
  }
  for (; j + N <= n; j += N) {
    auto a = hn::LoadU(d, acc + j);
    for (int64_t i = 0; i < k; i++)
      a = hn::MulAdd(hn::Set(d, v[i]), hn::LoadU(d, rt + i * ld + j), a);
    hn::StoreU(a, d, acc + j);
  }
  for (; j < n; j++) {
    float s = acc[j];
    for (int64_t i = 0; i < k; i++) s += v[i] * rt[i * ld + j];
    acc[j] = s;
  }
}

// The same for e rows of v (stride ldv) into e rows of acc (stride lda): four rows and two
// vectors of columns at a time, so each vector of R^T loaded serves four rows.
void RecurGemm(const float* HWY_RESTRICT rt, int64_t ld, const float* HWY_RESTRICT v, int64_t ldv,
               int64_t e, int64_t k, float* HWY_RESTRICT acc, int64_t lda, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t r = 0;
  for (; r + 4 <= e; r += 4) {
    const float* v0 = v + r * ldv;
    float* c0 = acc + r * lda;
    int64_t j = 0;
    for (; j + 2 * N <= n; j += 2 * N) {
      auto a00 = hn::LoadU(d, c0 + j), a01 = hn::LoadU(d, c0 + j + N);
      auto a10 = hn::LoadU(d, c0 + lda + j), a11 = hn::LoadU(d, c0 + lda + j + N);
      auto a20 = hn::LoadU(d, c0 + 2 * lda + j), a21 = hn::LoadU(d, c0 + 2 * lda + j + N);
      auto a30 = hn::LoadU(d, c0 + 3 * lda + j), a31 = hn::LoadU(d, c0 + 3 * lda + j + N);
      for (int64_t i = 0; i < k; i++) {
        const auto w0 = hn::LoadU(d, rt + i * ld + j), w1 = hn::LoadU(d, rt + i * ld + j + N);
        const auto s0 = hn::Set(d, v0[i]), s1 = hn::Set(d, v0[ldv + i]),
                   s2 = hn::Set(d, v0[2 * ldv + i]), s3 = hn::Set(d, v0[3 * ldv + i]);
        a00 = hn::MulAdd(s0, w0, a00);
        a01 = hn::MulAdd(s0, w1, a01);
        a10 = hn::MulAdd(s1, w0, a10);
        a11 = hn::MulAdd(s1, w1, a11);
        a20 = hn::MulAdd(s2, w0, a20);
        a21 = hn::MulAdd(s2, w1, a21);
        a30 = hn::MulAdd(s3, w0, a30);
        a31 = hn::MulAdd(s3, w1, a31);
      }
      hn::StoreU(a00, d, c0 + j);
      hn::StoreU(a01, d, c0 + j + N);
      hn::StoreU(a10, d, c0 + lda + j);
      hn::StoreU(a11, d, c0 + lda + j + N);
      hn::StoreU(a20, d, c0 + 2 * lda + j);
      hn::StoreU(a21, d, c0 + 2 * lda + j + N);
      hn::StoreU(a30, d, c0 + 3 * lda + j);
      hn::StoreU(a31, d, c0 + 3 * lda + j + N);
    }
    for (int64_t q = 0; q < 4 && j < n; q++) {  // the columns left, row by row
      RecurGemv(rt + j, ld, v0 + q * ldv, k, c0 + q * lda + j, n - j);
    }
  }
  for (; r < e; r++) RecurGemv(rt, ld, v + r * ldv, k, acc + r * lda, n);
}

// y[0, n) = act(clip(x[0, n))), clip when > 0; Softplus through the scalar formula.
void ActivateRow(int64_t code, float clip, const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto act = recurrent::Act(code);
  auto scalar = [&](float v) {
    if (clip > 0) v = std::clamp(v, -clip, clip);
    return recurrent::activate(act, v);
  };
  int64_t i = 0;
  if (act != recurrent::Act::Softplus) {
    const auto lo = hn::Set(d, -clip), hi = hn::Set(d, clip), one = hn::Set(d, 1.0f);
    for (; i + N <= n; i += N) {
      auto v = hn::LoadU(d, x + i);
      if (clip > 0) v = hn::Min(hi, hn::Max(lo, v));
      switch (act) {
        case recurrent::Act::Sigmoid:
          v = SigmoidF(d, v);
          break;
        case recurrent::Act::Tanh:
          v = TanhF(d, v);
          break;
        case recurrent::Act::Relu:
          v = ReluF(d, v);
          break;
        case recurrent::Act::Softsign:
          v = hn::Div(v, hn::Add(one, hn::Abs(v)));
          break;
        case recurrent::Act::Softplus:
          break;
      }
      hn::StoreU(v, d, y + i);
    }
  }
  for (; i < n; i++) y[i] = scalar(x[i]);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ubfuse {
HWY_EXPORT(RecurGemm);
HWY_EXPORT(ActivateRow);

namespace cpu {

void recur_gemm(const float* rt, int64_t ld, const float* v, int64_t ldv, int64_t e, int64_t k,
                float* acc, int64_t lda, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RecurGemm)(rt, ld, v, ldv, e, k, acc, lda, n);
}

void activate_row(int64_t code, float clip, const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ActivateRow)(code, clip, x, y, n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
