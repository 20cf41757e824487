// MatMulEpilogue groups: the MatMul (the eager oneDNN kernel) computes its output in row blocks
// sized to stay in cache (kEpilogueBlockBytes; larger where oneDNN's kernel repacks the weights on
// every call: kRepackingBlockBytes; option matmul_block_bytes), and the generated elementwise
// epilogue (bias, activation, residual add...) runs over each block right after it is computed,
// while it is still in cache. The epilogue is the same kernel IR / codegen / interpreter as any
// other group, reading the block as one more input. A MatMul whose rows do not map onto the
// domain's rows one to one (batched B, 1-D operands) computes its whole output first, then the
// epilogue; so does a Conv (Conv -> bias Add -> GELU is one kernel: the epilogue reads the
// convolution's output while it is still in cache, where it fits).
#pragma once

#include <memory>

#include "codegen/fused_kernel.h"

namespace ubfuse {

// Target bytes of one MatMul output block, and the fewest rows a block has. 8 MiB blocks (in L3)
// cost the MatMul nothing measurable; L2-sized 2 MiB blocks made it 1.5x slower (per-call
// overhead, weights prepacked for the full M) (Zen 5, x[2048, 2048] @ W[2048, 4096] f32).
inline constexpr int64_t kEpilogueBlockBytes = int64_t(8) << 20;
// The block for oneDNN kernels that copy all of B into their own panels on every call (gemm:jit,
// as on CPUs without AVX-512): each block costs a pass over B (Zen 3, the same problem against
// eager: 0.92-0.98x in 8 MiB blocks, 0.99-1.03x in one).
inline constexpr int64_t kRepackingBlockBytes = int64_t(64) << 20;
inline constexpr int64_t kEpilogueMinBlockRows = 256;

std::unique_ptr<Kernel> make_matmul_epilogue_kernel(const FusedGroup& g, LoweredGroup lg,
                                                    Engine eng);

}  // namespace ubfuse
