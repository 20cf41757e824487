// Ops that read or write through a tensor of indices: Gather (also of a shape vector, which
// folds at import), GatherElements, GatherND, ScatterND, ScatterElements and Scatter, and OneHot
// and ReverseSequence, which build their indices and select or gather with them.
#include "import/onnx/registry.h"
#include "ir/shape_util.h"

namespace ubfuse::onnx_import {

namespace {

void gather_elements(NodeCtx& c) {
  if (c.dtype(1) != DType::i64 && c.dtype(1) != DType::i32)
    c.invalid("indices must be int64 or int32");
  if (c.rank(0) != c.rank(1)) c.invalid("indices must have the rank of data");
  int64_t axis = c.norm_axis(c.attr_int("axis", 0), c.rank(0), "axis");
  c.set_output(0, c.emit(OpKind::GatherElements, {c.value(0), c.value(1)}, {{"axis", axis}}));
}

void gather_nd(NodeCtx& c) {
  if (c.dtype(1) != DType::i64 && c.dtype(1) != DType::i32) {
    c.invalid("indices must be int64, got " + std::string(dtype_name(c.dtype(1))));
  }
  const int64_t b = c.attr_int("batch_dims", 0);
  c.set_output(0, c.emit(OpKind::GatherND, {c.value(0), c.value(1)}, {{"batch_dims", b}}));
}

// ScatterND, ScatterElements and the Scatter of opsets 9 and 10 (ScatterElements without
// reduction); `reduction` came with opset 16 (add, mul) and 18 (max, min).
template <OpKind K>
void scatter(NodeCtx& c) {
  if (c.dtype(1) != DType::i64 && c.dtype(1) != DType::i32) {
    c.invalid("indices must be int64 or int32, got " + std::string(dtype_name(c.dtype(1))));
  }
  if (c.dtype(2) != c.dtype(0)) {
    c.invalid("updates (" + std::string(dtype_name(c.dtype(2))) + ") must have data's type (" +
              std::string(dtype_name(c.dtype(0))) + ")");
  }
  const std::string red = c.attr_str("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min") {
    c.invalid("reduction \"" + red + "\" (none, add, mul, max or min)");
  }
  Attrs a{{"reduction", red}};
  if (K == OpKind::ScatterElements) {
    if (c.rank(0) != c.rank(1)) c.invalid("indices must have the rank of data");
    a["axis"] = c.norm_axis(c.attr_int("axis", 0), c.rank(0), "axis");
  }
  c.set_output(0, c.emit(K, {c.value(0), c.value(1), c.value(2)}, a));
}

void gather(NodeCtx& c) {
  int64_t axis = c.attr_int("axis", 0);
  const IValue& data = c.input(0);
  if (data.dims && c.is_const(1)) {  // shape[i]
    if (c.norm_axis(axis, 1, "axis") != 0) c.invalid("axis must be 0 for a 1-D input");
    const auto& v = *data.dims;
    const Tensor& idx = c.const_input(1, "indices");
    if (idx.rank() > 1) c.needs_static(v, "gathering a shape vector with 2-D indices");
    std::vector<Dim> out;
    for (int64_t i = 0; i < idx.numel(); i++) {
      int64_t k = int64_t(idx.get(i));
      if (k < 0) k += int64_t(v.size());
      if (k < 0 || k >= int64_t(v.size()))
        c.invalid("index " + std::to_string(k) + " is out of range");
      out.push_back(v[size_t(k)]);
    }
    c.set_output_dims(0, out, idx.rank() == 0, data.dtype);
    return;
  }
  if (c.dtype(1) != DType::i64 && c.dtype(1) != DType::i32)
    c.invalid("indices must be int64 or int32");
  int64_t ax = c.norm_axis(axis, c.rank(0), "axis");
  c.set_output(0, c.emit(OpKind::Gather, {c.value(0), c.value(1)}, {{"axis", ax}}));
}

}  // namespace

// OneHot(indices, depth, values [off, on]): on where an index (negative ones counting from
// depth) equals the position along the new axis, off elsewhere. Positions are a Range over depth,
// which may arrive at run time; floats among the indices are truncated as ONNX casts them.
void one_hot(NodeCtx& c) {
  Value* idx = c.value(0);
  Value* depth = c.value(1);
  Value* values = c.value(2);
  if (c.dtype(0) == DType::boolean || c.dtype(1) == DType::boolean) {
    c.invalid("indices and depth must be numbers");
  }
  if (values->shape.size() != 1 || values->shape[0] != Dim(2)) {
    c.invalid("values must be [off_value, on_value], got the shape " + shape_str(values->shape));
  }
  if (!depth->shape.empty() && (depth->shape.size() != 1 || depth->shape[0] != Dim(1))) {
    c.invalid("depth must hold one value, got the shape " + shape_str(depth->shape));
  }
  const DType dt = depth->dtype;
  if (!depth->shape.empty()) depth = c.reshape_to(depth, {});
  if (is_float(idx->dtype)) idx = cast_value(c, idx, DType::i64);
  idx = cast_value(c, idx, dt);
  idx = c.emit(OpKind::Where, {c.emit(OpKind::Less, {idx, c.scalar(0, dt)}),
                               c.emit(OpKind::Add, {idx, depth}), idx});
  const Shape s = idx->shape;
  const int64_t r = int64_t(s.size());
  const int64_t axis = c.norm_axis(c.attr_int("axis", -1), r + 1, "axis");
  Value* pos = c.emit(OpKind::Range, {c.scalar(0, dt), depth, c.scalar(1, dt)});
  // pos as [depth, 1, ...] (one 1 per axis of idx after `axis`), idx with a 1 at `axis`. Built
  // in place, not by insert: GCC 12 warns (falsely) of an uninitialized Dim moved by insert.
  Shape pos_shape(size_t(r - axis + 1), Dim(1)), idx_shape;
  pos_shape[0] = pos->shape[0];
  for (int64_t i = 0; i <= r; i++) {
    idx_shape.push_back(i == axis ? Dim(1) : s[size_t(i < axis ? i : i - 1)]);
  }
  Value* hit = c.emit(OpKind::Equal, {c.reshape_to(idx, idx_shape), c.reshape_to(pos, pos_shape)});
  c.set_output(0, c.emit(OpKind::Where,
                         {hit, slice_axis(c, values, 0, 1, 2), slice_axis(c, values, 0, 0, 1)}));
}

// ReverseSequence(x, sequence_lens): each batch entry's first len elements along the time axis
// reversed: GatherElements along time with index len - 1 - t below len, t from there on, the
// index broadcast over the other axes. The lengths may arrive at run time.
void reverse_sequence(NodeCtx& c) {
  Value* x = c.value(0);
  Value* lens = c.value(1);
  const Shape s = x->shape;
  const int64_t r = int64_t(s.size());
  if (r < 2) c.invalid("input must have rank >= 2, got " + shape_str(s));
  const int64_t bax = c.norm_axis(c.attr_int("batch_axis", 1), r, "batch_axis");
  const int64_t tax = c.norm_axis(c.attr_int("time_axis", 0), r, "time_axis");
  if (bax == tax) c.invalid("batch_axis and time_axis are both " + std::to_string(bax));
  if (lens->dtype != DType::i64 || lens->shape.size() != 1 || lens->shape[0] != s[size_t(bax)]) {
    c.invalid("sequence_lens must be int64 [" + s[size_t(bax)].str() +
              "] (one per batch entry), got " + shape_str(lens->shape) + " " +
              std::string(dtype_name(lens->dtype)));
  }
  std::vector<int64_t> expand;
  for (const Dim& d : s) {
    if (!d.is_static()) c.needs_static({d}, "reversing sequences of a symbolic size");
    expand.push_back(d.value());
  }
  const int64_t T = s[size_t(tax)].value();
  Sizes t_sizes(size_t(r), 1);
  t_sizes[size_t(tax)] = T;
  Value* t = positions(c, t_sizes);
  Shape l_shape(size_t(r), Dim(1));
  l_shape[size_t(bax)] = s[size_t(bax)];
  Value* len = c.reshape_to(lens, l_shape);
  Value* rev = c.emit(OpKind::Sub, {c.emit(OpKind::Sub, {len, c.scalar(1, DType::i64)}), t});
  Value* idx = c.emit(OpKind::Where, {c.emit(OpKind::Less, {t, len}), rev, t});
  idx = c.emit(OpKind::Expand, {idx}, {{"shape", expand}});
  c.set_output(0, c.emit(OpKind::GatherElements, {x, idx}, {{"axis", tax}}));
}

void add_index_ops(ConverterMap& m) {
  m["Gather"] = gather;
  m["GatherElements"] = gather_elements;
  m["GatherND"] = gather_nd;
  m["ScatterND"] = scatter<OpKind::ScatterND>;
  m["ScatterElements"] = scatter<OpKind::ScatterElements>;
  m["Scatter"] = scatter<OpKind::ScatterElements>;
  m["OneHot"] = one_hot;
  m["ReverseSequence"] = reverse_sequence;
}

}  // namespace ubfuse::onnx_import
