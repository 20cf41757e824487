// The exact int8 product where oneDNN's is not exact (CPUs without VNNI, int_gemm.cc): B widened
// to i16 and packed in panels of kPairPanelWidth columns, K in pairs, so that one VPMADDWD
// multiplies two rows of K at once and sums them in i32 lanes (int_gemm_pairs.cc). Exact: A - za
// and B are at most 255 in magnitude, so a pair's sum (2 * 255 * 255) fits i32, and the sums over
// K wrap as i32 do, the same bits as the plain loop's uint32 arithmetic.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/thread_pool.h"
#include "ubfuse/dtype.h"

namespace ubfuse::cpu {

// Columns per panel: two 512-bit or four 256-bit vectors of i32 sums.
inline constexpr int64_t kPairPanelWidth = 32;

// Whether this CPU's Highway target has the pairwise i16 product (AVX2 or AVX-512); elsewhere
// int_gemm keeps its plain loop.
bool pair_panels_available();

// i16 elements of B [K, N] in pair panels: panel p at p * pairs(K) * 2 * W, pair q of it at
// + q * 2 * W, column j's two rows at + 2 j and + 2 j + 1 (an odd K's last pair and the columns
// past N are zeros).
int64_t pair_panels_elems(int64_t K, int64_t N);

// Packs row-major B [K, N] (i8 or u8, as given: its zero points come off after the product).
std::vector<int16_t> pack_pair_panels(const void* b, DType tb, int64_t K, int64_t N);

// C [M, N] (ldc N) = (A - za)(B - zb) for A [M, K] (i8 or u8, lda K), za per row of A, zb per
// column of B, B packed by pack_pair_panels: the product on pair panels, then
// - zb[j] * sum_k (A - za)[i, k], in i32's wrapping arithmetic. Threads take runs of panels, or
// runs of rows where there are fewer panels than threads.
void pair_panel_gemm(const void* a, DType ta, const int32_t* za, const int32_t* zb,
                     const int16_t* panels, int32_t* c, int64_t M, int64_t K, int64_t N,
                     ThreadPool& pool);

}  // namespace ubfuse::cpu
