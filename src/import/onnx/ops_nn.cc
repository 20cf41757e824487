// MatMul, Gemm (-> Transpose + MatMul + Mul + Add), Softmax / LogSoftmax over any axis (a
// Transpose moves it last), LayerNormalization (-> LayerNorm, with its Mean / InvStdDev outputs).
#include <algorithm>
#include <limits>

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

// Conv over 1 to 3 spatial axes; shape inference checks the attributes against the operands.
void conv(NodeCtx& c) {
  require_float(c, 0);
  const Attrs a = conv_window_attrs(c, "Conv", 3);
  std::vector<Value*> in{c.value(0), c.value(1)};
  if (c.has_input(2)) in.push_back(c.value(2));
  c.set_output(0, c.emit(OpKind::Conv, in, a));
}

// MaxPool and AveragePool over 1 to 3 spatial axes; shape inference checks the attributes.
template <OpKind K>
void pool(NodeCtx& c) {
  if (K == OpKind::AveragePool) require_float(c, 0);
  const int64_t r = c.rank(0);
  if (r < 3 || r > 5) {
    c.unsupported("pooling over " + std::to_string(r - 2) +
                  " spatial axes (1-D, 2-D and 3-D are supported)");
  }
  std::string ap = c.attr_str("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  Attrs a{{"auto_pad", ap}};
  for (const char* k : {"kernel_shape", "strides", "pads", "dilations"}) {
    if (c.has_attr(k)) a[k] = c.attr_ints(k);
  }
  for (const char* k : {"ceil_mode", "count_include_pad", "storage_order"}) {
    if (c.has_attr(k)) a[k] = c.attr_int(k, 0);
  }
  if (K == OpKind::MaxPool && c.output_used(1)) {
    std::vector<Value*> out = c.emit_outputs(K, {c.value(0)}, a, 2);
    c.set_output(0, out[0]);
    c.set_output(1, out[1]);
    return;
  }
  c.set_output(0, c.emit(K, {c.value(0)}, a));
}

// MaxUnpool(x, indices, output_shape?): zeros with each x value at its index, which MaxPool's
// Indices give flat over the whole output of the default shape [N, C, (in - 1) s - pads + k ...]:
// a ScatterElements into flattened zeros. A larger output_shape (at run time too) pads the
// result at the end of each axis, as ONNX's reference places the values by their coordinates.
void max_unpool(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  Value* idx = c.value(1);
  const Shape s = x->shape;
  if (idx->dtype != DType::i64 || idx->shape != s) {
    c.invalid("indices must be int64 of X's shape " + shape_str(s) + ", got " +
              shape_str(idx->shape) + " " + std::string(dtype_name(idx->dtype)));
  }
  if (s.size() < 3) c.invalid("X must be [N, C, spatial...] (rank >= 3)");
  const size_t sp = s.size() - 2;
  const std::vector<int64_t> k = c.attr_ints("kernel_shape");
  const std::vector<int64_t> st = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (k.size() != sp || st.size() != sp || pads.size() != 2 * sp) {
    c.invalid("kernel_shape, strides and pads must give 1, 1 and 2 values per spatial axis");
  }
  Sizes out;
  for (size_t i = 0; i < s.size(); i++) {
    if (!s[i].is_static()) c.needs_static({s[i]}, "unpooling a symbolic size");
    const size_t a = i - 2;
    out.push_back(i < 2 ? s[i].value()
                        : (s[i].value() - 1) * st[a] - pads[a] - pads[sp + a] + k[a]);
  }
  const Attrs flat{{"shape", std::vector<int64_t>{-1}}};
  Value* y = c.emit(OpKind::ScatterElements,
                    {c.constant(Tensor::zeros(x->dtype, {numel(out)})),
                     c.emit(OpKind::Reshape, {idx}, flat), c.emit(OpKind::Reshape, {x}, flat)},
                    {{"axis", int64_t(0)}, {"reduction", std::string("none")}});
  y = c.reshape_to(y, to_shape(out));
  if (c.has_input(2)) {
    Value* shape = c.value(2);
    const int64_t r = int64_t(s.size());
    if (shape->dtype != DType::i64 || shape->shape.size() != 1 || shape->shape[0] != Dim(r)) {
      c.invalid("output_shape must be int64 [" + std::to_string(r) + "]");
    }
    // pads: 0 before each axis, output_shape - default after it
    std::vector<float> dflt(out.begin(), out.end());
    Value* ends =
        c.emit(OpKind::Sub, {shape, c.constant(Tensor::from_floats(DType::i64, {r}, dflt))});
    Value* begins = c.constant(Tensor::zeros(DType::i64, {r}));
    Value* p = c.emit(OpKind::Concat, {begins, ends}, {{"axis", int64_t(0)}});
    y = c.emit(OpKind::Pad, {y, c.scalar(0, x->dtype), p}, {{"mode", std::string("constant")}});
  }
  c.set_output(0, y);
}

// GlobalMaxPool and GlobalAveragePool: ReduceMax and ReduceMean over the spatial axes, kept.
template <OpKind K>
void global_pool(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  const Shape s = x->shape;
  if (s.size() < 3) c.invalid("X must be [N, C, spatial...] (rank >= 3)");
  Shape rows{s[0], s[1]}, out{s[0], s[1]};
  Dim window(int64_t(1));
  for (size_t i = 2; i < s.size(); i++) {
    window = Dim::mul(window, s[i]);
    out.emplace_back(1);
  }
  if (window == Dim(int64_t(0))) c.unsupported("pooling an empty spatial extent");
  rows.push_back(window);
  Value* y = c.emit(K, {c.reshape_to(x, rows)}, {{"keepdims", int64_t(1)}});
  c.set_output(0, c.reshape_to(y, out));
}

// ConvTranspose over 1 to 3 spatial axes as the Conv it equals: x with s - 1 zeros after each
// element along each axis (a Reshape, a zero Pad, a Reshape), padded by d (k - 1) less the pads on
// each side (output_padding more at the end; a negative amount crops), convolved at stride 1 with
// the kernel flipped and its in and out channels swapped per group. The zeros add exact zero
// products, so the result is ConvTranspose's; the work grows with the stride.
void conv_transpose(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  Value* w = c.value(1);
  const int64_t r = c.rank(0);
  if (r < 3 || r > 5) {
    c.unsupported("ConvTranspose over " + std::to_string(r - 2) +
                  " spatial axes (1-D, 2-D and 3-D are supported)");
  }
  if (c.rank(1) != r) c.invalid("W must be [C, M/group, k...] of X's rank " + std::to_string(r));
  const size_t sp = size_t(r - 2);
  for (size_t i = 1; i < size_t(r); i++) {
    for (const Value* v : {x, w}) {
      if (!v->shape[i].is_static()) c.needs_static({v->shape[i]}, "a transposed convolution");
    }
  }
  const int64_t group = c.attr_int("group", 1);
  const int64_t C = x->shape[1].value(), Mg = w->shape[1].value();
  if (group < 1 || C % group != 0 || w->shape[0].value() != C) {
    c.invalid("W " + shape_str(w->shape) + " must be [C, M/group, k...] for X " +
              shape_str(x->shape) + " and group " + std::to_string(group) + " (group dividing C)");
  }
  auto list = [&](const char* k, size_t n, int64_t dflt, int64_t min) {
    std::vector<int64_t> v = c.attr_ints(k, std::vector<int64_t>(n, dflt));
    if (v.size() != n) {
      c.invalid(std::string(k) + " has " + std::to_string(v.size()) + " values, expected " +
                std::to_string(n));
    }
    for (int64_t e : v) {
      if (e < min) c.invalid(std::string(k) + " has a value below " + std::to_string(min));
    }
    return v;
  };
  std::vector<int64_t> k(sp);
  for (size_t i = 0; i < sp; i++) k[i] = w->shape[2 + i].value();
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != k) {
    c.invalid("kernel_shape " + sizes_str(c.attr_ints("kernel_shape")) +
              " does not match W's kernel dims " + sizes_str(k));
  }
  const auto st = list("strides", sp, 1, 1), dl = list("dilations", sp, 1, 1),
             op = list("output_padding", sp, 0, 0);
  std::vector<int64_t> pads = list("pads", 2 * sp, 0, 0);
  std::string ap = c.attr_str("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID") {
    c.invalid("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"" + ap + "\"");
  }
  std::vector<int64_t> out_shape = c.attr_ints("output_shape", {});
  if (out_shape.size() > sp) out_shape.erase(out_shape.begin(), out_shape.end() - long(sp));
  if (!out_shape.empty() && out_shape.size() != sp) {
    c.invalid("output_shape must give the " + std::to_string(sp) + " spatial sizes");
  }
  for (size_t i = 0; i < sp; i++) {
    const int64_t in = x->shape[2 + i].value(), dk = dl[i] * (k[i] - 1) + 1;
    if (ap == "VALID") pads[i] = pads[sp + i] = 0;
    const bool same = ap == "SAME_UPPER" || ap == "SAME_LOWER";
    if (!out_shape.empty() || same) {
      // ONNX's rule: the total padding that gives the requested size, split as auto_pad says
      // (rounding down, as its reference does: an output larger than the natural one grows at
      // the end).
      const int64_t want = out_shape.empty() ? in * st[i] : out_shape[i];
      const int64_t total = st[i] * (in - 1) + op[i] + dk - want;
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
      pads[i] = ap == "SAME_UPPER" ? half : total - half;
      pads[sp + i] = total - pads[i];
    }
  }
  // x spread by the strides: [N, C, L] -> [N, C, L, 1] -> [N, C, L, s] -> [N, C, L s].
  Shape spread{x->shape[0], x->shape[1]}, flat{x->shape[0], x->shape[1]};
  std::vector<int64_t> spread_pads(2 * (2 + 2 * sp), 0), final_pads(size_t(2 * r), 0);
  for (size_t i = 0; i < sp; i++) {
    const int64_t in = x->shape[2 + i].value(), dk = dl[i] * (k[i] - 1) + 1;
    spread.emplace_back(in);
    spread.emplace_back(1);
    flat.emplace_back(in * st[i]);
    spread_pads[2 + 2 * sp + 3 + 2 * i] = st[i] - 1;
    final_pads[2 + i] = dk - 1 - pads[i];
    final_pads[size_t(r) + 2 + i] = dk - 1 - pads[sp + i] + op[i] - (st[i] - 1);
    if (in * st[i] + final_pads[2 + i] + final_pads[size_t(r) + 2 + i] - dk + 1 < 1) {
      c.invalid("spatial axis " + std::to_string(i) + " gives no output (pads " + sizes_str(pads) +
                ")");
    }
  }
  const Attrs zero{{"mode", std::string("constant")}};
  Value* u = x;
  if (std::any_of(st.begin(), st.end(), [](int64_t s) { return s > 1; })) {
    Attrs a = zero;
    a["pads"] = spread_pads;
    u = c.reshape_to(c.emit(OpKind::Pad, {c.reshape_to(x, spread)}, a), flat);
  }
  Attrs a = zero;
  a["pads"] = final_pads;
  u = c.emit(OpKind::Pad, {u}, a);
  // W [C, M/g, k...] -> [g, C/g, M/g, k...] -> [g, M/g, C/g, k...] -> [M, C/g, k...], flipped.
  Shape grouped{Dim(group), Dim(C / group), Dim(Mg)}, conv_w{Dim(group * Mg), Dim(C / group)};
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 0; i < sp; i++) {
    grouped.push_back(w->shape[2 + i]);
    conv_w.push_back(w->shape[2 + i]);
    perm.push_back(int64_t(3 + i));
  }
  Value* wt = c.emit(OpKind::Transpose, {c.reshape_to(w, grouped)}, {{"perm", perm}});
  wt = c.reshape_to(wt, conv_w);
  std::vector<int64_t> axes, starts, ends, steps;
  for (size_t i = 0; i < sp; i++) {
    axes.push_back(int64_t(2 + i));
    starts.push_back(-1);
    ends.push_back(std::numeric_limits<int64_t>::min());
    steps.push_back(-1);
  }
  wt = c.emit(OpKind::Slice, {wt},
              {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}});
  std::vector<Value*> in{u, wt};
  if (c.has_input(2)) in.push_back(c.value(2));
  c.set_output(0, c.emit(OpKind::Conv, in, {{"group", group}, {"dilations", dl}}));
}

// A per-channel vector [C] (input i) shaped [C, 1, ...] to broadcast against x [N, C, ...], in
// x's dtype.
Value* per_channel(NodeCtx& c, int i, const Value* x, const std::string& what) {
  Value* p = c.value(i);
  if (p->shape.size() != 1 || p->shape[0] != x->shape[1]) {
    c.invalid(what + " must have shape [" + x->shape[1].str() + "] (one per channel), got " +
              shape_str(p->shape));
  }
  if (p->dtype != x->dtype) {
    if (!is_float(p->dtype)) c.invalid(what + " must be float");
    p = cast_value(c, p, x->dtype);
  }
  Shape s{x->shape[1]};
  for (size_t k = 2; k < x->shape.size(); k++) s.emplace_back(1);
  return s == p->shape ? p : c.reshape_to(p, s);
}

// BatchNormalization: (x - mean) * scale / sqrt(var + epsilon) + bias per channel (elementwise
// ops, which fuse). Inference uses the given mean and variance; training mode the batch's, over
// every axis but the channels (the population variance, as ONNX's reference), and outputs the
// running statistics updated by momentum: given * momentum + batch * (1 - momentum). Opset 6
// picks the mode by is_test (training unless it is 1), opsets from 14 by training_mode; opsets 7
// to 13 tell it by the outputs used, and their training mode's are rejected below.
void batch_norm(NodeCtx& c) {
  require_float(c, 0);
  const bool training = c.opset() < 7    ? c.attr_int("is_test", 0) == 0
                        : c.opset() < 14 ? false
                                         : c.attr_int("training_mode", 0) != 0;
  if (c.opset() < 9 && c.attr_int("spatial", 1) != 1) c.unsupported("spatial = 0");
  const double momentum = c.attr_float("momentum", 0.9);
  for (int i = training ? 3 : 1; i < c.num_outputs(); i++) {
    if (c.output_used(i)) {
      c.unsupported(
          "output " + std::to_string(i) +
          (training ? " (the saved statistics of opsets before 14)" : " (training mode's)"));
    }
  }
  Value* x = c.value(0);
  const size_t r = x->shape.size();
  if (r < 2) c.invalid("X must be [N, C, ...] (rank >= 2)");
  const double eps = c.attr_float("epsilon", 1e-5);
  Value* scale = per_channel(c, 1, x, "scale");
  Value* bias = per_channel(c, 2, x, "B");
  Value* mean = per_channel(c, 3, x, "input_mean");
  Value* var = per_channel(c, 4, x, "input_var");
  if (training) {
    std::vector<int64_t> axes{0};
    for (size_t i = 2; i < r; i++) axes.push_back(int64_t(i));
    Value* bmean = reduce_axes(c, Red::Mean, x, axes, true);  // [1, C, 1, ...]
    Value* dev = c.emit(OpKind::Sub, {x, bmean});
    Value* bvar = reduce_axes(c, Red::Mean, c.emit(OpKind::Mul, {dev, dev}), axes, true);
    auto running = [&](int out, Value* given, Value* batch) {
      if (!c.output_used(out)) return;
      Value* b = c.reshape_to(batch, {x->shape[1]});
      Value* g = c.reshape_to(given, {x->shape[1]});
      c.set_output(
          out, c.emit(OpKind::Add, {c.emit(OpKind::Mul, {g, scalar_like(c, momentum, g)}),
                                    c.emit(OpKind::Mul, {b, scalar_like(c, 1 - momentum, b)})}));
    };
    running(1, mean, bmean);
    running(2, var, bvar);
    mean = bmean;
    var = bvar;
  }
  Value* inv = c.emit(OpKind::Rsqrt, {c.emit(OpKind::Add, {var, scalar_like(c, eps, var)})});
  Value* y =
      c.emit(OpKind::Mul, {c.emit(OpKind::Sub, {x, mean}), c.emit(OpKind::Mul, {scale, inv})});
  c.set_output(0, c.emit(OpKind::Add, {y, bias}));
}

// LRN: x / (bias + alpha / size * s)^beta, s the sum of squares over a window of `size` channels
// (floor((size - 1) / 2) before, the rest after): zero-padded channels, one Slice per tap.
void lrn(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  const size_t r = x->shape.size();
  if (r < 3) c.invalid("X must be [N, C, spatial...] (rank >= 3)");
  const int64_t size = c.attr_int("size", 0);
  if (size < 1) c.invalid("size must be >= 1, got " + std::to_string(size));
  const double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75),
               bias = c.attr_float("bias", 1.0);
  const Dim& ch = x->shape[1];
  if (!ch.is_static()) c.needs_static({ch}, "summing over a window of a symbolic channel count");
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value* sq = c.emit(OpKind::Mul, {x, x});
  std::vector<int64_t> pads(2 * r, 0);
  pads[1] = before;
  pads[r + 1] = after;
  Value* padded = c.emit(OpKind::Pad, {sq}, {{"pads", pads}, {"mode", std::string("constant")}});
  Value* sum = nullptr;
  for (int64_t t = 0; t < size; t++) {
    Value* tap = slice_axis(c, padded, 1, t, t + ch.value());
    sum = sum ? c.emit(OpKind::Add, {sum, tap}) : tap;
  }
  Value* base =
      c.emit(OpKind::Add, {c.emit(OpKind::Mul, {sum, scalar_like(c, alpha / double(size), x)}),
                           scalar_like(c, bias, x)});
  c.set_output(0, c.emit(OpKind::Mul, {x, c.emit(OpKind::Pow, {base}, {{"exponent", -beta}})}));
}

// MeanVarianceNormalization: (x - mean) / (sqrt(variance) + 1e-9) over `axes` (default N, H, W),
// as ONNX's function body, with the variance as the mean squared deviation.
void mvn(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  const std::vector<int64_t> axes = c.attr_ints("axes", {0, 2, 3});
  if (axes.empty()) c.invalid("axes must not be empty");
  if (x->shape.empty()) c.invalid("X must have rank >= 1");
  Value* d = c.emit(OpKind::Sub, {x, reduce_axes(c, Red::Mean, x, axes, true)});
  Value* var = reduce_axes(c, Red::Mean, c.emit(OpKind::Mul, {d, d}), axes, true);
  Value* sd = c.emit(OpKind::Add, {c.emit(OpKind::Sqrt, {var}), scalar_like(c, 1e-9, x)});
  c.set_output(0, c.emit(OpKind::Div, {d, sd}));
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

// Resize (opsets 10 to 19) and Upsample (opset 9): one ubfuse Resize of X by its scales (f32) or
// sizes (i64), each a constant or a value the plan reads; roi only where tf_crop_and_resize reads
// it. An input named "" or holding no elements (opset 11's empty scales beside sizes) is absent.
void resize_to(NodeCtx& c, int scales_in, int sizes_in, int roi_in, Attrs a) {
  require_float(c, 0);
  auto given = [&](int i) {
    if (i < 0 || !c.has_input(i)) return false;
    const Shape& s = c.shape(i);
    return !(s.size() == 1 && s[0] == Dim(int64_t(0)));
  };
  const bool scales = given(scales_in), sizes = given(sizes_in);
  if (scales == sizes) {
    c.invalid(scales ? "takes scales or sizes, not both; hint: leave the other input empty or out"
                     : "needs scales or sizes; hint: one of the two inputs must hold values");
  }
  const int vi = scales ? scales_in : sizes_in;
  const DType want = scales ? DType::f32 : DType::i64;
  if (c.dtype(vi) != want && !(sizes && c.dtype(vi) == DType::i32)) {
    c.invalid(std::string(scales ? "scales must be float" : "sizes must be int64") + ", got " +
              std::string(dtype_name(c.dtype(vi))) +
              "; hint: ONNX's Resize takes float scales or int64 sizes");
  }
  std::vector<Value*> in{c.value(0), c.value(vi)};
  const auto coord = a.find("coordinate_transformation_mode");
  if (coord != a.end() && std::get<std::string>(coord->second) == "tf_crop_and_resize" &&
      given(roi_in)) {
    in.push_back(cast_value(c, c.value(roi_in), DType::f32));
  }
  c.set_output(0, c.emit(OpKind::Resize, in, std::move(a)));
}

void resize(NodeCtx& c) {
  Attrs a{{"mode", c.attr_str("mode", "nearest")}};
  if (c.opset() < 11) {
    // Resize-10: (X, scales), asymmetric coordinates. Nearest takes the element left of the
    // coordinate, as Upsample did, and the one right of it when constant scales only shrink
    // (some below 1, none above), as onnxruntime's opset 10 rule and ONNX's opset 10 downsample
    // test have it; scales given at run time take the left one.
    a["coordinate_transformation_mode"] = std::string("asymmetric");
    std::string nm = "floor";
    if (c.is_const(1)) {
      const Tensor& t = c.const_input(1, "scales");
      bool below = false, above = false;
      for (int64_t i = 0; i < t.numel(); i++) {
        below = below || t.get(i) < 1;
        above = above || t.get(i) > 1;
      }
      if (below && !above) nm = "ceil";
    }
    a["nearest_mode"] = nm;
    return resize_to(c, 1, -1, -1, std::move(a));
  }
  a["coordinate_transformation_mode"] = c.attr_str("coordinate_transformation_mode", "half_pixel");
  a["nearest_mode"] = c.attr_str("nearest_mode", "round_prefer_floor");
  a["cubic_coeff_a"] = c.attr_float("cubic_coeff_a", -0.75);
  a["exclude_outside"] = c.attr_int("exclude_outside", 0);
  a["extrapolation_value"] = c.attr_float("extrapolation_value", 0.0);
  if (c.opset() >= 18) {
    a["antialias"] = c.attr_int("antialias", 0);
    a["keep_aspect_ratio_policy"] = c.attr_str("keep_aspect_ratio_policy", "stretch");
    if (c.has_attr("axes")) a["axes"] = c.attr_ints("axes");
  }
  resize_to(c, 2, 3, 1, std::move(a));
}

// Upsample (opset 9, deprecated since 10): (X, scales), nearest taking the element left of the
// asymmetric coordinate, or linear.
void upsample(NodeCtx& c) {
  if (c.num_inputs() < 2) {
    c.unsupported("Upsample before opset 9 (scales as an attribute); hint: re-export at opset 9+");
  }
  const std::string mode = c.attr_str("mode", "nearest");
  resize_to(c, 1, -1, -1,
            {{"mode", mode},
             {"coordinate_transformation_mode", std::string("asymmetric")},
             {"nearest_mode", std::string("floor")}});
}

}  // namespace

Value* log_softmax_axis(NodeCtx& c, Value* x, int64_t axis) {
  return on_last_axis(c, x, axis, [&](Value* v) { return log_softmax_last(c, v); });
}

void add_nn_ops(ConverterMap& m) {
  m["MatMul"] = matmul;
  m["Gemm"] = gemm;
  m["Softmax"] = softmax<false>;
  m["LogSoftmax"] = softmax<true>;
  m["LayerNormalization"] = layer_norm;
  m["Conv"] = conv;
  m["ConvTranspose"] = conv_transpose;
  m["BatchNormalization"] = batch_norm;
  m["LRN"] = lrn;
  m["MeanVarianceNormalization"] = mvn;
  m["MaxPool"] = pool<OpKind::MaxPool>;
  m["MaxUnpool"] = max_unpool;
  m["AveragePool"] = pool<OpKind::AveragePool>;
  m["GlobalMaxPool"] = global_pool<OpKind::ReduceMax>;
  m["GlobalAveragePool"] = global_pool<OpKind::ReduceMean>;
  m["InstanceNormalization"] = group_norm<true>;
  m["GroupNormalization"] = group_norm<false>;
  m["Resize"] = resize;
  m["Upsample"] = upsample;
}

}  // namespace ubfuse::onnx_import
