// Double references of the attention ops' math for the import tests of onnxruntime's attention
// ops (onnx_contrib_attention_test.cc, onnx_gqa_test.cc): attention by head with an additive
// mask, RoPE by cache rows; and the small tensor helpers they share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "ubfuse/ubfuse.h"

namespace ubfuse::testing {

inline std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); i++) v[size_t(i)] = float(t.get(i));
  return v;
}

inline Tensor ints32(const Sizes& sizes, const std::vector<int>& v) {
  Tensor t = Tensor::zeros(DType::i32, sizes);
  for (size_t i = 0; i < v.size(); i++) t.set(int64_t(i), v[i]);
  return t;
}

// softmax(softcap(scale q k^T) + add) v by head, in double: q [B, S, N * dk] and k, v [B, T,
// N * dk or dv] as rows of heads (head h at columns h * d), add(b, h, s, t) the additive mask
// (-inf leaves the key out), softcap(x) = softcap tanh(x / softcap) when softcap > 0, x
// otherwise; [B, S, N * dv].
inline std::vector<double> attend(
    const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
    int64_t B, int64_t S, int64_t T, int64_t N, int64_t dk, int64_t dv, double scale,
    const std::function<double(int64_t, int64_t, int64_t, int64_t)>& add, double softcap = 0) {
  std::vector<double> out(size_t(B * S * N * dv));
  std::vector<double> p(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; b++) {
    for (int64_t h = 0; h < N; h++) {
      for (int64_t s = 0; s < S; s++) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < T; t++) {
          double dot = 0;
          for (int64_t i = 0; i < dk; i++) {
            dot += q[size_t((b * S + s) * N * dk + h * dk + i)] *
                   k[size_t((b * T + t) * N * dk + h * dk + i)];
          }
          const double x = scale * dot;
          p[size_t(t)] = (softcap > 0 ? softcap * std::tanh(x / softcap) : x) + add(b, h, s, t);
          mx = std::max(mx, p[size_t(t)]);
        }
        double sum = 0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < dv; j++) {
          double o = 0;
          for (int64_t t = 0; t < T; t++) {
            o += p[size_t(t)] * v[size_t((b * T + t) * N * dv + h * dv + j)];
          }
          out[size_t((b * S + s) * N * dv + h * dv + j)] = o / sum;
        }
      }
    }
  }
  return out;
}

inline void expect_near(const Tensor& got, const Sizes& sizes, const std::vector<double>& want,
                        double tol = 2e-5) {
  ASSERT_EQ(got.sizes(), sizes);
  ASSERT_EQ(size_t(got.numel()), want.size());
  for (int64_t i = 0; i < got.numel(); i++) {
    ASSERT_NEAR(got.get(i), want[size_t(i)], tol * (1 + std::fabs(want[size_t(i)]))) << i;
  }
}

// RoPE of x's heads by the rows `pos` of the caches, in double: the first `rot` columns of each
// head rotate (halves or adjacent pairs), the rest pass through. x is [B, S, heads, d] when
// bnsh is false, [B, heads, S, d] when true; pos(b, s) the position.
inline std::vector<double> rope(const Tensor& x, bool bnsh, int64_t B, int64_t S, int64_t N,
                                int64_t d, int64_t rot, bool pairs, const Tensor& cos,
                                const Tensor& sin,
                                const std::function<int64_t(int64_t, int64_t)>& pos) {
  std::vector<double> y(size_t(x.numel()));
  const int64_t half = rot / 2;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t s = 0; s < S; s++) {
      for (int64_t h = 0; h < N; h++) {
        const int64_t row = bnsh ? ((b * N + h) * S + s) * d : ((b * S + s) * N + h) * d;
        const int64_t p = pos(b, s);
        for (int64_t j = 0; j < d; j++) y[size_t(row + j)] = x.get(row + j);
        for (int64_t i = 0; i < half; i++) {
          const int64_t a = pairs ? 2 * i : i, o = pairs ? 2 * i + 1 : i + half;
          const double c = cos.get(p * half + i), sn = sin.get(p * half + i);
          const double xa = x.get(row + a), xo = x.get(row + o);
          y[size_t(row + a)] = xa * c - xo * sn;
          y[size_t(row + o)] = xo * c + xa * sn;
        }
      }
    }
  }
  return y;
}

}  // namespace ubfuse::testing
