// Reductions over any set of axes: a Transpose moves the reduced axes last, a Reshape merges them,
// ubfuse's last-axis reduction runs, and a Reshape restores keepdims. A single last axis (LayerNorm
// and RMSNorm as exported) maps to one ubfuse op, which canonicalization can recognize.
#include <algorithm>
#include <string>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

// An integer reduction over the last axis, exact (wrapping as onnxruntime's does): a sum is the
// last of the running sums (CumSum), a max or min the element ArgMax or ArgMin picks (ubfuse's
// row reductions compute in float).
Value* reduce_last_int(NodeCtx& c, Red kind, Value* x) {
  const int64_t last = int64_t(x->shape.size()) - 1;
  auto sum = [&](Value* v) {
    Tensor end(DType::i64, {1});
    end.data_as<int64_t>()[0] = -1;
    Value* run = c.emit(OpKind::CumSum, {v}, {{"axis", last}});
    return c.emit(OpKind::Gather, {run, c.constant(end)}, {{"axis", last}});
  };
  auto pick = [&](OpKind arg) {
    Value* at = c.emit(arg, {x}, {{"axis", last}, {"keepdims", int64_t(1)}});
    return c.emit(OpKind::GatherElements, {x, at}, {{"axis", last}});
  };
  switch (kind) {
    case Red::Sum:
      return sum(x);
    case Red::SumSquare:
      return sum(c.emit(OpKind::Mul, {x, x}));
    case Red::L1:
      return sum(c.emit(OpKind::Abs, {x}));
    case Red::Max:
      return pick(OpKind::ArgMax);
    case Red::Min:
      return pick(OpKind::ArgMin);
    default:
      c.unsupported("an integer input (" + std::string(dtype_name(x->dtype)) +
                    "): ReduceSum, ReduceSumSquare, ReduceL1, ReduceMax and ReduceMin take one; "
                    "this one needs float, float16 or bfloat16");
  }
}

Value* reduce_last(NodeCtx& c, Red kind, Value* x) {
  if (!is_float(x->dtype)) return reduce_last_int(c, kind, x);
  Attrs keep{{"keepdims", int64_t(1)}};
  auto sum = [&](Value* v) { return c.emit(OpKind::ReduceSum, {v}, keep); };
  switch (kind) {
    case Red::Mean:
      return c.emit(OpKind::ReduceMean, {x}, keep);
    case Red::Sum:
      return sum(x);
    case Red::Max:
      return c.emit(OpKind::ReduceMax, {x}, keep);
    case Red::Prod:
      return c.emit(OpKind::ReduceProd, {x}, keep);
    case Red::Min:
      return c.emit(OpKind::Neg, {c.emit(OpKind::ReduceMax, {c.emit(OpKind::Neg, {x})}, keep)});
    case Red::L1:
      return sum(c.emit(OpKind::Abs, {x}));
    case Red::L2:
      return c.emit(OpKind::Sqrt, {sum(c.emit(OpKind::Mul, {x, x}))});
    case Red::SumSquare:
      return sum(c.emit(OpKind::Mul, {x, x}));
    case Red::LogSum:
      return c.emit(OpKind::Log, {sum(x)});
    case Red::LogSumExp: {
      Value* m = c.emit(OpKind::ReduceMax, {x}, keep);
      Value* s = sum(c.emit(OpKind::Exp, {c.emit(OpKind::Sub, {x, m})}));
      return c.emit(OpKind::Add, {c.emit(OpKind::Log, {s}), m});
    }
  }
  UBF_CHECK(false, "reduce_last: unhandled kind");
}

// The reduction over axes given at run time: as below, with the Transpose's perm and the
// Reshapes' targets AxesShape's vectors, computed and checked when the plan is built.
void reduce_runtime(NodeCtx& c, Red kind, bool keep) {
  Value* x = c.value(0);
  if (x->shape.empty()) c.unsupported("reducing a scalar");
  for (const Dim& d : x->shape) {
    if (d == Dim(int64_t(0))) {
      c.unsupported("reducing a tensor with an empty dim " + shape_str(x->shape) +
                    " over axes given at run time");
    }
  }
  Value* axes = c.value(1);
  Value* t = c.emit(OpKind::Transpose, {x, axes_shape(c, x, axes, "reduce_perm")});
  Attrs exact{{"allowzero", int64_t(1)}};
  t = c.emit(OpKind::Reshape, {t, axes_shape(c, x, axes, "reduce_merged")}, exact);
  Value* y = reduce_last(c, kind, t);  // kept dims + [1]
  c.set_output(0, c.emit(OpKind::Reshape,
                         {y, axes_shape(c, x, axes, keep ? "reduce_keep" : "reduce_drop")}, exact));
}

}  // namespace

// x reduced over `axes` (all when empty): a Transpose moves them last, a Reshape merges them, the
// last-axis op runs, and a Reshape drops them or keeps 1s.
Value* reduce_axes(NodeCtx& c, Red kind, Value* x, const std::vector<int64_t>& axes, bool keep) {
  const Shape s = x->shape;
  const int64_t r = int64_t(s.size());
  std::vector<bool> red(size_t(r), axes.empty());
  for (auto a : axes) red[size_t(c.norm_axis(a, r, "axes entry"))] = true;
  std::vector<int64_t> perm;
  Shape kept, out_keep = s;
  Dim merged(int64_t(1));
  for (int64_t i = 0; i < r; i++) {
    if (!red[size_t(i)]) {
      perm.push_back(i);
      kept.push_back(s[size_t(i)]);
    }
  }
  for (int64_t i = 0; i < r; i++) {
    if (red[size_t(i)]) {
      perm.push_back(i);
      merged = Dim::mul(merged, s[size_t(i)]);
      out_keep[size_t(i)] = Dim(1);
      if (s[size_t(i)] == Dim(int64_t(0))) c.unsupported("reducing an empty axis");
    }
  }
  bool moved = false;
  for (int64_t i = 0; i < r; i++) moved |= perm[size_t(i)] != i;
  Value* t = moved ? c.emit(OpKind::Transpose, {x}, {{"perm", perm}}) : x;
  Shape merged_shape = kept;
  merged_shape.push_back(merged);
  if (t->shape != merged_shape) t = c.reshape_to(t, merged_shape);
  Value* y = reduce_last(c, kind, t);  // shape kept + [1]
  const Shape& want = keep ? out_keep : kept;
  return y->shape == want ? y : c.reshape_to(y, want);
}

namespace {

template <Red kKind>
void reduce(NodeCtx& c) {
  if (c.dtype(0) == DType::boolean) c.unsupported("a bool input; Cast it to an integer first");
  bool axes_as_input = (c.opset() >= 13 && kKind == Red::Sum) || c.opset() >= 18;
  bool keep = c.attr_int("keepdims", 1) != 0;
  bool noop_empty = c.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (axes_as_input) {
    // Axes given at run time; an empty list (its length is known) reduces all or nothing.
    if (c.has_input(1) && !c.is_const(1) && runtime_values_length(c, 1, "axes") > 0) {
      return reduce_runtime(c, kKind, keep);
    }
    if (c.is_const(1)) axes = c.const_ints(1, "axes");
  } else {
    axes = c.attr_ints("axes");
  }
  Value* x = c.value(0);
  const Shape s = x->shape;
  int64_t r = int64_t(s.size());
  if (axes.empty() && noop_empty) {
    c.set_output(0, c.reshape_to(x, s));
    return;
  }
  if (r == 0) c.unsupported("reducing a scalar");
  c.set_output(0, reduce_axes(c, kKind, x, axes, keep));
}

template <OpKind K>
void arg(NodeCtx& c) {
  if (c.dtype(0) == DType::boolean) c.unsupported("bool input");
  int64_t axis = c.norm_axis(c.attr_int("axis", 0), c.rank(0), "axis");
  Attrs a{{"axis", axis},
          {"keepdims", c.attr_int("keepdims", 1) != 0 ? int64_t(1) : int64_t(0)},
          {"select_last_index", c.attr_int("select_last_index", 0) != 0 ? int64_t(1) : int64_t(0)}};
  c.set_output(0, c.emit(K, {c.value(0)}, a));
}

// CumSum(x, axis): an axis known at import becomes the attribute; one given at run time stays an
// input, a value operand that the plan reads and checks against x's shape.
void cumsum(NodeCtx& c) {
  if (c.dtype(0) == DType::boolean) c.invalid("CumSum does not take bool input");
  Attrs a{{"exclusive", c.attr_int("exclusive", 0) != 0 ? int64_t(1) : int64_t(0)},
          {"reverse", c.attr_int("reverse", 0) != 0 ? int64_t(1) : int64_t(0)}};
  if (!c.is_const(1)) {
    if (c.dtype(1) != DType::i64 && c.dtype(1) != DType::i32) {
      c.invalid("axis must be int64 or int32, got " + std::string(dtype_name(c.dtype(1))));
    }
    const Shape& s = c.shape(1);
    if (!(s.empty() || (s.size() == 1 && s[0] == Dim(int64_t(1))))) {
      c.invalid("axis must hold one value, got the shape " + shape_str(s));
    }
    c.set_output(0, c.emit(OpKind::CumSum, {c.value(0), c.value(1)}, a));
    return;
  }
  const std::vector<int64_t> ax = c.const_ints(1, "axis");
  if (ax.size() != 1) c.invalid("axis must hold one value, got " + std::to_string(ax.size()));
  a["axis"] = c.norm_axis(ax[0], c.rank(0), "axis");
  c.set_output(0, c.emit(OpKind::CumSum, {c.value(0)}, a));
}

// TopK(x, K): K a constant or a value known when the plan is built (opset 1 to 9: attribute k).
void top_k(NodeCtx& c) {
  if (c.dtype(0) == DType::boolean) c.invalid("TopK does not take bool input");
  Value* k = nullptr;
  if (c.opset() < 10) {
    Tensor t(DType::i64, {1});
    t.data_as<int64_t>()[0] = c.attr_int("k", -1);
    k = c.constant(t);
  } else {
    if (c.dtype(1) != DType::i64) {
      c.invalid("K must be int64, got " + std::string(dtype_name(c.dtype(1))));
    }
    k = c.value(1);
  }
  Attrs a{{"axis", c.norm_axis(c.attr_int("axis", -1), c.rank(0), "axis")},
          {"largest", c.attr_int("largest", 1) != 0 ? int64_t(1) : int64_t(0)},
          // sorted = 0 leaves the order to the implementation: ubfuse's is sorted
          {"sorted", c.attr_int("sorted", 1) != 0 ? int64_t(1) : int64_t(0)}};
  std::vector<Value*> out = c.emit_outputs(OpKind::TopK, {c.value(0), k}, a, 2);
  c.set_output(0, out[0]);
  c.set_output(1, out[1]);
}

}  // namespace

void add_reduce_ops(ConverterMap& m) {
  m["TopK"] = top_k;
  m["CumSum"] = cumsum;
  m["ArgMax"] = arg<OpKind::ArgMax>;
  m["ArgMin"] = arg<OpKind::ArgMin>;
  m["ReduceMean"] = reduce<Red::Mean>;
  m["ReduceSum"] = reduce<Red::Sum>;
  m["ReduceMax"] = reduce<Red::Max>;
  m["ReduceProd"] = reduce<Red::Prod>;
  m["ReduceMin"] = reduce<Red::Min>;
  m["ReduceL1"] = reduce<Red::L1>;
  m["ReduceL2"] = reduce<Red::L2>;
  m["ReduceSumSquare"] = reduce<Red::SumSquare>;
  m["ReduceLogSum"] = reduce<Red::LogSum>;
  m["ReduceLogSumExp"] = reduce<Red::LogSumExp>;
}

}  // namespace ubfuse::onnx_import
