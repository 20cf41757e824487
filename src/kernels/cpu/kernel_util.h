// Shared plumbing of the eager CPU kernels: tuning constants (threading grain, non-temporal store
// threshold), dtype codes passed into the Highway-dispatched loops, error helpers, and the
// per-concept kernel factories that registry.cc dispatches to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/op_kernel.h"
#include "ubfuse/error.h"
#include "ubfuse/graph.h"

namespace ubfuse::cpu {

// Below this many output elements a kernel runs on the calling thread only: waking a worker costs
// a few microseconds, about what 2 cores save on 32K floats at memory speed.
inline constexpr int64_t kMinParallelElems = 32 * 1024;
// Outputs at least this large are written with non-temporal stores: they would not stay in the
// caches anyway, and skipping the read-for-ownership saves a third of a streaming op's traffic
// (Zen 5: STREAM add 57 -> 68 GB/s at 256 MiB; no gain at 4 MiB).
inline constexpr size_t kStreamMinBytes = size_t(32) << 20;

// The threshold in effect (kStreamMinBytes unless changed; tests lower it to exercise the
// streaming path on small tensors).
size_t stream_min_bytes();
void set_stream_min_bytes(size_t bytes);
inline bool use_stream(size_t out_bytes) { return out_bytes >= stream_min_bytes(); }

// Chunk grain in items (rows, elements...) so that a chunk holds >= kMinParallelElems elements.
inline int64_t grain_for(int64_t elems_per_item) {
  if (elems_per_item <= 0) return kMinParallelElems;
  int64_t g = kMinParallelElems / elems_per_item;
  return g < 1 ? 1 : g;
}

// Dtype codes of the f32-computing (Highway) loops.
enum FloatCode : int { kF32 = 0, kBF16 = 1, kF16 = 2 };
// Code of a float dtype; UBF_CHECK-fails on others (callers check is_float first).
int float_code(DType t);

// "node 'ln0' (LayerNorm)" plus shapes: the prefix of every kernel error.
[[noreturn]] void kernel_fail(const std::string& who, const std::string& what,
                              const std::string& hint = "");
// "[8, 2048] f32, [2048] f32" for messages.
std::string tensors_str(const std::vector<Tensor>& ts);

// Base of every kernel: remembers who it is for messages.
class KernelBase : public OpKernel {
 public:
  explicit KernelBase(const Node& n) : who_(n.describe()), op_(n.op) {}

 protected:
  // Checks the input/output counts the executor hands over (an internal invariant).
  void check_arity(const std::vector<Tensor>& in, size_t nin_min, size_t nin_max,
                   const std::vector<Tensor>& out) const;
  [[noreturn]] void fail(const std::string& what, const std::string& hint = "") const {
    kernel_fail(who_, what, hint);
  }
  std::string who_;
  OpKind op_;
};

// Factories, one per concept (files of the same name).
std::unique_ptr<OpKernel> make_unary_kernel(const Node& n);    // elementwise.cc
std::unique_ptr<OpKernel> make_index_kernel(const Node& n);    // index_ops.cc: GatherElements, Arg*
std::unique_ptr<OpKernel> make_binary_kernel(const Node& n);   // broadcast.cc
std::unique_ptr<OpKernel> make_compare_kernel(const Node& n);  // compare.cc (and Where)
std::unique_ptr<OpKernel> make_norm_kernel(const Node& n);     // rownorm.cc
std::unique_ptr<OpKernel> make_softmax_kernel(const Node& n);  // softmax.cc
std::unique_ptr<OpKernel> make_rotate_half_kernel(const Node& n);  // rotate_half.cc
std::unique_ptr<OpKernel> make_reduce_kernel(const Node& n);       // reduce.cc
std::unique_ptr<OpKernel> make_matmul_kernel(const Node& n);       // matmul_dnnl.cc
std::unique_ptr<OpKernel> make_movement_kernel(const Node& n);     // movement.cc
std::unique_ptr<OpKernel> make_gather_kernel(const Node& n);       // gather.cc
std::unique_ptr<OpKernel> make_shape_value_kernel(const Node& n);  // shape_ops.cc
std::unique_ptr<OpKernel> make_cast_kernel(const Node& n);         // cast.cc
std::unique_ptr<OpKernel> make_conv_kernel(const Node& n);         // conv_dnnl.cc
std::unique_ptr<OpKernel> make_recurrent_kernel(const Node& n);    // recurrent.cc: RNN, GRU, LSTM
std::unique_ptr<OpKernel> make_group_norm_kernel(const Node& n);   // rownorm.cc
std::unique_ptr<OpKernel> make_pad_kernel(const Node& n);          // pad.cc
std::unique_ptr<OpKernel> make_resize_kernel(const Node& n);       // resize.cc
// pool.cc: MaxPool, AveragePool and ReduceProd (windows and rows reduced by a plain loop)
std::unique_ptr<OpKernel> make_pool_kernel(const Node& n);
std::unique_ptr<OpKernel> make_cumsum_kernel(const Node& n);  // cumsum.cc
std::unique_ptr<OpKernel> make_topk_kernel(const Node& n);    // topk.cc
// scatter.cc: GatherND, ScatterND, ScatterElements
std::unique_ptr<OpKernel> make_scatter_kernel(const Node& n);
// quantize.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
std::unique_ptr<OpKernel> make_quantize_kernel(const Node& n);
// matmul_integer.cc: MatMulInteger, QLinearMatMul; and ConvInteger (im2col and the same product)
std::unique_ptr<OpKernel> make_matmul_integer_kernel(const Node& n);
std::unique_ptr<OpKernel> make_dynamic_quant_matmul_kernel(const Node& n);  // dyn_quant_matmul.cc
std::unique_ptr<OpKernel> make_matmul_nbits_kernel(const Node& n);          // matmul_nbits.cc
std::unique_ptr<OpKernel> make_conv_integer_kernel(const Node& n);

// memcpy split over the pool for large sizes.
void parallel_copy(void* dst, const void* src, size_t bytes, ThreadPool& pool);

// Converts n floats between float dtypes (f32/bf16/f16, rounding to nearest even), vectorized;
// used by Cast and by kernels that widen weights. in and out must not overlap.
void convert_floats(DType from, const void* in, DType to, void* out, int64_t n);
// Same, threaded over the pool for large n.
void convert_floats(DType from, const void* in, DType to, void* out, int64_t n, ThreadPool& pool);

}  // namespace ubfuse::cpu
