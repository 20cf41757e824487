// Vector loops of the recurrent kernel's steps (recurrent_steps.cc; Highway, dispatched per CPU).
#pragma once

#include <cstdint>

namespace ubfuse::cpu {

// R^T packed for the steps: the columns in panels of recur_panel_width() (two vectors of the
// dispatched target), each panel's k rows contiguous. recur_pack packs columns [c0, c1) of R^T
// from R [rows, k] (row-major, R^T's column j is R's row j) into out[0, (c1 - c0) k).
int64_t recur_panel_width();
void recur_pack(const float* r, int64_t k, int64_t c0, int64_t c1, float* out);
// Row q < e of acc (row stride lda), columns [0, n), += sum_i v[q * ldv + i] R^T[i, (0, n)] for
// i < k, R^T's columns [0, n) packed by recur_pack at `packed`.
void recur_gemm(const float* packed, const float* v, int64_t ldv, int64_t e, int64_t k, float* acc,
                int64_t lda, int64_t n);
// y[0, n) = the ir/recurrent.h activation `code` of x[0, n), each clipped to [-clip, clip] first
// when clip > 0. x and y may be the same row.
void activate_row(int64_t code, float clip, const float* x, float* y, int64_t n);

}  // namespace ubfuse::cpu
