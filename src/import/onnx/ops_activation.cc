// Activations without a ubfuse op of their own, lowered to elementwise ops (which fuse anyway).
#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

struct E {  // terse emit helpers for the formulas below
  NodeCtx& c;
  Value* k(double v, Value* like) { return scalar_like(c, v, like); }
  Value* add(Value* a, Value* b) { return c.emit(OpKind::Add, {a, b}); }
  Value* sub(Value* a, Value* b) { return c.emit(OpKind::Sub, {a, b}); }
  Value* mul(Value* a, Value* b) { return c.emit(OpKind::Mul, {a, b}); }
  Value* div(Value* a, Value* b) { return c.emit(OpKind::Div, {a, b}); }
  Value* max(Value* a, Value* b) { return c.emit(OpKind::Max, {a, b}); }
  Value* min(Value* a, Value* b) { return c.emit(OpKind::Min, {a, b}); }
  Value* less(Value* a, Value* b) { return c.emit(OpKind::Less, {a, b}); }
  Value* greater(Value* a, Value* b) { return c.emit(OpKind::Greater, {a, b}); }
  Value* where(Value* p, Value* a, Value* b) { return c.emit(OpKind::Where, {p, a, b}); }
  Value* exp(Value* a) { return c.emit(OpKind::Exp, {a}); }
  Value* log(Value* a) { return c.emit(OpKind::Log, {a}); }
  Value* abs(Value* a) { return c.emit(OpKind::Abs, {a}); }
  // alpha * (exp(x) - 1)
  Value* expm1_scaled(Value* x, double alpha) { return mul(sub(exp(x), k(1, x)), k(alpha, x)); }
};

Value* in0(NodeCtx& c) {
  require_float(c, 0);
  return c.value(0);
}

void leaky_relu(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  double a = c.attr_float("alpha", 0.01);
  c.set_output(0, e.where(e.less(x, e.k(0, x)), e.mul(x, e.k(a, x)), x));
}

// PRelu: x < 0 ? x * slope : x. Opsets before 7 give one slope or one per channel (axis 1), as
// a vector of that length; later ones broadcast it as numpy does.
void prelu(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  Value* slope = c.value(1);
  if (c.opset() < 7 && slope->shape.size() == 1 && x->shape.size() >= 2 &&
      !(slope->shape[0].is_static() && slope->shape[0].value() == 1)) {
    if (slope->shape[0] != x->shape[1]) {
      c.invalid("slope " + shape_str(slope->shape) + " must have one value or one per channel of " +
                "X " + shape_str(x->shape) + " (opsets before 7)");
    }
    Shape s{x->shape[1]};
    while (s.size() + 1 < x->shape.size()) s.emplace_back(1);
    slope = c.reshape_to(slope, s);
  }
  Value* y = e.where(e.less(x, e.k(0, x)), e.mul(x, slope), x);
  if (y->shape != x->shape) c.invalid("slope must broadcast to X's shape");
  c.set_output(0, y);
}

void elu(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  double a = c.attr_float("alpha", 1.0);
  c.set_output(0, e.where(e.less(x, e.k(0, x)), e.expm1_scaled(x, a), x));
}

void selu(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  double a = c.attr_float("alpha", 1.67326319217681884765625);
  double g = c.attr_float("gamma", 1.05070102214813232421875);
  Value* y = e.where(e.greater(x, e.k(0, x)), x, e.expm1_scaled(x, a));
  c.set_output(0, e.mul(y, e.k(g, x)));
}

void celu(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  double a = c.attr_float("alpha", 1.0);
  Value* neg = e.expm1_scaled(e.div(x, e.k(a, x)), a);
  c.set_output(0, e.add(e.max(x, e.k(0, x)), e.min(neg, e.k(0, x))));
}

Value* hard_sigmoid_of(E& e, Value* x, double a, double b) {
  Value* lin = e.add(e.mul(x, e.k(a, x)), e.k(b, x));
  return e.max(e.min(lin, e.k(1, x)), e.k(0, x));
}

void hard_sigmoid(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  double a = c.attr_float("alpha", 0.2), b = c.attr_float("beta", 0.5);
  c.set_output(0, hard_sigmoid_of(e, x, a, b));
}

void hard_swish(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  c.set_output(0, e.mul(x, hard_sigmoid_of(e, x, 1.0 / 6, 0.5)));
}

void softplus(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  c.set_output(0, e.log(e.add(e.exp(x), e.k(1, x))));
}

void softsign(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  c.set_output(0, e.div(x, e.add(e.abs(x), e.k(1, x))));
}

void thresholded_relu(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  double a = c.attr_float("alpha", 1.0);
  c.set_output(0, e.where(e.greater(x, e.k(a, x)), x, e.k(0, x)));
}

}  // namespace

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
void shrink(NodeCtx& c) {
  E e{c};
  Value* x = in0(c);
  const double l = c.attr_float("lambd", 0.5), b = c.attr_float("bias", 0.0);
  Value* inner = e.where(e.greater(x, e.k(l, x)), e.sub(x, e.k(b, x)), e.k(0, x));
  c.set_output(0, e.where(e.less(x, e.k(-l, x)), e.add(x, e.k(b, x)), inner));
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere: ArgMax compared with the axis'
// positions. Before opset 13 the input is viewed as 2-D [before axis, from axis on].
void hardmax(NodeCtx& c) {
  Value* x = in0(c);
  const Shape s = x->shape;
  const int64_t r = int64_t(s.size());
  if (r == 0) c.invalid("X must have rank >= 1");
  const bool coerce = c.opset() < 13;
  int64_t axis = c.norm_axis(c.attr_int("axis", coerce ? 1 : -1), r, "axis");
  Value* v = x;
  if (coerce) {
    Dim rows(int64_t(1)), cols(int64_t(1));
    for (int64_t i = 0; i < r; i++) {
      (i < axis ? rows : cols) = Dim::mul(i < axis ? rows : cols, s[size_t(i)]);
    }
    v = c.reshape_to(x, {rows, cols});
    axis = 1;
  }
  const Dim& len = v->shape[size_t(axis)];
  if (!len.is_static()) c.needs_static({len}, "marking the maximum along a symbolic axis");
  // The positions 0..len-1 along the axis, 1s after it, so they broadcast against ArgMax's result.
  Sizes pos_sizes{len.value()};
  for (size_t i = size_t(axis) + 1; i < v->shape.size(); i++) pos_sizes.push_back(1);
  Value* pos = positions(c, pos_sizes);
  Value* arg = c.emit(OpKind::ArgMax, {v}, {{"axis", axis}, {"keepdims", int64_t(1)}});
  Value* y = cast_value(c, c.emit(OpKind::Equal, {arg, pos}), x->dtype);
  c.set_output(0, coerce ? c.reshape_to(y, s) : y);
}

void add_activation_ops(ConverterMap& m) {
  m["Shrink"] = shrink;
  m["Hardmax"] = hardmax;
  m["LeakyRelu"] = leaky_relu;
  m["PRelu"] = prelu;
  m["Elu"] = elu;
  m["Selu"] = selu;
  m["Celu"] = celu;
  m["HardSigmoid"] = hard_sigmoid;
  m["HardSwish"] = hard_swish;
  m["Softplus"] = softplus;
  m["Softsign"] = softsign;
  m["ThresholdedRelu"] = thresholded_relu;
}

}  // namespace ubfuse::onnx_import
