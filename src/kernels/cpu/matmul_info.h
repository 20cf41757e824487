// What oneDNN does for a MatMul call of given sizes, for callers that split one MatMul into
// several calls (the MatMul epilogue's row blocks) and must weigh what each call costs.
#pragma once

#include <string>

#include "kernels/cpu/op_kernel.h"

namespace ubfuse::cpu {

struct MatMulCallInfo {
  std::string impl;  // oneDNN's implementation, e.g. "gemm:jit", "brg:avx512_core", with
                     // " split by rows over 2 threads" where the pool's threads run parts of it
  bool repacks_weights = false;  // a gemm-based implementation: it copies B into its own
                                 // panels inside every call, prepacked or not
};

// How `matmul` (a MatMul kernel from make_op_kernel) runs A x B for these sizes on a pool of
// `threads`; B without batch dims. Throws Error (naming the node) when the sizes do not multiply
// or oneDNN has no kernel.
MatMulCallInfo matmul_call_info(const OpKernel& matmul, const Sizes& a, const Sizes& b, DType dtype,
                                int threads = 1);

}  // namespace ubfuse::cpu
