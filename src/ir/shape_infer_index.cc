// Shape inference of the index ops: Gather, GatherElements, GatherND, ScatterND,
// ScatterElements, ArgMax/ArgMin, CumSum and TopK.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/shape_infer_internal.h"
#include "ir/shape_util.h"
#include "ir/values.h"
#include "ubfuse/error.h"

namespace ubfuse::shape_infer {

namespace {

// Gather and GatherElements: checks the indices' dtype and data's rank, and writes the axis back
// normalized.
int64_t gather_axis(Node& n) {
  const Value* idx = n.inputs[1];
  if (idx->dtype != DType::i64 && idx->dtype != DType::i32) {
    fail(n, "indices must be i64 or i32, got " + std::string(dtype_name(idx->dtype)));
  }
  int64_t r = int64_t(n.inputs[0]->shape.size());
  if (r == 0) fail(n, "data must have at least 1 dim");
  int64_t ax = norm_axis(n, n.attr_int("axis", 0), r);
  n.attrs["axis"] = ax;
  return ax;
}

}  // namespace

void infer_gather(Node& n) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  const int64_t ax = gather_axis(n);
  Shape s(data->shape.begin(), data->shape.begin() + ax);
  s.insert(s.end(), idx->shape.begin(), idx->shape.end());
  s.insert(s.end(), data->shape.begin() + ax + 1, data->shape.end());
  n.out()->dtype = data->dtype;
  n.out()->shape = s;
}

void infer_gather_elements(Node& n) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  const int64_t r = int64_t(data->shape.size());
  if (r > 0 && int64_t(idx->shape.size()) != r) fail(n, "indices must have the rank of data");
  const int64_t ax = gather_axis(n);
  for (int64_t d = 0; d < r; d++) {
    const Dim &a = idx->shape[size_t(d)], &b = data->shape[size_t(d)];
    if (d != ax && a.is_static() && b.is_static() && a.value() > b.value()) {
      fail(n, "indices dim " + std::to_string(d) + " (" + a.str() + ") exceeds data's (" + b.str() +
                  ")");
    }
  }
  n.out()->dtype = data->dtype;
  n.out()->shape = idx->shape;
}

namespace {

// Whether two dims are known to differ (symbolic ones may agree at run time, where planning
// re-runs the check on concrete sizes).
bool differ(const Dim& a, const Dim& b) {
  return a.is_static() && b.is_static() && a.value() != b.value();
}

// GatherND and ScatterND: the indices' dtype and last dim m (fixed: it decides the output's
// rank), checked against data's rank r after b batch dims; returns m.
int64_t index_tuple_length(Node& n, int64_t b) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  if (idx->dtype != DType::i64 && idx->dtype != DType::i32) {
    fail(n, "indices must be i64 or i32, got " + std::string(dtype_name(idx->dtype)),
         "Cast the indices to int64");
  }
  const int64_t r = int64_t(data->shape.size()), q = int64_t(idx->shape.size());
  if (r == 0 || q == 0) {
    fail(n, "data and indices need at least 1 dim each",
         "indices is [..., m]: each m-tuple along its last axis indexes data");
  }
  const Dim& last = idx->shape.back();
  if (!last.is_static()) {
    fail(n, "the last dim of indices is " + last.str() + ", not a fixed size",
         "the tuple length m = indices.shape[-1] decides the output's rank");
  }
  const int64_t m = last.value();
  if (m + b > r || (n.op == OpKind::GatherND && m < 1)) {
    fail(n,
         "indices' tuples of " + std::to_string(m) + " index(es) do not fit data of rank " +
             std::to_string(r) + (b ? " after " + std::to_string(b) + " batch dim(s)" : ""),
         n.op == OpKind::GatherND ? "indices.shape[-1] lies in [1, rank(data) - batch_dims]"
                                  : "indices.shape[-1] is at most rank(data)");
  }
  return m;
}

void check_reduction(Node& n) {
  const std::string red = n.attr_str("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min") {
    fail(n, "reduction must be none, add, mul, max or min, got \"" + red + "\"");
  }
  if (red != "none" && n.inputs[0]->dtype == DType::boolean) {
    fail(n, "reduction " + red + " on bool data", "Cast the data to a numeric dtype");
  }
  if (red != "none" && is_int8(n.inputs[0]->dtype)) {
    fail(n,
         "reduction " + red + " on " + std::string(dtype_name(n.inputs[0]->dtype)) +
             " data (8-bit integers are moved, not computed on)",
         "Cast the data to i32 or f32");
  }
}

}  // namespace

// GatherND: indices.shape[:-1] + data.shape[b + m:].
void infer_gather_nd(Node& n) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  const int64_t b = n.attr_int("batch_dims", 0);
  const int64_t r = int64_t(data->shape.size()), q = int64_t(idx->shape.size());
  if (b < 0 || b >= std::min(r, q)) {
    fail(n,
         "batch_dims " + std::to_string(b) + " is outside [0, " +
             std::to_string(std::max<int64_t>(0, std::min(r, q) - 1)) + "]",
         "batch_dims counts leading dims data and indices share, fewer than either's rank");
  }
  const int64_t m = index_tuple_length(n, b);
  for (int64_t d = 0; d < b; d++) {
    if (differ(data->shape[size_t(d)], idx->shape[size_t(d)])) {
      fail(n,
           "batch dim " + std::to_string(d) + " differs: " + data->shape[size_t(d)].str() +
               " in data, " + idx->shape[size_t(d)].str() + " in indices",
           "the first batch_dims dims of data and indices must be equal");
    }
  }
  Shape s(idx->shape.begin(), idx->shape.end() - 1);
  s.insert(s.end(), data->shape.begin() + b + m, data->shape.end());
  n.out()->dtype = data->dtype;
  n.out()->shape = s;
}

// ScatterND: data's type; updates must be indices.shape[:-1] + data.shape[m:].
void infer_scatter_nd(Node& n) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  const Value* upd = n.inputs[2];
  const int64_t m = index_tuple_length(n, 0);
  require_same_dtype(n, data, upd);
  check_reduction(n);
  Shape want(idx->shape.begin(), idx->shape.end() - 1);
  want.insert(want.end(), data->shape.begin() + m, data->shape.end());
  bool ok = want.size() == upd->shape.size();
  for (size_t d = 0; ok && d < want.size(); d++) ok = !differ(want[d], upd->shape[d]);
  if (!ok) {
    fail(n, "updates must have the shape " + shape_str(want) + ", got " + shape_str(upd->shape),
         "updates is indices.shape[:-1] + data.shape[indices.shape[-1]:]");
  }
  n.out()->dtype = data->dtype;
  n.out()->shape = data->shape;
}

// ScatterElements: data's type; indices and updates share one shape of data's rank, no larger
// than data's off the axis.
void infer_scatter_elements(Node& n) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  const Value* upd = n.inputs[2];
  const int64_t r = int64_t(data->shape.size());
  if (r > 0 && (int64_t(idx->shape.size()) != r || int64_t(upd->shape.size()) != r)) {
    fail(n, "indices and updates must have the rank of data (" + std::to_string(r) + ")",
         "ScatterElements places each update at its own position");
  }
  const int64_t ax = gather_axis(n);
  require_same_dtype(n, data, upd);
  check_reduction(n);
  for (int64_t d = 0; d < r; d++) {
    const Dim &a = idx->shape[size_t(d)], &u = upd->shape[size_t(d)], &b = data->shape[size_t(d)];
    if (differ(a, u)) {
      fail(n,
           "indices " + shape_str(idx->shape) + " and updates " + shape_str(upd->shape) +
               " differ in dim " + std::to_string(d),
           "each update has its own index: the two have one shape");
    }
    if (d != ax && a.is_static() && b.is_static() && a.value() > b.value()) {
      fail(n,
           "indices dim " + std::to_string(d) + " (" + a.str() + ") exceeds data's (" + b.str() +
               ")",
           "off the axis, indices address data's own positions");
    }
  }
  n.out()->dtype = data->dtype;
  n.out()->shape = data->shape;
}

// ArgMax/ArgMin: i64 indices along axis, which keepdims keeps as 1.
void infer_arg(Node& n) {
  const Value* x = n.inputs[0];
  if (x->dtype == DType::boolean) fail(n, "needs a numeric input, got bool");
  int64_t r = int64_t(x->shape.size());
  if (r == 0) fail(n, "needs at least 1 dim");
  int64_t ax = norm_axis(n, n.attr_int("axis", 0), r);
  n.attrs["axis"] = ax;
  Shape s = x->shape;
  if (s[size_t(ax)] == Dim(int64_t(0))) fail(n, "the axis is empty: no index to return");
  if (n.attr_int("keepdims", 1)) {
    s[size_t(ax)] = Dim(int64_t(1));
  } else {
    s.erase(s.begin() + ax);
  }
  n.out()->dtype = DType::i64;
  n.out()->shape = s;
}

// CumSum: running sums along axis, of x's shape and dtype (bool has no sum).
void infer_cumsum(Node& n) {
  const Value* x = n.inputs[0];
  if (x->dtype == DType::boolean) {
    fail(n, "needs a numeric input, got bool", "Cast the input to an integer or float dtype");
  }
  const int64_t r = int64_t(x->shape.size());
  if (r == 0) fail(n, "needs at least 1 dim", "Reshape a scalar to [1] first");
  if (n.inputs.size() == 2) {
    // (x, axis): the axis a value operand, checked here when known, else by each plan.
    if (n.has_attr("axis")) fail(n, "takes axis as an attribute or as input 1, not both");
    if (operand_length(n, 1, "axis") != 1) {
      fail(n, "axis must hold one value, got the shape " + shape_str(n.inputs[1]->shape));
    }
    if (auto a = operand_dims(n, 1); a && a->at(0).is_static()) {
      const int64_t v = a->at(0).value();
      if (v < -r || v >= r) {
        fail(n,
             "axis " + std::to_string(v) + " is out of range for the input shape " +
                 shape_str(x->shape),
             "an axis lies in [-rank, rank); a negative one counts from the end");
      }
    }
  } else {
    n.attrs["axis"] = norm_axis(n, n.attr_int("axis", 0), r);
  }
  for (const char* a : {"exclusive", "reverse"}) {
    const int64_t v = n.attr_int(a, 0);
    if (v != 0 && v != 1) {
      fail(n, std::string("attribute '") + a + "' must be 0 or 1, got " + std::to_string(v));
    }
  }
  infer_same(n);
}

// TopK(x, k) -> (values, indices): x's shape with the axis' length k, which the value operand k
// gives (a run-time dim while it is not known).
void infer_topk(Node& n) {
  const Value* x = n.inputs[0];
  if (n.outputs.size() != 2) {
    fail(n, "has 2 outputs (values and indices), got " + std::to_string(n.outputs.size()),
         "build it with GraphBuilder::top_k");
  }
  if (x->dtype == DType::boolean) {
    fail(n, "needs a numeric input, got bool", "Cast the input to an integer or float dtype");
  }
  const int64_t r = int64_t(x->shape.size());
  if (r == 0) fail(n, "needs at least 1 dim", "Reshape a scalar to [1] first");
  const int64_t ax = norm_axis(n, n.attr_int("axis", -1), r);
  n.attrs["axis"] = ax;
  for (const char* a : {"largest", "sorted"}) {
    const int64_t v = n.attr_int(a, 1);
    if (v != 0 && v != 1) {
      fail(n, std::string("attribute '") + a + "' must be 0 or 1, got " + std::to_string(v));
    }
  }
  if (n.inputs[1]->dtype != DType::i64) {
    fail(n, "k must be i64, got " + std::string(dtype_name(n.inputs[1]->dtype)),
         "ONNX's K is a 1-element int64 tensor");
  }
  if (operand_length(n, 1, "k") != 1) {
    fail(n, "k must hold one value, got the shape " + shape_str(n.inputs[1]->shape),
         "ONNX's K is a 1-element int64 tensor");
  }
  const Dim& len = x->shape[size_t(ax)];
  Dim k = runtime_dim(n, 0, int(ax));
  if (auto kd = operand_dims(n, 1)) {
    k = kd->at(0);
    if (k.is_static() && k.value() < 0) {
      fail(n, "k is " + k.str() + ", below 0", "k counts the elements to keep: 0 or more");
    }
    if (k.is_static() && len.is_static() && k.value() > len.value()) {
      fail(n,
           "k (" + k.str() + ") exceeds the length " + len.str() + " of axis " + std::to_string(ax),
           "k is at most the size of the axis it selects along");
    }
  }
  Shape s = x->shape;
  s[size_t(ax)] = k;  // one dim for both outputs, so values and indices stay combinable
  n.outputs[0]->dtype = x->dtype;
  n.outputs[0]->shape = s;
  n.outputs[1]->dtype = DType::i64;
  n.outputs[1]->shape = s;
}

}  // namespace ubfuse::shape_infer
