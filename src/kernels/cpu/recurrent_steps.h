// Vector loops of the recurrent kernel's steps (recurrent_steps.cc; Highway, dispatched per CPU).
#pragma once

#include <cstdint>

namespace ubfuse::cpu {

// Row r < e of acc (row stride lda), columns [0, n), += sum_i v[r * ldv + i] * rt[i * ld + (0, n)]
// for i < k: e row vectors times k rows of R^T.
void recur_gemm(const float* rt, int64_t ld, const float* v, int64_t ldv, int64_t e, int64_t k,
                float* acc, int64_t lda, int64_t n);
// y[0, n) = the ir/recurrent.h activation `code` of x[0, n), each clipped to [-clip, clip] first
// when clip > 0. x and y may be the same row.
void activate_row(int64_t code, float clip, const float* x, float* y, int64_t n);

}  // namespace ubfuse::cpu
