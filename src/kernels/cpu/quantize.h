// DynamicQuantizeLinear's pass over x (quantize.cc), shared by its kernel and by
// DynamicQuantMatMul's (dyn_quant_matmul.cc), and the latter's rescale.
#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"
#include "ubfuse/tensor.h"

namespace ubfuse::cpu {

struct DynamicQuantized {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
// ONNX's DynamicQuantizeLinear of float x into y (u8, x's element count): scale and zero point
// over x's range widened to include 0, each element round(x / scale) + zero point, saturated.
// range: x's min and max (NaN skipped) when the caller has them, else a pass over x finds them.
DynamicQuantized dynamic_quantize(const Tensor& x, uint8_t* y, ThreadPool& pool,
                                  const float* range = nullptr);
// y[j] = float(c[j]) * scale[j] for j < n, on vectors; c and y may be the same bytes.
void rescale_row(const int32_t* c, const float* scale, float* y, int64_t n);

}  // namespace ubfuse::cpu
