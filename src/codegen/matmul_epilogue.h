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

// Target bytes of one MatMul output block (both cores' L2 on the development machine).
inline constexpr int64_t kEpilogueBlockBytes = int64_t(2) << 20;

std::unique_ptr<Kernel> make_matmul_epilogue_kernel(const FusedGroup& g, LoweredGroup lg,
                                                    Engine eng);

}  // namespace ubfuse
