// DynamicQuantMatMul (ops.def): onnxruntime's dynamic-quantizer chain as one kernel. The
// activation is quantized once per call (DynamicQuantizeLinear's own pass, into a buffer of the
// calling thread); the integer product and the rescale then run by row blocks, so that a MatMul
// epilogue group (codegen/matmul_epilogue.cc) runs its epilogue on each block while it is in
// cache.
#pragma once

#include <memory>
#include <vector>

#include "kernels/cpu/int_gemm.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {

class DynamicQuantMatMulKernel : public KernelBase {
 public:
  explicit DynamicQuantMatMulKernel(const Node& n);

  // What quantize() leaves for rows(): x as u8, its zero point, and the f32 factor per column
  // (x's scale times w's, as the chain's Mul computes it).
  struct Quantized {
    const uint8_t* a = nullptr;
    int64_t rows = 0, k = 0, n = 0;
    int32_t zero_point = 0;
    std::vector<float> col_scale;
    std::vector<int32_t> w_zero_point;  // per column
  };
  // Checks the operands and quantizes in[0] into a buffer of the calling thread, valid until its
  // next quantize().
  void quantize(const std::vector<Tensor>& in, Quantized& q, ThreadPool& pool) const;
  // Rows [r0, r1) of the result (x's rows, its batch dims folded in) into out, row-major N wide.
  void rows(const std::vector<Tensor>& in, const Quantized& q, int64_t r0, int64_t r1, float* out,
            ThreadPool& pool) const;

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override;

 private:
  ConstantB w_;  // constant w made ready for oneDNN, or empty
};

}  // namespace ubfuse::cpu
