// MatMul, Gemm (-> Transpose + MatMul + Mul + Add), Softmax / LogSoftmax over any axis (a
// Transpose moves it last), LayerNormalization (-> LayerNorm, with its Mean / InvStdDev outputs).
#include <algorithm>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

void matmul(NodeCtx& c) {
  require_float(c, 0);
  c.set_output(0, c.emit(OpKind::MatMul, {c.value(0), c.value(1)}));
}

Value* transpose2d(NodeCtx& c, Value* x) {
  return c.emit(OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{1, 0}}});
}

void gemm(NodeCtx& c) {
  require_float(c, 0);
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  if (c.opset() < 7) c.ignore_attr("broadcast");
  if (c.rank(0) != 2 || c.rank(1) != 2) c.invalid("A and B must be 2-D");
  Value* a = c.value(0);
  Value* b = c.value(1);
  if (ta) a = transpose2d(c, a);
  if (tb) b = transpose2d(c, b);
  Value* y = c.emit(OpKind::MatMul, {a, b});
  if (alpha != 1.0) y = c.emit(OpKind::Mul, {y, scalar_like(c, alpha, y)});
  if (c.has_input(2) && beta != 0.0) {
    Value* cc = c.value(2);
    if (beta != 1.0) cc = c.emit(OpKind::Mul, {cc, scalar_like(c, beta, cc)});
    Value* sum = c.emit(OpKind::Add, {y, cc});
    if (sum->shape != y->shape) c.invalid("C must broadcast to A*B's shape");
    y = sum;
  }
  c.set_output(0, y);
}

// Runs `body` over the last axis: moves `axis` there (and back) with a swap Transpose.
template <typename F>
Value* on_last_axis(NodeCtx& c, Value* x, int64_t axis, F body) {
  int64_t r = int64_t(x->shape.size());
  if (axis == r - 1) return body(x);
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; i++) perm[size_t(i)] = i;
  std::swap(perm[size_t(axis)], perm[size_t(r - 1)]);
  Value* t = c.emit(OpKind::Transpose, {x}, {{"perm", perm}});
  return c.emit(OpKind::Transpose, {body(t)}, {{"perm", perm}});
}

Value* log_softmax_last(NodeCtx& c, Value* x) {
  Value* m = c.emit(OpKind::ReduceMax, {x}, {{"keepdims", int64_t(1)}});
  Value* d = c.emit(OpKind::Sub, {x, m});
  Value* s = c.emit(OpKind::ReduceSum, {c.emit(OpKind::Exp, {d})}, {{"keepdims", int64_t(1)}});
  return c.emit(OpKind::Sub, {d, c.emit(OpKind::Log, {s})});
}

template <bool kLog>
void softmax(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  int64_t r = int64_t(x->shape.size());
  if (r == 0) c.invalid("input must have rank >= 1");
  auto body = [&](Value* v) {
    return kLog ? log_softmax_last(c, v) : c.emit(OpKind::Softmax, {v});
  };
  if (c.opset() >= 13) {
    int64_t axis = c.norm_axis(c.attr_int("axis", -1), r, "axis");
    c.set_output(0, on_last_axis(c, x, axis, body));
    return;
  }
  // Before opset 13 the input is viewed as 2-D [prod(:axis), prod(axis:)].
  int64_t axis = c.norm_axis(c.attr_int("axis", 1), r, "axis");
  if (axis == r - 1) {
    c.set_output(0, body(x));
    return;
  }
  Dim a(int64_t(1)), b(int64_t(1));
  for (int64_t i = 0; i < r; i++)
    (i < axis ? a : b) = Dim::mul(i < axis ? a : b, x->shape[size_t(i)]);
  Value* y = body(c.reshape_to(x, {a, b}));
  c.set_output(0, c.reshape_to(y, x->shape));
}

void layer_norm(NodeCtx& c) {
  require_float(c, 0);
  double eps = c.attr_float("epsilon", 1e-5);
  int64_t stash = c.attr_int("stash_type", 1);
  if (stash != 1)
    c.unsupported("attribute 'stash_type' = " + std::to_string(stash) + " (only 1, float32)");
  Value* x = c.value(0);
  const Shape s = x->shape;
  int64_t r = int64_t(s.size());
  if (r == 0) c.invalid("X must have rank >= 1");
  int64_t axis = c.norm_axis(c.attr_int("axis", -1), r, "axis");
  Dim rows(int64_t(1)), cols(int64_t(1));
  for (int64_t i = 0; i < r; i++)
    (i < axis ? rows : cols) = Dim::mul(i < axis ? rows : cols, s[size_t(i)]);
  if (!cols.is_static()) c.needs_static({cols}, "normalizing over symbolic axes");
  // ubfuse's LayerNorm normalizes the last axis with a 1-D weight and bias.
  auto param = [&](int i) -> Value* {
    if (!c.has_input(i)) return nullptr;
    Value* p = c.value(i);
    if (!is_static(p->shape) || numel(static_sizes(p->shape)) != cols.value()) {
      c.unsupported("input " + std::to_string(i) + " of shape " + shape_str(p->shape) +
                    " must have one value per normalized element (" + cols.str() + ")");
    }
    return p->shape.size() == 1 ? p : c.reshape_to(p, {cols});
  };
  Value* scale = param(1);
  Value* bias = param(2);
  if (!scale) c.invalid("Scale is required");
  Value* x2 = axis == r - 1 ? x : c.reshape_to(x, {rows, cols});
  std::vector<Value*> in{x2, scale};
  if (bias) in.push_back(bias);
  Value* y = c.emit(OpKind::LayerNorm, in, {{"eps", eps}});
  c.set_output(0, axis == r - 1 ? y : c.reshape_to(y, s));
  if (c.output_used(1) || c.output_used(2)) {
    // Mean and 1/sqrt(var + eps), in float32, shaped like X with 1s over the normalized axes.
    Shape stat = s;
    for (int64_t i = axis; i < r; i++) stat[size_t(i)] = Dim(1);
    Value* xf =
        x2->dtype == DType::f32 ? x2 : c.emit(OpKind::Cast, {x2}, {{"to", std::string("f32")}});
    Value* mean = c.emit(OpKind::ReduceMean, {xf}, {{"keepdims", int64_t(1)}});
    Value* d = c.emit(OpKind::Sub, {xf, mean});
    Value* var =
        c.emit(OpKind::ReduceMean, {c.emit(OpKind::Mul, {d, d})}, {{"keepdims", int64_t(1)}});
    Value* inv = c.emit(OpKind::Rsqrt, {c.emit(OpKind::Add, {var, c.scalar(eps, DType::f32)})});
    if (c.output_used(1)) c.set_output(1, mean->shape == stat ? mean : c.reshape_to(mean, stat));
    if (c.output_used(2)) c.set_output(2, inv->shape == stat ? inv : c.reshape_to(inv, stat));
  }
}

// Conv over 1 or 2 spatial axes; shape inference checks the attributes against the operands.
void conv(NodeCtx& c) {
  require_float(c, 0);
  const int64_t r = c.rank(0);
  if (r != 3 && r != 4) {
    c.unsupported("Conv over " + std::to_string(r - 2) +
                  " spatial axes (1-D and 2-D are supported)");
  }
  std::string ap = c.attr_str("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  Attrs a{{"group", c.attr_int("group", 1)}, {"auto_pad", ap}};
  for (const char* k : {"kernel_shape", "strides", "pads", "dilations"}) {
    if (c.has_attr(k)) a[k] = c.attr_ints(k);
  }
  std::vector<Value*> in{c.value(0), c.value(1)};
  if (c.has_input(2)) in.push_back(c.value(2));
  c.set_output(0, c.emit(OpKind::Conv, in, a));
}

// InstanceNormalization (groups = channels) and GroupNormalization -> GroupNorm, whose scale and
// bias are per channel: opset 18's per-group ones are repeated over each group's channels.
template <bool kInstance>
void group_norm(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  if (x->shape.size() < 2) c.invalid("X must have rank >= 2 ([N, C, ...])");
  const Dim& ch = x->shape[1];
  if (!ch.is_static()) c.needs_static({ch}, "normalizing groups of a symbolic channel count");
  const int64_t C = ch.value();
  const int64_t groups = kInstance ? C : c.attr_int("num_groups", 0);
  if (!kInstance) {
    const int64_t stash = c.attr_int("stash_type", 1);
    if (stash != 1) {
      c.unsupported("attribute 'stash_type' = " + std::to_string(stash) + " (only 1, float32)");
    }
    if (groups < 1 || C % groups != 0) {
      c.invalid("num_groups " + std::to_string(groups) + " must be >= 1 and divide the " +
                std::to_string(C) + " channels");
    }
  }
  const double eps = c.attr_float("epsilon", 1e-5);
  auto per_channel = [&](int i) -> Value* {
    Value* p = c.value(i);
    if (p->shape.size() != 1 || !p->shape[0].is_static()) {
      c.invalid("input " + std::to_string(i) + " of shape " + shape_str(p->shape) +
                " must be 1-D with one value per channel or per group");
    }
    const int64_t len = p->shape[0].value();
    if (len == C) return p;
    if (kInstance || len != groups) {
      c.invalid("input " + std::to_string(i) + " has " + std::to_string(len) + " values for " +
                std::to_string(C) + " channels in " + std::to_string(groups) + " groups");
    }
    Value* col = c.reshape_to(p, {Dim(groups), Dim(int64_t(1))});
    Value* rep =
        c.emit(OpKind::Expand, {col}, {{"shape", std::vector<int64_t>{groups, C / groups}}});
    return c.reshape_to(rep, {Dim(C)});
  };
  std::vector<Value*> in{x, per_channel(1), per_channel(2)};
  c.set_output(0, c.emit(OpKind::GroupNorm, in, {{"groups", groups}, {"eps", eps}}));
}

}  // namespace

void add_nn_ops(ConverterMap& m) {
  m["MatMul"] = matmul;
  m["Gemm"] = gemm;
  m["Softmax"] = softmax<false>;
  m["LogSoftmax"] = softmax<true>;
  m["LayerNormalization"] = layer_norm;
  m["Conv"] = conv;
  m["InstanceNormalization"] = group_norm<true>;
  m["GroupNormalization"] = group_norm<false>;
}

}  // namespace ubfuse::onnx_import
