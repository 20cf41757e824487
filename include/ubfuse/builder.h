// C++ builder API:
//   ubfuse::GraphBuilder b;
//   auto x = b.input("x", ubfuse::f32, {"batch", 2048, 4096});
//   auto y = b.silu(b.layer_norm(b.add(x, r), w, bias, 1e-5));
//   b.output("y", y);
//   ubfuse::Graph g = b.build();
// Every call checks its operands at once and throws ubfuse::Error naming the op and shapes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse {

// Conv's attributes (ONNX Conv): empty lists take the defaults (strides and dilations 1, pads 0);
// pads lists every spatial axis' begin pad, then every end pad.
struct ConvOptions {
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  std::string auto_pad = "NOTSET";  // or SAME_UPPER, SAME_LOWER, VALID
};

class GraphBuilder {
 public:
  using V = Value*;
  GraphBuilder();

  V input(const std::string& name, DType dtype, Shape shape);
  void output(const std::string& name, V v);
  V constant(const Tensor& t, const std::string& name = "");
  V scalar(double v, DType dtype = DType::f32);

  // Elementwise math: one method per UBF_MATH row of ubfuse/ops.def, named by its builder column
  // (neg(x), exp(x), ..., logical_not(x); add(a, b), ..., less(a, b) with numpy broadcasting;
  // where(cond, a, b)).
#define UBF_BUILDER_1(fn) V fn(V x);
#define UBF_BUILDER_2(fn) V fn(V a, V b);
#define UBF_BUILDER_3(fn) V fn(V cond, V a, V b);
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ...) UBF_BUILDER_##arity(builder)
#include "ubfuse/ops.def"
#undef UBF_BUILDER_1
#undef UBF_BUILDER_2
#undef UBF_BUILDER_3
  // Elementwise ops with attributes.
  V gelu(V x, bool tanh_approx = false);
  V pow(V x, double exponent);
  V cast(V x, DType to);
  // A double operand becomes a scalar of the other's dtype.
  V add(V a, double b) { return add(a, scalar_like(b, a)); }
  V sub(V a, double b) { return sub(a, scalar_like(b, a)); }
  V mul(V a, double b) { return mul(a, scalar_like(b, a)); }
  V div(V a, double b) { return div(a, scalar_like(b, a)); }
  // Row ops over the last axis. weight/bias may be null.
  V layer_norm(V x, V weight, V bias, double eps = 1e-5);
  V rms_norm(V x, V weight, double eps = 1e-6);
  V softmax(V x);
  V reduce_sum(V x, bool keepdims = true);
  V reduce_mean(V x, bool keepdims = true);
  V reduce_max(V x, bool keepdims = true);
  // RoPE's rotate_half: cat(-x[..., d/2:], x[..., :d/2]) over the last axis (d static, even).
  // With `interleaved` adjacent pairs rotate instead (GPT-J's rotate_every_two: y[2i] = -x[2i+1],
  // y[2i+1] = x[2i]); with rotary_dims > 0 only the first rotary_dims columns rotate and the
  // rest are 0 (partial rotary: the caller's cos/sin pad those columns with 1 and -0).
  V rotate_half(V x, bool interleaved = false, int64_t rotary_dims = 0);
  // Matrices and data movement
  V matmul(V a, V b);
  V gather(V data, V indices, int64_t axis = 0);
  // TopK: {values, indices (i64)} of the k largest (or smallest) elements along axis, sorted,
  // ties to the lower index. k is a one-element i64 value: a constant, a shape value or a graph
  // input (read when the plan for a run is built).
  std::vector<V> top_k(V x, V k, int64_t axis = -1, bool largest = true, bool sorted = true);
  // Quantization (ONNX opset 13 forms): scales f32, zero points u8 or i8 (null: none, u8 out);
  // per tensor (one-element scale) or per axis (1-D scale along `axis`).
  V quantize_linear(V x, V scale, V zero_point = nullptr, int64_t axis = 1);
  V dequantize_linear(V x, V scale, V zero_point = nullptr, int64_t axis = 1);
  // {y u8, scale f32 [], zero point u8 []}
  std::vector<V> dynamic_quantize_linear(V x);
  // i32 (a - a_zp)(b - b_zp); zero points null, one element, per row of a / per column of b.
  V matmul_integer(V a, V b, V a_zero_point = nullptr, V b_zero_point = nullptr);
  // Convolution over 1 to 3 spatial axes: x [N, C, L], [N, C, H, W] or [N, C, D, H, W],
  // w [M, C/group, k...], bias [M] or null (oneDNN).
  V conv(V x, V w, V bias, const ConvOptions& options = {});
  // GroupNorm over x [N, C, ...]: each sample's channels in `groups` groups, each normalized over
  // its channels and positions; scale and bias [C] (one per channel) or null. groups = C is
  // InstanceNormalization.
  V group_norm(V x, V scale, V bias, int64_t groups, double eps = 1e-5);
  // Pad: pads lists every axis' begin pad, then every end pad (negative ones crop); mode
  // "constant" (fill `value`, a one-element tensor of x's dtype, or 0), "reflect" or "edge".
  V pad(V x, std::vector<int64_t> pads, const std::string& mode = "constant", V value = nullptr);
  // Reshape: -1 infers one dim, 0 keeps the input's dim at that position (symbols survive).
  V reshape(V x, std::vector<int64_t> shape);
  V transpose(V x, std::vector<int64_t> perm);
  V slice(V x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
          std::vector<int64_t> steps = {});
  V concat(std::vector<V> xs, int64_t axis);
  V expand(V x, Shape shape);
  // Shape values (small integer tensors that sizes depend on, computed while a run is planned):
  // x's sizes [start, end) as i64, a Range, a tensor of `fill` (one element) in every element,
  // and the forms of reshape, expand and slice that read their target or bounds from such values
  // (or from graph inputs, whose contents then join the plan cache's key).
  V shape_of(V x, int64_t start = 0, std::optional<int64_t> end = std::nullopt);
  V range(V start, V limit, V delta);
  V constant_of_shape(V shape, const Tensor& fill);
  V reshape(V x, V shape, bool allowzero = false);
  V expand(V x, V shape);
  V slice(V x, V starts, V ends, V axes, V steps);
  // If: runs then_g when cond (one bool element, known when a run is planned: a graph input or
  // a shape value) is true, else else_g. Both graphs take `inputs` as their inputs, in order,
  // and give outputs of one dtype and rank each; returns the If's outputs.
  std::vector<V> if_(V cond, std::shared_ptr<const Graph> then_g,
                     std::shared_ptr<const Graph> else_g, std::vector<V> inputs);
  // A user callback mid-graph (e.g. a print): a host sync point.
  V host(V x, HostFn fn, const std::string& name = "");

  // Generic form used by importers: any op with attributes.
  V op(OpKind kind, std::vector<V> inputs, Attrs attrs = {}, const std::string& name = "");
  // The same for an op of several outputs (MaxPool's values and indices); returns them all.
  std::vector<V> op_outputs(OpKind kind, std::vector<V> inputs, Attrs attrs, int outputs);
  // Names the most recently added node (names must be unique).
  void name_last(const std::string& name);

  Graph& graph() { return *graph_; }
  // Finishes the graph (verifies it) and hands it over; the builder is empty afterwards.
  Graph build();

 private:
  V scalar_like(double v, V like);
  // Infers the new node's outputs (removing it again on error) and makes it the last node.
  V finish(Node* n);
  std::unique_ptr<Graph> graph_;
  Node* last_ = nullptr;
};

}  // namespace ubfuse
