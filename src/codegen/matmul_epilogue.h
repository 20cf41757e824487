// MatMulEpilogue groups: the MatMul (the eager oneDNN kernel) computes its output in row blocks
// sized to stay in cache (kEpilogueBlockBytes; larger where oneDNN's kernel repacks the weights on
// every call: kRepackingBlockBytes; option matmul_block_bytes), and the generated elementwise
// epilogue (bias, activation, residual add...) runs over each block right after it is computed,
// while it is still in cache. The epilogue is the same kernel IR / codegen / interpreter as any
// other group, reading the block as one more input. A MatMul whose rows do not map onto the
// domain's rows one to one (batched B, 1-D operands) computes its whole output first, then the
// epilogue.
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
// The block for oneDNN kernels that copy all of B into their own panels on every call (gemm:jit,
// as on CPUs without AVX-512; bf16 there runs it through f32 copies). Measured on a 2-core Zen 3
// (same problem, graph against eager): f32 8 MiB blocks 0.92-0.98x, one 32 MiB block
// 0.99-1.03x; bf16 within the noise (0.98-1.07x for 8, 16, 32 and 64 MiB).
inline constexpr int64_t kRepackingBlockBytes = int64_t(64) << 20;
inline constexpr int64_t kEpilogueMinBlockRows = 256;

std::unique_ptr<Kernel> make_matmul_epilogue_kernel(const FusedGroup& g, LoweredGroup lg,
                                                    Engine eng);

}  // namespace ubfuse
