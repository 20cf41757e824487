// A few rows of u8 A times an s8 B packed in 64-column blocks (oneDNN's BA16a64b4a: per block,
// K in quads of 4 rows, each quad 64 columns x 4 bytes), on AVX512-VNNI's u8 x s8 dot products
// (int_gemm_vnni.cc). int_gemm runs it for up to 4 rows (decode steps), where a oneDNN call costs
// more than the product.
#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"

namespace ubfuse::cpu {

// Whether this CPU has AVX512-VNNI (and UBFUSE_INT8_NO_VNNI_LOOP is not 1).
bool vnni_loop_available();

// C [m, n] (ldc n) = A [m, k] (u8, lda k) x B, B packed as above with blocks `block_bytes` apart
// (K padded to 64 inside each). Exact: each 4-product sum fits i32, the sums wrap as i32 do. The
// pool's threads take runs of column blocks.
void vnni_gemm_packed(const uint8_t* a, const int8_t* packed, int64_t block_bytes, int32_t* c,
                      int64_t m, int64_t k, int64_t n, ThreadPool& pool);

}  // namespace ubfuse::cpu
