// Ops that produce values known at import: Shape, Size, Constant, ConstantOfShape, Range, EyeLike,
// Trilu (on a constant; on a tensor it becomes a Where over a constant mask, or over a computed one
// when k or the matrix dims arrive at run time), Identity, Dropout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

void shape(NodeCtx& c) {
  const Shape& s = c.shape(0);
  int64_t r = int64_t(s.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  start = clampi(start);
  end = clampi(end);
  std::vector<Dim> d;
  for (int64_t i = start; i < end; i++) d.push_back(s[size_t(i)]);
  c.set_output_dims(0, d, false);
}

void size(NodeCtx& c) {
  Dim n(int64_t(1));
  for (auto& d : c.shape(0)) n = Dim::mul(n, d);
  c.set_output_dims(0, {n}, true);
}

void constant(NodeCtx& c) {
  int given = 0;
  for (const char* a : {"value", "value_float", "value_floats", "value_int", "value_ints",
                        "value_string", "value_strings", "sparse_value"}) {
    given += c.has_attr(a);
  }
  if (given != 1) c.invalid("needs exactly one value attribute, got " + std::to_string(given));
  if (auto* t = c.attr_tensor("value")) {
    c.set_output_const(0, tensor_from_proto(*t, c.name(), c.state().tensor_options));
  } else if (c.has_attr("value_float")) {
    Tensor t(DType::f32, {});
    t.set(0, c.attr_float("value_float", 0));
    c.set_output_const(0, t);
  } else if (c.has_attr("value_int")) {
    Tensor t(DType::i64, {});
    t.data_as<int64_t>()[0] = c.attr_int("value_int", 0);
    c.set_output_const(0, t);
  } else if (c.has_attr("value_ints")) {
    auto v = c.attr_ints("value_ints");
    Tensor t(DType::i64, {int64_t(v.size())});
    for (size_t i = 0; i < v.size(); i++) t.data_as<int64_t>()[i] = v[i];
    c.set_output_const(0, t);
  } else if (c.has_attr("value_floats")) {
    c.ignore_attr("value_floats");
    c.unsupported("attribute 'value_floats' is not supported; use 'value'");
  } else {
    c.unsupported("string and sparse constants are not supported");
  }
}

Sizes static_shape_input(NodeCtx& c, int i, const std::string& what) {
  auto dims = c.dims_input(i, what);
  Sizes s;
  for (auto& d : dims) {
    if (!d.is_static()) c.needs_static(dims, what);
    if (d.value() < 0) c.invalid(what + " has a negative dim " + std::to_string(d.value()));
    s.push_back(d.value());
  }
  return s;
}

void constant_of_shape(NodeCtx& c) {
  Tensor fill(DType::f32, {1});
  fill.set(0, 0.0);
  if (auto* t = c.attr_tensor("value")) {
    fill = tensor_from_proto(*t, c.name() + ".value", c.state().tensor_options);
    if (fill.numel() != 1) c.invalid("attribute 'value' must hold one element");
  }
  const IValue& in = c.input(0);
  const bool known =
      in.konst.defined() || (in.dims && std::all_of(in.dims->begin(), in.dims->end(),
                                                    [](const Dim& d) { return d.is_static(); }));
  if (!known) {  // sizes known only at run time: the plan reads them
    c.set_output(0, c.emit(OpKind::ConstantOfShape, {c.value(0)}, {}, fill));
    return;
  }
  Sizes s = static_shape_input(c, 0, "the output shape");
  Tensor out(fill.dtype(), s);
  size_t item = dtype_size(fill.dtype());
  for (int64_t i = 0; i < out.numel(); i++) {
    std::memcpy(static_cast<char*>(out.data()) + size_t(i) * item, fill.data(), item);
  }
  c.set_output_const(0, out);
}

void range(NodeCtx& c) {
  bool known = true;
  for (int i = 0; i < 3; i++) {
    const IValue& v = c.input(i);
    known &= v.konst.defined();
    if (v.shape.size() > 1 || (v.shape.size() == 1 && v.shape[0] != Dim(1))) {
      c.invalid("start, limit and delta must be scalars");
    }
  }
  if (!known) {  // bounds from sizes or inputs (arange(past, past + seq)): computed per plan
    c.set_output(0, c.emit(OpKind::Range, {c.value(0), c.value(1), c.value(2)}));
    return;
  }
  const Tensor& s = c.const_input(0, "start");
  const Tensor& l = c.const_input(1, "limit");
  const Tensor& d = c.const_input(2, "delta");
  DType dt = s.dtype();
  if (l.dtype() != dt || d.dtype() != dt) c.invalid("start, limit and delta differ in type");
  if (dt == DType::boolean) c.invalid("Range over bool");
  Tensor out;
  if (dt == DType::i64 || dt == DType::i32) {
    auto get = [](const Tensor& t) {
      return t.dtype() == DType::i64 ? t.data_as<int64_t>()[0] : int64_t(t.data_as<int32_t>()[0]);
    };
    int64_t a = get(s), b = get(l), step = get(d);
    if (step == 0) c.invalid("delta is 0");
    int64_t n = std::max<int64_t>(0, (b - a + step + (step > 0 ? -1 : 1)) / step);
    out = Tensor(dt, {n});
    for (int64_t i = 0; i < n; i++) {
      if (dt == DType::i64) {
        out.data_as<int64_t>()[i] = a + i * step;
      } else {
        out.data_as<int32_t>()[i] = int32_t(a + i * step);
      }
    }
  } else {
    double a = s.get(0), b = l.get(0), step = d.get(0);
    if (step == 0) c.invalid("delta is 0");
    double nf = std::ceil((b - a) / step);
    if (!(nf < 1e9)) c.invalid("Range has too many elements");
    int64_t n = std::max<int64_t>(0, int64_t(nf));
    out = Tensor(dt, {n});
    for (int64_t i = 0; i < n; i++) out.set(i, a + double(i) * step);
  }
  c.set_output_const(0, out);
}

// keep(i, j) for Trilu: upper keeps j - i >= k, lower keeps j - i <= k.
bool tri_keep(bool upper, int64_t k, int64_t i, int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

// Trilu whose k arrives at run time or whose matrix dims are symbolic: the mask is computed,
// cols - rows compared with k, from Ranges over the dims (shape values, run while planning).
void trilu_computed(NodeCtx& c, bool upper) {
  Value* x = c.value(0);
  const int64_t r = c.rank(0);
  auto i64 = [&](float v) { return c.constant(Tensor::from_floats(DType::i64, {1}, {v})); };
  auto arange = [&](int64_t axis) {
    Value* len = c.emit(OpKind::Shape, {x}, {{"start", axis}, {"end", axis + 1}});
    return c.emit(OpKind::Range, {i64(0), len, i64(1)});
  };
  Value* rows = c.emit(OpKind::Reshape, {arange(r - 2)}, {{"shape", std::vector<int64_t>{-1, 1}}});
  Value* diff = c.emit(OpKind::Sub, {arange(r - 1), rows});  // [n, m]: j - i
  Value* k = c.has_input(1) ? c.value(1) : i64(0);
  if (k->dtype != DType::i64) c.invalid("k must be int64");
  if (!(k->shape.empty() || (k->shape.size() == 1 && k->shape[0] == Dim(int64_t(1))))) {
    c.invalid("k must be a scalar, got shape " + shape_str(k->shape));
  }
  // upper keeps j - i >= k, lower keeps j - i <= k.
  Value* drop = c.emit(upper ? OpKind::Less : OpKind::Greater, {diff, k});
  c.set_output(0, c.emit(OpKind::Where, {drop, c.scalar(0, x->dtype), x}));
}

void trilu(NodeCtx& c) {
  bool upper = c.attr_int("upper", 1) != 0;
  const Shape& s = c.shape(0);
  if (s.size() < 2) c.invalid("input must have rank >= 2");
  const Dim& dn = s[s.size() - 2];
  const Dim& dm = s[s.size() - 1];
  if (!dn.is_static() || !dm.is_static() || (c.has_input(1) && c.is_runtime(1))) {
    trilu_computed(c, upper);
    return;
  }
  int64_t k = 0;
  if (c.has_input(1)) {
    auto kv = c.const_ints(1, "k");
    if (kv.size() != 1) c.invalid("k must be a scalar");
    k = kv[0];
  }
  int64_t n = dn.value(), m = dm.value();
  if (c.is_const(0)) {  // PyTorch's masks: Trilu of a constant folds away
    Tensor x = c.const_input(0, "input").clone();
    size_t item = dtype_size(x.dtype());
    int64_t mats = n * m != 0 ? x.numel() / (n * m) : 0;
    for (int64_t b = 0; b < mats; b++) {
      for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < m; j++) {
          if (!tri_keep(upper, k, i, j)) {
            std::memset(static_cast<char*>(x.data()) + size_t((b * n + i) * m + j) * item, 0, item);
          }
        }
      }
    }
    c.set_output_const(0, x);
    return;
  }
  Tensor mask(DType::boolean, {n, m});
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < m; j++) mask.data_as<uint8_t>()[i * m + j] = tri_keep(upper, k, i, j);
  }
  Value* x = c.value(0);
  c.set_output(0, c.emit(OpKind::Where, {c.constant(mask), x, c.scalar(0, x->dtype)}));
}

void eye_like(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (s.size() != 2 || !is_static(s)) c.unsupported("input must be 2-D with static dims");
  DType dt = c.dtype(0);
  if (c.has_attr("dtype")) dt = dtype_from_onnx(int32_t(c.attr_int("dtype", 1)), c.where());
  int64_t k = c.attr_int("k", 0);
  Sizes sz = static_sizes(s);
  Tensor t = Tensor::zeros(dt, sz);
  for (int64_t i = 0; i < sz[0]; i++) {
    int64_t j = i + k;
    if (j >= 0 && j < sz[1]) t.set(i * sz[1] + j, 1.0);
  }
  c.set_output_const(0, t);
}

void identity(NodeCtx& c) { c.set_output_like(0, c.input(0)); }

void dropout(NodeCtx& c) {
  // Inference: the identity. Training mode (randomness) is not supported.
  c.ignore_attr("seed");
  if (c.opset() < 12) c.ignore_attr("ratio");
  // Before opset 7 is_test = 0, the default, asks for training mode, as BatchNormalization's does.
  if (c.opset() < 7 && c.attr_int("is_test", 0) == 0) {
    c.unsupported(
        "training mode (is_test = 0, the default before opset 7: random dropout); hint: "
        "export the model in eval mode, which sets is_test = 1");
  }
  if (c.has_input(2)) {
    const Tensor& t = c.const_input(2, "training_mode");
    if (t.numel() != 1) c.invalid("training_mode must be a scalar");
    if (t.get(0) != 0) c.unsupported("training_mode=true (random dropout) is not supported");
  }
  c.set_output_like(0, c.input(0));
  if (c.output_used(1)) {
    const Shape& s = c.shape(0);
    if (!is_static(s)) c.needs_static(s, "Dropout's mask output");
    Tensor m(DType::boolean, static_sizes(s));
    for (int64_t i = 0; i < m.numel(); i++) m.data_as<uint8_t>()[i] = 1;
    c.set_output_const(1, m);
  }
}

}  // namespace

void add_shape_ops(ConverterMap& m) {
  m["Shape"] = shape;
  m["Size"] = size;
  m["Constant"] = constant;
  m["ConstantOfShape"] = constant_of_shape;
  m["Range"] = range;
  m["Trilu"] = trilu;
  m["EyeLike"] = eye_like;
  m["Identity"] = identity;
  m["Dropout"] = dropout;
}

}  // namespace ubfuse::onnx_import
