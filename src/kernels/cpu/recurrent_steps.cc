// The vector loops of the recurrent kernel's steps (recurrent.cc), per Highway target: the batch
// entries' rows times the packed R^T (the step's recurrence) and a row's activation.
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

// The packed R^T (recurrent_steps.h): panels of P = 2 vectors of columns, each panel's k rows
// contiguous, so that the steps stream it in order.
int64_t PanelWidth() { return 2 * int64_t(hn::Lanes(hn::ScalableTag<float>())); }

void RecurPack(const float* HWY_RESTRICT r, int64_t k, int64_t c0, int64_t c1,
               float* HWY_RESTRICT out) {
  const int64_t P = PanelWidth();
  for (int64_t j = c0; j < c1; j += P) {
    const int64_t w = std::min(P, c1 - j);
    float* panel = out + (j - c0) * k;
    for (int64_t i = 0; i < k; i++) {
      for (int64_t q = 0; q < w; q++) panel[i * w + q] = r[(j + q) * k + i];
    }
  }
}

// One row: acc[0, n) += sum_i v[i] R^T[i, (0, n)] over the panels from column j on: four full
// panels at a time (eight accumulators, four streams), then one at a time, then the narrower
// last panel.
void RecurGemv(const float* HWY_RESTRICT packed, const float* HWY_RESTRICT v, int64_t k,
               float* HWY_RESTRICT acc, int64_t n, int64_t j) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d)), P = 2 * N;
  for (; j + 4 * P <= n; j += 4 * P) {
    const float* p0 = packed + j * k;
    const float* p1 = p0 + P * k;
    const float* p2 = p1 + P * k;
    const float* p3 = p2 + P * k;
    float* c = acc + j;
    auto a0 = hn::LoadU(d, c), a1 = hn::LoadU(d, c + N), a2 = hn::LoadU(d, c + P),
         a3 = hn::LoadU(d, c + P + N), a4 = hn::LoadU(d, c + 2 * P),
         a5 = hn::LoadU(d, c + 2 * P + N), a6 = hn::LoadU(d, c + 3 * P),
         a7 = hn::LoadU(d, c + 3 * P + N);
    for (int64_t i = 0; i < k; i++) {
      const auto s = hn::Set(d, v[i]);
      a0 = hn::MulAdd(s, hn::LoadU(d, p0 + i * P), a0);
      a1 = hn::MulAdd(s, hn::LoadU(d, p0 + i * P + N), a1);
      a2 = hn::MulAdd(s, hn::LoadU(d, p1 + i * P), a2);
      a3 = hn::MulAdd(s, hn::LoadU(d, p1 + i * P + N), a3);
      a4 = hn::MulAdd(s, hn::LoadU(d, p2 + i * P), a4);
      a5 = hn::MulAdd(s, hn::LoadU(d, p2 + i * P + N), a5);
      a6 = hn::MulAdd(s, hn::LoadU(d, p3 + i * P), a6);
      a7 = hn::MulAdd(s, hn::LoadU(d, p3 + i * P + N), a7);
    }
    hn::StoreU(a0, d, c);
    hn::StoreU(a1, d, c + N);
    hn::StoreU(a2, d, c + P);
    hn::StoreU(a3, d, c + P + N);
    hn::StoreU(a4, d, c + 2 * P);
    hn::StoreU(a5, d, c + 2 * P + N);
    hn::StoreU(a6, d, c + 3 * P);
    hn::StoreU(a7, d, c + 3 * P + N);
  }
  for (; j + P <= n; j += P) {
    const float* p0 = packed + j * k;
    auto a0 = hn::LoadU(d, acc + j), a1 = hn::LoadU(d, acc + j + N);
    for (int64_t i = 0; i < k; i++) {
      const auto s = hn::Set(d, v[i]);
      a0 = hn::MulAdd(s, hn::LoadU(d, p0 + i * P), a0);
      a1 = hn::MulAdd(s, hn::LoadU(d, p0 + i * P + N), a1);
    }
    hn::StoreU(a0, d, acc + j);
    hn::StoreU(a1, d, acc + j + N);
  }
  if (j < n) {
    const int64_t w = n - j;
    const float* p0 = packed + j * k;
    int64_t q = 0;
    for (; q + N <= w; q += N) {
      auto a = hn::LoadU(d, acc + j + q);
      for (int64_t i = 0; i < k; i++)
        a = hn::MulAdd(hn::Set(d, v[i]), hn::LoadU(d, p0 + i * w + q), a);
      hn::StoreU(a, d, acc + j + q);
    }
    for (; q < w; q++) {
      float s = acc[j + q];
      for (int64_t i = 0; i < k; i++) s += v[i] * p0[i * w + q];
      acc[j + q] = s;
    }
  }
}

// Eight rows of acc += v R^T over one full panel (columns [j, j + P)): each vector of R^T loaded
// serves eight rows (16 accumulators; targets with 32 vector registers).
void RecurRows8(const float* HWY_RESTRICT panel, const float* HWY_RESTRICT v, int64_t ldv,
                int64_t k, float* HWY_RESTRICT c, int64_t lda, int64_t j) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d)), P = 2 * N;
  auto a00 = hn::LoadU(d, c + j), a01 = hn::LoadU(d, c + j + N);
  auto a10 = hn::LoadU(d, c + lda + j), a11 = hn::LoadU(d, c + lda + j + N);
  auto a20 = hn::LoadU(d, c + 2 * lda + j), a21 = hn::LoadU(d, c + 2 * lda + j + N);
  auto a30 = hn::LoadU(d, c + 3 * lda + j), a31 = hn::LoadU(d, c + 3 * lda + j + N);
  auto a40 = hn::LoadU(d, c + 4 * lda + j), a41 = hn::LoadU(d, c + 4 * lda + j + N);
  auto a50 = hn::LoadU(d, c + 5 * lda + j), a51 = hn::LoadU(d, c + 5 * lda + j + N);
  auto a60 = hn::LoadU(d, c + 6 * lda + j), a61 = hn::LoadU(d, c + 6 * lda + j + N);
  auto a70 = hn::LoadU(d, c + 7 * lda + j), a71 = hn::LoadU(d, c + 7 * lda + j + N);
  for (int64_t i = 0; i < k; i++) {
    const auto w0 = hn::LoadU(d, panel + i * P), w1 = hn::LoadU(d, panel + i * P + N);
    auto s = hn::Set(d, v[i]);
    a00 = hn::MulAdd(s, w0, a00);
    a01 = hn::MulAdd(s, w1, a01);
    s = hn::Set(d, v[ldv + i]);
    a10 = hn::MulAdd(s, w0, a10);
    a11 = hn::MulAdd(s, w1, a11);
    s = hn::Set(d, v[2 * ldv + i]);
    a20 = hn::MulAdd(s, w0, a20);
    a21 = hn::MulAdd(s, w1, a21);
    s = hn::Set(d, v[3 * ldv + i]);
    a30 = hn::MulAdd(s, w0, a30);
    a31 = hn::MulAdd(s, w1, a31);
    s = hn::Set(d, v[4 * ldv + i]);
    a40 = hn::MulAdd(s, w0, a40);
    a41 = hn::MulAdd(s, w1, a41);
    s = hn::Set(d, v[5 * ldv + i]);
    a50 = hn::MulAdd(s, w0, a50);
    a51 = hn::MulAdd(s, w1, a51);
    s = hn::Set(d, v[6 * ldv + i]);
    a60 = hn::MulAdd(s, w0, a60);
    a61 = hn::MulAdd(s, w1, a61);
    s = hn::Set(d, v[7 * ldv + i]);
    a70 = hn::MulAdd(s, w0, a70);
    a71 = hn::MulAdd(s, w1, a71);
  }
  hn::StoreU(a00, d, c + j);
  hn::StoreU(a01, d, c + j + N);
  hn::StoreU(a10, d, c + lda + j);
  hn::StoreU(a11, d, c + lda + j + N);
  hn::StoreU(a20, d, c + 2 * lda + j);
  hn::StoreU(a21, d, c + 2 * lda + j + N);
  hn::StoreU(a30, d, c + 3 * lda + j);
  hn::StoreU(a31, d, c + 3 * lda + j + N);
  hn::StoreU(a40, d, c + 4 * lda + j);
  hn::StoreU(a41, d, c + 4 * lda + j + N);
  hn::StoreU(a50, d, c + 5 * lda + j);
  hn::StoreU(a51, d, c + 5 * lda + j + N);
  hn::StoreU(a60, d, c + 6 * lda + j);
  hn::StoreU(a61, d, c + 6 * lda + j + N);
  hn::StoreU(a70, d, c + 7 * lda + j);
  hn::StoreU(a71, d, c + 7 * lda + j + N);
}

// Four rows over one full panel (8 accumulators; every target).
void RecurRows4(const float* HWY_RESTRICT panel, const float* HWY_RESTRICT v, int64_t ldv,
                int64_t k, float* HWY_RESTRICT c, int64_t lda, int64_t j) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d)), P = 2 * N;
  auto a00 = hn::LoadU(d, c + j), a01 = hn::LoadU(d, c + j + N);
  auto a10 = hn::LoadU(d, c + lda + j), a11 = hn::LoadU(d, c + lda + j + N);
  auto a20 = hn::LoadU(d, c + 2 * lda + j), a21 = hn::LoadU(d, c + 2 * lda + j + N);
  auto a30 = hn::LoadU(d, c + 3 * lda + j), a31 = hn::LoadU(d, c + 3 * lda + j + N);
  for (int64_t i = 0; i < k; i++) {
    const auto w0 = hn::LoadU(d, panel + i * P), w1 = hn::LoadU(d, panel + i * P + N);
    const auto s0 = hn::Set(d, v[i]), s1 = hn::Set(d, v[ldv + i]), s2 = hn::Set(d, v[2 * ldv + i]),
               s3 = hn::Set(d, v[3 * ldv + i]);
    a00 = hn::MulAdd(s0, w0, a00);
    a01 = hn::MulAdd(s0, w1, a01);
    a10 = hn::MulAdd(s1, w0, a10);
    a11 = hn::MulAdd(s1, w1, a11);
    a20 = hn::MulAdd(s2, w0, a20);
    a21 = hn::MulAdd(s2, w1, a21);
    a30 = hn::MulAdd(s3, w0, a30);
    a31 = hn::MulAdd(s3, w1, a31);
  }
  hn::StoreU(a00, d, c + j);
  hn::StoreU(a01, d, c + j + N);
  hn::StoreU(a10, d, c + lda + j);
  hn::StoreU(a11, d, c + lda + j + N);
  hn::StoreU(a20, d, c + 2 * lda + j);
  hn::StoreU(a21, d, c + 2 * lda + j + N);
  hn::StoreU(a30, d, c + 3 * lda + j);
  hn::StoreU(a31, d, c + 3 * lda + j + N);
}

// e rows of v (stride ldv) into e rows of acc (stride lda), columns [0, n) of the packed R^T:
// blocks of eight rows where the target has 32 vector registers, then four, over the full panels;
// single rows for the rest.
void RecurGemm(const float* HWY_RESTRICT packed, const float* HWY_RESTRICT v, int64_t ldv,
               int64_t e, int64_t k, float* HWY_RESTRICT acc, int64_t lda, int64_t n) {
  const int64_t P = PanelWidth(), full = n / P * P;
#if HWY_ARCH_X86
  constexpr bool kRegs32 = HWY_TARGET <= HWY_AVX3;
#else
  constexpr bool kRegs32 = true;
#endif
  int64_t r = 0;
  auto block = [&](int64_t rows, auto&& kernel) {
    for (; r + rows <= e; r += rows) {
      for (int64_t j = 0; j < full; j += P)
        kernel(packed + j * k, v + r * ldv, ldv, k, acc + r * lda, lda, j);
      for (int64_t q = 0; q < rows && full < n; q++)  // the narrower last panel, row by row
        RecurGemv(packed, v + (r + q) * ldv, k, acc + (r + q) * lda, n, full);
    }
  };
  if (kRegs32) block(8, RecurRows8);
  block(4, RecurRows4);
  for (; r < e; r++) RecurGemv(packed, v + r * ldv, k, acc + r * lda, n, 0);
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
HWY_EXPORT(PanelWidth);
HWY_EXPORT(RecurPack);
HWY_EXPORT(RecurGemm);
HWY_EXPORT(ActivateRow);

namespace cpu {

int64_t recur_panel_width() { return HWY_DYNAMIC_DISPATCH(PanelWidth)(); }

void recur_pack(const float* r, int64_t k, int64_t c0, int64_t c1, float* out) {
  HWY_DYNAMIC_DISPATCH(RecurPack)(r, k, c0, c1, out);
}

void recur_gemm(const float* packed, const float* v, int64_t ldv, int64_t e, int64_t k, float* acc,
                int64_t lda, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RecurGemm)(packed, v, ldv, e, k, acc, lda, n);
}

void activate_row(int64_t code, float clip, const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ActivateRow)(code, clip, x, y, n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
