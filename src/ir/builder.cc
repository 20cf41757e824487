#include "ubfuse/builder.h"

#include "ubfuse/error.h"

namespace ubfuse {

GraphBuilder::GraphBuilder() : graph_(std::make_unique<Graph>()) {}

GraphBuilder::V GraphBuilder::input(const std::string& name, DType dtype, Shape shape) {
  return graph_->add_input(name, dtype, std::move(shape));
}

void GraphBuilder::output(const std::string& name, V v) {
  if (!v) throw Error("output '" + name + "' is null");
  graph_->add_output(name, v);
}

GraphBuilder::V GraphBuilder::constant(const Tensor& t, const std::string& name) {
  if (!t.defined()) throw Error("constant '" + name + "' has no data");
  Node* n = graph_->add_node(OpKind::Constant, {}, {}, name);
  n->payload = t;
  infer_node(*n);
  last_ = n;
  return n->out();
}

GraphBuilder::V GraphBuilder::scalar(double v, DType dtype) {
  Tensor t(dtype, {});
  t.set(0, v);
  return constant(t);
}

GraphBuilder::V GraphBuilder::scalar_like(double v, V like) {
  if (!like) throw Error("scalar operand paired with a null value");
  return scalar(v, like->dtype);
}

GraphBuilder::V GraphBuilder::op(OpKind kind, std::vector<V> inputs, Attrs attrs,
                                 const std::string& name) {
  return finish(graph_->add_node(kind, std::move(inputs), std::move(attrs), name));
}

std::vector<GraphBuilder::V> GraphBuilder::op_outputs(OpKind kind, std::vector<V> inputs,
                                                      Attrs attrs, int outputs) {
  Node* n = graph_->add_node(kind, std::move(inputs), std::move(attrs), "", outputs);
  finish(n);
  return n->outputs;
}

GraphBuilder::V GraphBuilder::finish(Node* n) {
  try {
    infer_node(*n);
  } catch (...) {
    graph_->remove_node(n);
    throw;
  }
  last_ = n;
  return n->out();
}

void GraphBuilder::name_last(const std::string& name) {
  if (!last_) throw Error("name_last: no node yet");
  if (graph_->node_by_name(name)) throw Error("node name '" + name + "' is used twice");
  last_->name = name;
  if (last_->outputs.size() == 1) last_->out()->name = name;
  infer_node(*last_);  // run-time dims are named after the node
}

#define UBF_BUILDER_1(name, fn) \
  GraphBuilder::V GraphBuilder::fn(V x) { return op(OpKind::name, {x}); }
#define UBF_BUILDER_2(name, fn) \
  GraphBuilder::V GraphBuilder::fn(V a, V b) { return op(OpKind::name, {a, b}); }
#define UBF_BUILDER_3(name, fn) \
  GraphBuilder::V GraphBuilder::fn(V a, V b, V c) { return op(OpKind::name, {a, b, c}); }
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ...) UBF_BUILDER_##arity(name, builder)
#include "ubfuse/ops.def"
#undef UBF_BUILDER_1
#undef UBF_BUILDER_2
#undef UBF_BUILDER_3

GraphBuilder::V GraphBuilder::softmax(V x) { return op(OpKind::Softmax, {x}); }
GraphBuilder::V GraphBuilder::matmul(V a, V b) { return op(OpKind::MatMul, {a, b}); }

GraphBuilder::V GraphBuilder::gelu(V x, bool tanh_approx) {
  return op(OpKind::Gelu, {x}, {{"approximate", std::string(tanh_approx ? "tanh" : "none")}});
}
GraphBuilder::V GraphBuilder::pow(V x, double e) { return op(OpKind::Pow, {x}, {{"exponent", e}}); }
GraphBuilder::V GraphBuilder::cast(V x, DType to) {
  return op(OpKind::Cast, {x}, {{"to", std::string(dtype_name(to))}});
}

GraphBuilder::V GraphBuilder::layer_norm(V x, V weight, V bias, double eps) {
  if (bias && !weight) throw Error("layer_norm: a bias needs a weight (pass a ones weight)");
  std::vector<V> in{x};
  if (weight) in.push_back(weight);
  if (bias) in.push_back(bias);
  return op(OpKind::LayerNorm, in, {{"eps", eps}});
}
GraphBuilder::V GraphBuilder::rms_norm(V x, V weight, double eps) {
  std::vector<V> in{x};
  if (weight) in.push_back(weight);
  return op(OpKind::RMSNorm, in, {{"eps", eps}});
}
GraphBuilder::V GraphBuilder::reduce_sum(V x, bool k) {
  return op(OpKind::ReduceSum, {x}, {{"keepdims", int64_t(k)}});
}
GraphBuilder::V GraphBuilder::reduce_mean(V x, bool k) {
  return op(OpKind::ReduceMean, {x}, {{"keepdims", int64_t(k)}});
}
GraphBuilder::V GraphBuilder::reduce_max(V x, bool k) {
  return op(OpKind::ReduceMax, {x}, {{"keepdims", int64_t(k)}});
}
GraphBuilder::V GraphBuilder::gather(V data, V indices, int64_t axis) {
  return op(OpKind::Gather, {data, indices}, {{"axis", axis}});
}
GraphBuilder::V GraphBuilder::conv(V x, V w, V bias, const ConvOptions& o) {
  std::vector<V> in{x, w};
  if (bias) in.push_back(bias);
  Attrs a{{"group", o.group}, {"auto_pad", o.auto_pad}};
  if (!o.strides.empty()) a["strides"] = o.strides;
  if (!o.pads.empty()) a["pads"] = o.pads;
  if (!o.dilations.empty()) a["dilations"] = o.dilations;
  return op(OpKind::Conv, in, a);
}
GraphBuilder::V GraphBuilder::group_norm(V x, V scale, V bias, int64_t groups, double eps) {
  if (bias && !scale) throw Error("group_norm: a bias needs a scale (pass a ones scale)");
  std::vector<V> in{x};
  if (scale) in.push_back(scale);
  if (bias) in.push_back(bias);
  return op(OpKind::GroupNorm, in, {{"groups", groups}, {"eps", eps}});
}
GraphBuilder::V GraphBuilder::pad(V x, std::vector<int64_t> pads, const std::string& mode,
                                  V value) {
  std::vector<V> in{x};
  if (value) in.push_back(value);
  return op(OpKind::Pad, in, {{"pads", std::move(pads)}, {"mode", mode}});
}
GraphBuilder::V GraphBuilder::rotate_half(V x, bool interleaved, int64_t rotary_dims) {
  Attrs a;
  if (interleaved) a["interleaved"] = int64_t(1);
  if (rotary_dims != 0) a["rotary_dims"] = rotary_dims;
  return op(OpKind::RotateHalf, {x}, std::move(a));
}
GraphBuilder::V GraphBuilder::reshape(V x, std::vector<int64_t> shape) {
  return op(OpKind::Reshape, {x}, {{"shape", std::move(shape)}});
}
GraphBuilder::V GraphBuilder::transpose(V x, std::vector<int64_t> perm) {
  return op(OpKind::Transpose, {x}, {{"perm", std::move(perm)}});
}
GraphBuilder::V GraphBuilder::slice(V x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                                    std::vector<int64_t> axes, std::vector<int64_t> steps) {
  Attrs a{{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"axes", std::move(axes)}};
  if (!steps.empty()) a["steps"] = std::move(steps);
  return op(OpKind::Slice, {x}, a);
}
GraphBuilder::V GraphBuilder::concat(std::vector<V> xs, int64_t axis) {
  return op(OpKind::Concat, std::move(xs), {{"axis", axis}});
}
GraphBuilder::V GraphBuilder::expand(V x, Shape shape) {
  std::vector<int64_t> s;
  for (auto& d : shape) s.push_back(d.is_static() ? d.value() : -1);
  return op(OpKind::Expand, {x}, {{"shape", s}});
}
GraphBuilder::V GraphBuilder::shape_of(V x, int64_t start, std::optional<int64_t> end) {
  Attrs a{{"start", start}};
  if (end) a["end"] = *end;
  return op(OpKind::Shape, {x}, a);
}
GraphBuilder::V GraphBuilder::range(V start, V limit, V delta) {
  return op(OpKind::Range, {start, limit, delta});
}
GraphBuilder::V GraphBuilder::constant_of_shape(V shape, const Tensor& fill) {
  Node* n = graph_->add_node(OpKind::ConstantOfShape, {shape}, {}, "");
  n->payload = fill;
  return finish(n);
}
GraphBuilder::V GraphBuilder::reshape(V x, V shape, bool allowzero) {
  return op(OpKind::Reshape, {x, shape}, {{"allowzero", int64_t(allowzero)}});
}
GraphBuilder::V GraphBuilder::expand(V x, V shape) { return op(OpKind::Expand, {x, shape}); }
GraphBuilder::V GraphBuilder::slice(V x, V starts, V ends, V axes, V steps) {
  return op(OpKind::Slice, {x, starts, ends, axes, steps});
}
std::vector<GraphBuilder::V> GraphBuilder::if_(V cond, std::shared_ptr<const Graph> then_g,
                                               std::shared_ptr<const Graph> else_g,
                                               std::vector<V> inputs) {
  if (!then_g || !else_g) throw Error("if_: both branches are needed");
  std::vector<int64_t> map;
  for (size_t j = 0; j < inputs.size(); j++) map.push_back(int64_t(j) + 1);
  std::vector<V> ins{cond};
  ins.insert(ins.end(), inputs.begin(), inputs.end());
  Node* n = graph_->add_node(OpKind::If, ins, {{"then_inputs", map}, {"else_inputs", map}}, "",
                             int(then_g->outputs().size()));
  n->branches = {std::move(then_g), std::move(else_g)};
  finish(n);
  return n->outputs;
}

std::vector<GraphBuilder::V> GraphBuilder::top_k(V x, V k, int64_t axis, bool largest,
                                                 bool sorted) {
  Attrs a{{"axis", axis}, {"largest", int64_t(largest)}, {"sorted", int64_t(sorted)}};
  Node* n = graph_->add_node(OpKind::TopK, {x, k}, std::move(a), "", 2);
  finish(n);
  return n->outputs;
}

GraphBuilder::V GraphBuilder::quantize_linear(V x, V scale, V zero_point, int64_t axis) {
  std::vector<V> in{x, scale};
  if (zero_point) in.push_back(zero_point);
  return op(OpKind::QuantizeLinear, in, {{"axis", axis}});
}
GraphBuilder::V GraphBuilder::dequantize_linear(V x, V scale, V zero_point, int64_t axis) {
  std::vector<V> in{x, scale};
  if (zero_point) in.push_back(zero_point);
  return op(OpKind::DequantizeLinear, in, {{"axis", axis}});
}
std::vector<GraphBuilder::V> GraphBuilder::dynamic_quantize_linear(V x) {
  Node* n = graph_->add_node(OpKind::DynamicQuantizeLinear, {x}, {}, "", 3);
  finish(n);
  return n->outputs;
}
GraphBuilder::V GraphBuilder::matmul_integer(V a, V b, V a_zero_point, V b_zero_point) {
  if (b_zero_point && !a_zero_point) {
    throw Error("matmul_integer: a b_zero_point needs an a_zero_point (a zero of a's dtype)");
  }
  std::vector<V> in{a, b};
  if (a_zero_point) in.push_back(a_zero_point);
  if (b_zero_point) in.push_back(b_zero_point);
  return op(OpKind::MatMulInteger, in);
}

GraphBuilder::V GraphBuilder::host(V x, HostFn fn, const std::string& name) {
  Node* n = graph_->add_node(OpKind::Host, {x}, {}, name);
  n->host = std::move(fn);
  return finish(n);
}

Graph GraphBuilder::build() {
  verify(*graph_);
  Graph g = std::move(*graph_);
  graph_ = std::make_unique<Graph>();
  last_ = nullptr;
  return g;
}

}  // namespace ubfuse
