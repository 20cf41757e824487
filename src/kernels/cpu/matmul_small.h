// f32 MatMul of a few rows without oneDNN (matmul_small.cc), by a plain [K, N] matrix or by
// oneDNN's packed panels of a constant one: decode steps and short prompts, bound by reading B,
// which these loops stream at a higher rate than oneDNN.
#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"

namespace ubfuse::cpu {

inline constexpr int64_t kSmallMatMulRows = 8;

// Up to 4 rows always; up to kSmallMatMulRows while B fits in L2.
bool small_matmul_applies(int64_t M, int64_t K, int64_t N);

// c[M, N] = a[M, K] b[K, N], all row-major f32, summed in f32. Threads take parts of K, added in
// order: the result depends on the pool's size, not on timing.
void small_matmul_f32(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N,
                      ThreadPool& pool);

// The most rows for which panel_matmul_f32 beats oneDNN's own kernel on the same packed weights:
// always up to 32; up to 160 where B has at least 2^19 elements (2 MiB of f32, past L2), which
// the pool's oneDNN calls, split by rows, each read whole while this loop reads it once.
inline constexpr int64_t kPanelMatMulRows = 32;
inline constexpr int64_t kPanelMatMulRowsLargeB = 160;
inline constexpr int64_t kPanelLargeB = int64_t(1) << 19;
inline bool panel_matmul_applies(int64_t M, int64_t K, int64_t N) {
  return M >= 1 &&
         (M <= kPanelMatMulRows || (M <= kPanelMatMulRowsLargeB && K * N >= kPanelLargeB));
}

// c[M, N] = a[M, K] b for b packed in oneDNN's f32 layout of 64-column panels (blocking 16a64b:
// panel p, which holds columns [64p, 64p + 64) zero-padded, is at panels + p * panel_stride, its
// row k at + k * 64). Each panel streams from memory once, through registers holding up to six
// rows' sums per pass.
void panel_matmul_f32(const float* a, const float* panels, int64_t panel_stride, float* c,
                      int64_t M, int64_t K, int64_t N, ThreadPool& pool);

// c's columns [64 p, 64 p + 64) from the one panel p of b (row k at panel + k * 64), on the
// calling thread (a caller that makes B's panels as it goes: MatMulNBits dequantizing them).
void panel_matmul_f32_one(const float* a, const float* panel, float* c, int64_t M, int64_t K,
                          int64_t N, int64_t p);

// Constant f32 weights where oneDNN's f32 MatMul copies B into its own panels inside every call
// (gemm:jit, on CPUs without AVX-512): ubfuse packs B once in panels of kOwnPanelWidth columns
// (panel p holds columns [16p, 16p + 16), zero-padded, its row k at p * K * 16 + k * 16) and
// multiplies up to kOwnPanelMaxRows rows of A by them with its own loop: about twice gemm:jit's
// rate up to 256-352 rows (where oneDNN's kernel turns efficient, by shape), about level past that
// (Zen 3). One row keeps the small loop.
inline constexpr int64_t kOwnPanelWidth = 16;
inline constexpr int64_t kOwnPanelMaxRows = 512;

// Whether the loop fits the dispatched target's registers (8-lane vectors: AVX2).
bool own_panels_fit();

// Floats of B [K, N] packed in own panels.
int64_t own_panels_floats(int64_t K, int64_t N);

// Packs row-major b [K, N] into out (own_panels_floats(K, N) floats).
void pack_own_panels_f32(const float* b, int64_t K, int64_t N, float* out);

// c[M, N] = a[M, K] B for B in own panels; threads take runs of panels.
void own_panel_matmul_f32(const float* a, const float* panels, float* c, int64_t M, int64_t K,
                          int64_t N, ThreadPool& pool);

}  // namespace ubfuse::cpu
