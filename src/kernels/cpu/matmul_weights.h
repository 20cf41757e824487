// A MatMul's constant weights made ready once, when its kernel is made (matmul_weights.cc):
// reordered into the layout oneDNN prefers for a representative M, and on CPUs where oneDNN's f32
// kernel would copy them into its panels inside every call, packed in ubfuse's own panels instead.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse::cpu {

struct PackedWeights {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  Sizes sizes;  // B's sizes they were made from
  // In oneDNN's layout: bf16 where oneDNN has a bf16 kernel for bf16 weights, else f32 (f16
  // converted). Null where oneDNN prefers the plain layout, or where own_panels hold them.
  std::shared_ptr<dnnl::memory> bf16, f32;
  dnnl::memory::desc bf16_md, f32_md;
  // f32 as oneDNN's 16a64b blocks in panel order (its choice on AVX-512): panel p's row k at
  // p * panel_stride + k * 64 (panel_matmul_f32); else 0.
  int64_t panel_stride = 0;
  bool panel_tag = false;  // ... exactly BA16a64b, so a run of panels is one too
  // In ubfuse's own panels (own_panel_matmul_f32) where oneDNN's f32 kernel is gemm:jit.
  std::unique_ptr<float, Free> own_panels;

  bool in_onednn_layout() const { return f32 != nullptr || bf16 != nullptr; }
};

// Makes node n's constant B (bt: float, unbatched) ready; empty for batched or non-float weights.
PackedWeights pack_matmul_weights(const Node& n, const Tensor& bt);

}  // namespace ubfuse::cpu
