// f32 MatMul of a few rows by a plain [K, N] matrix without oneDNN (matmul_small.cc): the decode
// step's shape, where oneDNN's per-call setup costs more than the product.
#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"

namespace ubfuse::cpu {

inline constexpr int64_t kSmallMatMulRows = 8;

// Up to 4 rows always; up to kSmallMatMulRows while B (read once per four rows) fits in L2.
bool small_matmul_applies(int64_t M, int64_t K, int64_t N);

// c[M, N] = a[M, K] b[K, N], all row-major f32; sums in f32 in k order per output.
void small_matmul_f32(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N,
                      ThreadPool& pool);

}  // namespace ubfuse::cpu
