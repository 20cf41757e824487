// What oneDNN does for a MatMul call of given sizes, for callers that split one MatMul into
// several calls (the MatMul epilogue's row blocks) and must weigh what each call costs.
#pragma once

#include <cstdint>
#include <functional>
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

// Called on the thread that wrote rows [r0, r1) of the product, right after it wrote them, with
// that thread's worker index in the pool.
using RowsDone = std::function<void(int64_t r0, int64_t r1, int worker)>;

// Runs c = a b (a [M, K] f32, b the kernel's constant B) as `matmul`'s run() would where that
// splits the rows over the pool, each part then calling done on its own thread while its rows are
// still in that core's cache (a MatMul epilogue's rows). False, with nothing done, where run()
// would not split by rows (few rows, a B that is not the packed constant, another dtype).
bool matmul_rows_then(const OpKernel& matmul, const Tensor& a, const Tensor& b, Tensor& c,
                      ThreadPool& pool, const RowsDone& done);

}  // namespace ubfuse::cpu
