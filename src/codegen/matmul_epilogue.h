// MatMulEpilogue groups: the MatMul (helper-1's eager oneDNN kernel) computes its output in row
// blocks sized to stay in cache (kEpilogueBlockBytes), and the generated elementwise epilogue
// (bias, activation, residual add...) runs over each block right after it is computed, while it
// is still in cache. The epilogue is the same kernel IR / codegen / interpreter as any other
// group, reading the block as one more input. A MatMul whose rows do not map onto the domain's
// rows one to one (batched B, 1-D operands) computes its whole output first, then the epilogue.
#pragma once

#include <memory>

#include "codegen/fused_kernel.h"

namespace ubfuse {

// Target bytes of one MatMul output block, and the fewest rows a block has. Measured on the
// 2-core development machine (x[2048, 2048] @ W[2048, 4096] f32, + bias, gelu, + residual):
// 2 MiB blocks (128 rows, L2-sized) made the oneDNN MatMul 1.5x slower (per-call overhead, and
// the weights prepacked for the full M do not fit a small M), 8 MiB blocks (512 rows, in L3)
// cost nothing measurable.
inline constexpr int64_t kEpilogueBlockBytes = int64_t(8) << 20;
inline constexpr int64_t kEpilogueMinBlockRows = 256;

std::unique_ptr<Kernel> make_matmul_epilogue_kernel(const FusedGroup& g, LoweredGroup lg,
                                                    Engine eng);

}  // namespace ubfuse
