// How the rendered column loops are shaped, decided from the program alone: bf16 columns in
// even/odd lanes, and which values of a pass are computed one loop step ahead.
#pragma once

#include <vector>

#include "codegen/kernel_ir.h"

namespace ubfuse::cpp {

// A Load of a column input (not a row scalar).
bool column_load(const kir::Expr& x);

// Whether every column the kernel reads or writes in memory is bf16 (and there is one). Then each
// 2-vector step of the unrolled loops holds the even columns of its 2 * L in its first vector and
// the odd ones in its second (LoadEvenOddBf16 / StoreEvenOddBf16: one operation per vector
// loaded instead of two). Elementwise math, row reductions and UB slots do not care where a
// column sits as long as every pass steps alike, which they all do: the same unrolled loop, then
// the last whole vector and the masked tail in column order. A mixed kernel keeps column order
// (an f32 column would need a permute per vector).
bool bf16_even_odd_lanes(const kir::Program& p);

// The two stages of a pass's unrolled loop step when it is skewed (software-pipelined): the late
// stage is every expensive column op (kir::is_expensive: a transcendental, a divide) and what
// depends on it; the early stage is the rest, loads included. A skewed loop runs the early stage
// one 2-vector step ahead of the late one, carrying the early values the late stage reads in
// registers. Then each expensive op's operand is ready when its step starts, so the long
// dependency chain of, say, SiLU no longer follows LayerNorm's arithmetic in the same step: an
// out-of-order core keeps more steps in flight (where it pays: skew_loops below).
struct StepStages {
  std::vector<char> late;    // per expr of the program: in the late stage
  std::vector<int> carried;  // early column values the late stage reads, ascending
  // Skewed only when an expensive op waits on arithmetic: carrying loaded vectors alone gains
  // nothing (the loads are already ahead of the math).
  bool skewed() const { return !carried.empty(); }
};
// `skew` false: never skewed (the stages are still marked).
StepStages step_stages(const kir::Program& p, const kir::Phase& ph, bool skew = true);

// Whether the kernel's loops skew where step_stages() finds something to carry, for a target
// with (avx512) or without 512-bit vectors. Skewing made the fused f32 seed block 3.5-13% faster
// on Zen 3 (AVX2) but 2-19% slower on Zen 5 (AVX-512), where the bf16 and f16 blocks, with their
// conversions, still ran 6-10% faster skewed (docs/performance.md). So on AVX-512 a kernel whose
// every column in memory is f32 is not skewed. UBFUSE_CODEGEN_SKEW=0 or 1 decides it for every
// kernel instead (tuning, tests); another value is an Error.
bool skew_loops(const kir::Program& p, bool avx512);

// Whether the generated code's target (the host's -march=native) has 512-bit vectors.
bool native_avx512();

}  // namespace ubfuse::cpp
