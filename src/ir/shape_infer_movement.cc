// Shape inference of the ops that move or describe data without arithmetic on it: Reshape,
// Transpose, RotateHalf, Slice, Concat, Expand, Shape, AxesShape, Range and ConstantOfShape.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/shape_infer_internal.h"
#include "ir/shape_util.h"
#include "ir/values.h"
#include "ubfuse/error.h"

namespace ubfuse::shape_infer {

namespace {

// Output dims that only the plan can know (a value operand's contents are not known yet).
Shape runtime_shape(const Node& n, int64_t rank) {
  Shape s;
  for (int64_t d = 0; d < rank; d++) s.push_back(runtime_dim(n, 0, int(d)));
  return s;
}

}  // namespace

void infer_reshape(Node& n) {
  const Value* x = n.inputs[0];
  n.out()->dtype = x->dtype;
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  std::string why;
  if (n.inputs.size() == 1) {
    auto target = n.attr_ints("shape");
    std::vector<Dim> t(target.begin(), target.end());
    auto out = reshape_target(x->shape, t, allowzero, &why);
    if (!out) fail(n, "cannot reshape to " + sizes_str(target) + ": " + why);
    n.out()->shape = *out;
    return;
  }
  int64_t k = operand_length(n, 1, "the target shape");
  auto target = operand_dims(n, 1);
  if (!target) {
    n.out()->shape = runtime_shape(n, k);
    return;
  }
  auto out = reshape_target(x->shape, *target, allowzero, &why);
  if (!out) fail(n, "cannot reshape to " + shape_str(*target) + ": " + why);
  n.out()->shape = *out;
}

void infer_transpose(Node& n) {
  const Value* x = n.inputs[0];
  int64_t r = int64_t(x->shape.size());
  std::vector<int64_t> perm;
  n.out()->dtype = x->dtype;
  if (n.inputs.size() == 2) {
    // (x, perm): the perm a value operand, never an attribute (fusion and views read the
    // attribute; this form runs as its own kernel).
    if (n.has_attr("perm")) fail(n, "takes perm as an attribute or as input 1, not both");
    if (operand_length(n, 1, "perm") != r) {
      fail(n, "perm must have one entry per axis of the input, got the shape " +
                  shape_str(n.inputs[1]->shape));
    }
    auto known = operand_static_ints(n, 1);
    if (!known) {
      n.out()->shape = runtime_shape(n, r);
      return;
    }
    perm = *known;
  } else if (n.has_attr("perm")) {
    perm = n.attr_ints("perm");
  } else {
    for (int64_t i = r - 1; i >= 0; i--) perm.push_back(i);
    n.attrs["perm"] = perm;
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(static_cast<size_t>(r), 0);
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    fail(n, "perm " + sizes_str(perm) + " is not a permutation of rank " + std::to_string(r));
  Shape s;
  for (auto p : perm) s.push_back(x->shape[size_t(p)]);
  n.out()->shape = s;
}

// RotateHalf rotates the first rotary_dims columns of the last axis (all when 0) and makes the
// rest 0: that many columns must be known, even and within the axis.
void infer_rotate_half(Node& n) {
  const Value* x = n.inputs[0];
  require_float(n, x);
  if (x->shape.empty()) fail(n, "needs at least 1 dim", "rotate the halves of a vector or more");
  const Dim& d = x->shape.back();
  if (!d.is_static() || d.value() == 0) {
    fail(n, "needs a fixed, nonzero last dim to rotate, got " + d.str(),
         "RoPE rotates the head dim, which is a fixed size");
  }
  const int64_t interleaved = n.attr_int("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) {
    fail(n, "interleaved must be 0 or 1, got " + std::to_string(interleaved),
         "0 rotates the halves (NeoX), 1 adjacent pairs (GPT-J)");
  }
  const int64_t r = n.attr_int("rotary_dims", 0);
  const int64_t rot = r == 0 ? d.value() : r;
  if (r < 0 || rot > d.value() || rot % 2 != 0) {
    fail(n,
         "needs an even number of rotated columns within the last dim " + d.str() + ", got " +
             (r == 0 ? "all " + d.str() : "rotary_dims " + std::to_string(r)),
         "RoPE rotates an even number of the head dim's first columns");
  }
  n.out()->shape = x->shape;
  n.out()->dtype = x->dtype;
}

void infer_slice(Node& n) {
  const Value* x = n.inputs[0];
  int64_t r = int64_t(x->shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.inputs.size() > 1) {
    // (x, starts, ends, axes, steps): each a value operand.
    if (n.inputs.size() != 5) fail(n, "takes x alone or x, starts, ends, axes and steps");
    const int64_t k = operand_length(n, 1, "starts");
    for (int i = 2; i < 5; i++) {
      if (operand_length(n, i, i == 2 ? "ends" : i == 3 ? "axes" : "steps") != k) {
        fail(n, "starts, ends, axes and steps must have the same length");
      }
    }
    n.out()->dtype = x->dtype;
    // Known as constants or as known dims (Split's offsets computed from static sizes).
    auto st = operand_static_ints(n, 1), en = operand_static_ints(n, 2),
         ax = operand_static_ints(n, 3), sp = operand_static_ints(n, 4);
    if (!ax) {  // which axes are sliced is not known yet: every dim is the plan's to know
      n.out()->shape = runtime_shape(n, r);
      return;
    }
    Shape s = x->shape;
    std::vector<int64_t> seen;
    for (size_t i = 0; i < ax->size(); i++) {
      int64_t a = norm_axis(n, (*ax)[i], r);
      if (std::find(seen.begin(), seen.end(), a) != seen.end()) fail(n, "axis repeated in axes");
      seen.push_back(a);
      if (sp && (*sp)[i] == 0) fail(n, "step must not be 0");
      std::optional<Dim> len;
      if (st && en && sp) len = slice_length(x->shape[size_t(a)], (*st)[i], (*en)[i], (*sp)[i]);
      s[size_t(a)] = len ? *len : runtime_dim(n, 0, int(a));
    }
    n.out()->shape = s;
    return;
  }
  starts = n.attr_ints("starts");
  ends = n.attr_ints("ends");
  if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
  } else {
    for (size_t i = 0; i < starts.size(); i++) axes.push_back(int64_t(i));
  }
  if (n.has_attr("steps")) {
    steps = n.attr_ints("steps");
  } else {
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    fail(n, "starts, ends, axes and steps must have the same length");
  }
  Shape s = x->shape;
  std::vector<int64_t> seen;
  for (size_t i = 0; i < starts.size(); i++) {
    int64_t ax = norm_axis(n, axes[i], r);
    if (std::find(seen.begin(), seen.end(), ax) != seen.end()) fail(n, "axis repeated in axes");
    seen.push_back(ax);
    axes[i] = ax;
    if (steps[i] == 0) fail(n, "step must not be 0");
    const Dim& d = x->shape[size_t(ax)];
    auto len = slice_length(d, starts[i], ends[i], steps[i]);
    // A length no dim expression states (a constant caps a symbolic dim, as in x[:4] or x[-1:])
    // is the plan's to know.
    s[size_t(ax)] = len ? *len : runtime_dim(n, 0, int(ax));
  }
  n.attrs["axes"] = axes;
  n.attrs["steps"] = steps;
  n.out()->dtype = x->dtype;
  n.out()->shape = s;
}

void infer_concat(Node& n) {
  const Value* x0 = n.inputs[0];
  int64_t r = int64_t(x0->shape.size());
  if (r == 0) fail(n, "cannot concatenate scalars");
  int64_t ax = norm_axis(n, n.attr_int("axis", 0), r);
  Dim total(int64_t(0));
  for (auto* v : n.inputs) {
    require_same_dtype(n, x0, v);
    if (int64_t(v->shape.size()) != r) fail(n, "inputs must have the same rank");
    for (int64_t i = 0; i < r; i++) {
      if (i != ax && v->shape[size_t(i)] != x0->shape[size_t(i)]) {
        fail(n, "inputs differ in dim " + std::to_string(i) + " (only axis " + std::to_string(ax) +
                    " may differ)");
      }
    }
    total = Dim::add(total, v->shape[size_t(ax)]);
  }
  Shape s = x0->shape;
  s[size_t(ax)] = total;
  n.attrs["axis"] = ax;
  n.out()->dtype = x0->dtype;
  n.out()->shape = s;
}

void infer_expand(Node& n) {
  const Value* x = n.inputs[0];
  n.out()->dtype = x->dtype;
  std::vector<Dim> target;
  if (n.inputs.size() == 1) {
    for (auto v : n.attr_ints("shape")) target.emplace_back(v);
  } else {
    int64_t k = operand_length(n, 1, "the target shape");
    auto t = operand_dims(n, 1);
    if (!t) {
      n.out()->shape = runtime_shape(n, std::max<int64_t>(k, int64_t(x->shape.size())));
      return;
    }
    target = *t;
  }
  Shape t;
  for (auto& v : target) {
    if (v.is_static() && v.value() < -1) {
      fail(n, "expand shape " + shape_str(target) + " has a negative dim");
    }
    t.push_back(v.is_static() && v.value() == -1 ? Dim(int64_t(1)) : v);
  }
  std::string why;
  auto out = broadcast_shapes(x->shape, t, &why);
  if (!out) fail(n, "cannot expand to " + shape_str(target) + ": " + why);
  n.out()->shape = *out;
}

// Shape(x)[start:end] as i64; its elements are known dims, static or symbolic.
void infer_shape_op(Node& n) {
  const Shape& s = n.inputs[0]->shape;
  int64_t r = int64_t(s.size());
  auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  int64_t start = clampi(n.attr_int("start", 0)), end = clampi(n.attr_int("end", r));
  std::vector<Dim> d;
  for (int64_t i = start; i < end; i++) d.push_back(s[size_t(i)]);
  n.out()->dtype = DType::i64;
  n.out()->shape = {Dim(int64_t(d.size()))};
  n.out()->known = d;
}

// AxesShape(shape, values): an i64 vector whose length the mode gives from the two operands'
// lengths; its elements are known (Value::known) when both operands are, and an invalid value
// known here is an error now rather than when a plan is built.
void infer_axes_shape(Node& n) {
  const std::string mode = n.attr_str("mode", "");
  const int64_t r = operand_length(n, 0, "the shape");
  const int64_t k = operand_length(n, 1, "the values");
  if (n.inputs[0]->shape.empty()) fail(n, "the shape must be a vector");
  if (n.inputs[1]->shape.empty()) fail(n, "the values must be a vector");
  if (axes_shape_length(mode, 0, 0) < 0) {
    fail(n, "unknown mode '" + mode + "'",
         "unsqueeze, squeeze, reduce_perm, reduce_merged, reduce_keep, reduce_drop, split, tile, "
         "tiled or pad");
  }
  const int64_t len = axes_shape_length(mode, r, k);
  if (len < 0) {
    fail(n, std::to_string(k) + " axes for an input of rank " + std::to_string(r) +
                ": one repeats or is out of range");
  }
  n.out()->dtype = DType::i64;
  n.out()->shape = {Dim(len)};
  n.out()->known.reset();
  auto s = operand_dims(n, 0);
  auto v = operand_static_ints(n, 1);
  if (!s || !v) return;
  std::string why;
  auto out = axes_shape(mode, *s, *v, n.attr_int("axis", 0), &why);
  if (!why.empty()) fail(n, why);
  if (out) n.out()->known = *out;
}

// Range(start, limit, delta): max(0, ceil((limit - start) / delta)) elements.
void infer_range(Node& n) {
  DType t = n.inputs[0]->dtype;
  for (int i = 0; i < 3; i++) {
    const Value* v = n.inputs[size_t(i)];
    if (v->dtype != t) fail(n, "start, limit and delta must have one dtype");
    if (!(v->shape.empty() || (v->shape.size() == 1 && v->shape[0] == Dim(int64_t(1))))) {
      fail(n, "start, limit and delta must be scalars");
    }
  }
  if (t == DType::boolean) fail(n, "Range over bool");
  n.out()->dtype = t;
  Dim len = runtime_dim(n, 0, 0);
  auto a = operand_dims(n, 0), b = operand_dims(n, 1), step = operand_dims(n, 2);
  auto fa = operand_value(n, 0), fb = operand_value(n, 1), fs = operand_value(n, 2);
  if (fa && fb && fs && is_float(t)) {
    double d = fs->get(0);
    if (d == 0) fail(n, "delta is 0");
    len = Dim(std::max<int64_t>(0, int64_t(std::ceil((fb->get(0) - fa->get(0)) / d))));
  } else if (a && b && step && (*step)[0].is_static()) {
    int64_t d = (*step)[0].value();
    if (d == 0) fail(n, "delta is 0");
    Dim span = Dim::sub((*b)[0], (*a)[0]);
    if (span.is_static()) {
      int64_t m = span.value();
      len = Dim(std::max<int64_t>(0, d > 0 ? (m + d - 1) / d : (m + d + 1) / d));
    } else if (d > 0) {
      // A symbolic span is taken as non-negative (a length); the plan checks it.
      if (auto q = Dim::floordiv(Dim::add(span, Dim(d - 1)), d)) len = *q;
    }
  }
  n.out()->shape = {len};
}

// ConstantOfShape(shape): the payload's one value in every element.
void infer_constant_of_shape(Node& n) {
  if (!n.payload.defined() || n.payload.numel() != 1) {
    fail(n, "needs a one-element fill value (payload)");
  }
  int64_t k = operand_length(n, 0, "the output shape");
  auto t = operand_dims(n, 0);
  n.out()->dtype = n.payload.dtype();
  if (!t) {
    n.out()->shape = runtime_shape(n, k);
    return;
  }
  for (auto& d : *t) {
    if (d.is_static() && d.value() < 0) fail(n, "the output shape has a negative dim " + d.str());
  }
  n.out()->shape = *t;
}

}  // namespace ubfuse::shape_infer
