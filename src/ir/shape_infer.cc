// Shape and dtype inference, one case per op, with the user-facing checks. Symbolic dims follow
// numpy broadcasting (a symbol against 1 keeps the symbol; a symbol against a fixed size N > 1
// takes N and is checked at run time; two dims broadcast only when equal as polynomials), and
// stay exact polynomials through reshapes ("batch*seq"), concatenation ("past+seq") and slices
// ("seq-1").
#include <algorithm>
#include <numeric>

#include "ir/shape_util.h"
#include "ubfuse/error.h"
#include "ubfuse/graph.h"

namespace ubfuse {

namespace {

std::string in_shapes(const Node& n) {
  std::string s;
  for (size_t i = 0; i < n.inputs.size(); i++) {
    s += (i ? ", " : "") + shape_str(n.inputs[i]->shape) + " " +
         std::string(dtype_name(n.inputs[i]->dtype));
  }
  return s;
}

[[noreturn]] void fail(const Node& n, const std::string& what, const std::string& hint = "") {
  throw Error(n.describe() + ": " + what + " (inputs: " + in_shapes(n) + ")" +
              (hint.empty() ? "" : "; hint: " + hint));
}

void require_float(const Node& n, const Value* v) {
  if (!is_float(v->dtype)) {
    fail(n, "needs a floating-point input, got " + std::string(dtype_name(v->dtype)),
         "insert a Cast to f32, bf16 or f16");
  }
}

void require_same_dtype(const Node& n, const Value* a, const Value* b) {
  if (a->dtype != b->dtype) {
    fail(n,
         "dtype mismatch: " + std::string(dtype_name(a->dtype)) + " vs " +
             std::string(dtype_name(b->dtype)),
         "insert a Cast so both operands have the same dtype");
  }
}

int64_t norm_axis(const Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    fail(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

void infer_row_op(Node& n) {
  const Value* x = n.inputs[0];
  require_float(n, x);
  if (x->shape.empty()) fail(n, "needs at least 1 dim");
  if (n.has_attr("axis")) {
    int64_t rank = int64_t(x->shape.size());
    if (norm_axis(n, n.attr_int("axis", -1), rank) != rank - 1) {
      fail(n, "reduces only over the last axis, got axis " + std::to_string(n.attr_int("axis", -1)),
           "transpose the reduced axis to the end");
    }
  }
  const Dim& c = x->shape.back();
  for (size_t i = 1; i < n.inputs.size(); i++) {
    const Value* p = n.inputs[i];
    require_same_dtype(n, x, p);
    bool ok = p->shape.size() == 1 && (p->shape[0] == c);
    if (!ok) {
      fail(n,
           std::string(i == 1 ? "weight" : "bias") + " must have shape [" + c.str() + "], got " +
               shape_str(p->shape),
           "weight and bias cover the last (normalized) axis");
    }
  }
  if (n.op == OpKind::LayerNorm || n.op == OpKind::RMSNorm) {
    double eps = n.attr_float("eps", 1e-5);
    if (!(eps >= 0)) fail(n, "eps must be >= 0, got " + std::to_string(eps));
  }
  n.out()->dtype = x->dtype;
  n.out()->shape = x->shape;
}

void infer_reduce(Node& n) {
  const Value* x = n.inputs[0];
  infer_row_op(n);
  int64_t keep = n.attr_int("keepdims", 1);
  if (keep != 0 && keep != 1) fail(n, "keepdims must be 0 or 1, got " + std::to_string(keep));
  Shape s = x->shape;
  if (keep) {
    s.back() = Dim(1);
  } else {
    s.pop_back();
  }
  n.out()->shape = s;
}

void infer_matmul(Node& n) {
  const Value* a = n.inputs[0];
  const Value* b = n.inputs[1];
  require_same_dtype(n, a, b);
  require_float(n, a);
  if (a->shape.empty() || b->shape.empty()) fail(n, "operands must have at least 1 dim");
  Shape sa = a->shape, sb = b->shape;
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.emplace(sa.begin(), int64_t{1});
  if (b1) sb.emplace_back(int64_t{1});
  const Dim& k1 = sa.back();
  const Dim& k2 = sb[sb.size() - 2];
  if (k1 != k2) {
    fail(n, "inner dims differ: " + k1.str() + " vs " + k2.str(),
         "MatMul multiplies [..., M, K] by [..., K, N]");
  }
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  std::string why;
  auto batch = broadcast_shapes(ba, bb, &why);
  if (!batch) fail(n, "batch dims do not broadcast: " + why);
  Shape out = *batch;
  if (!a1) out.push_back(sa[sa.size() - 2]);
  if (!b1) out.push_back(sb.back());
  n.out()->dtype = a->dtype;
  n.out()->shape = out;
}

void infer_reshape(Node& n) {
  const Value* x = n.inputs[0];
  auto target = n.attr_ints("shape");
  std::string why;
  auto out = reshape_target(x->shape, target, &why);
  if (!out) fail(n, "cannot reshape to " + sizes_str(target) + ": " + why);
  n.out()->dtype = x->dtype;
  n.out()->shape = *out;
}

void infer_transpose(Node& n) {
  const Value* x = n.inputs[0];
  int64_t r = int64_t(x->shape.size());
  std::vector<int64_t> perm;
  if (n.has_attr("perm")) {
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
  n.out()->dtype = x->dtype;
  n.out()->shape = s;
}

// RotateHalf swaps the halves of the last axis, so that axis must be known and even.
void infer_rotate_half(Node& n) {
  const Value* x = n.inputs[0];
  require_float(n, x);
  if (x->shape.empty()) fail(n, "needs at least 1 dim", "rotate the halves of a vector or more");
  const Dim& d = x->shape.back();
  if (!d.is_static() || d.value() % 2 != 0 || d.value() == 0) {
    fail(n, "needs a fixed, even, nonzero last dim to split in halves, got " + d.str(),
         "RoPE rotates the head dim, which is a fixed even size");
  }
  n.out()->shape = x->shape;
  n.out()->dtype = x->dtype;
}

void infer_slice(Node& n) {
  const Value* x = n.inputs[0];
  int64_t r = int64_t(x->shape.size());
  auto starts = n.attr_ints("starts");
  auto ends = n.attr_ints("ends");
  std::vector<int64_t> axes, steps;
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
    if (!len) {
      fail(n,
           "slicing symbolic dim '" + d.str() + "' from " + std::to_string(starts[i]) + " to " +
               std::to_string(ends[i]) + " by " + std::to_string(steps[i]) +
               ": the length is no dim expression (a constant caps it, as in x[:4] or x[-1:], "
               "or the step leaves a remainder)",
           "slices of a symbolic dim run from a fixed start to its end or to a negative end "
           "(x[1:], x[:-1], x[::-1]); otherwise give the model a static size for this dim "
           "(ge.dynamic_dims) or slice a static dim");
    }
    s[size_t(ax)] = *len;
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
  auto target = n.attr_ints("shape");
  Shape t;
  for (auto v : target) {
    if (v < -1) fail(n, "expand shape " + sizes_str(target) + " has a negative dim");
    t.emplace_back(int64_t{v == -1 ? 1 : v});
  }
  std::string why;
  auto out = broadcast_shapes(x->shape, t, &why);
  if (!out) fail(n, "cannot expand to " + sizes_str(target) + ": " + why);
  n.out()->dtype = x->dtype;
  n.out()->shape = *out;
}

void infer_gather(Node& n) {
  const Value* data = n.inputs[0];
  const Value* idx = n.inputs[1];
  if (idx->dtype != DType::i64 && idx->dtype != DType::i32) {
    fail(n, "indices must be i64 or i32, got " + std::string(dtype_name(idx->dtype)));
  }
  int64_t r = int64_t(data->shape.size());
  if (r == 0) fail(n, "data must have at least 1 dim");
  int64_t ax = norm_axis(n, n.attr_int("axis", 0), r);
  n.attrs["axis"] = ax;
  Shape s(data->shape.begin(), data->shape.begin() + ax);
  s.insert(s.end(), idx->shape.begin(), idx->shape.end());
  s.insert(s.end(), data->shape.begin() + ax + 1, data->shape.end());
  n.out()->dtype = data->dtype;
  n.out()->shape = s;
}

void infer_broadcast(Node& n) {
  std::string why;
  Shape s = n.inputs[0]->shape;
  for (size_t i = 1; i < n.inputs.size(); i++) {
    auto b = broadcast_shapes(s, n.inputs[i]->shape, &why);
    if (!b) {
      fail(n, "cannot broadcast shapes: " + why,
           "operands must be equal or 1 in each dim, aligned from the right");
    }
    s = *b;
  }
  n.out()->shape = s;
}

// The output of a one-input elementwise op: its input's shape and dtype.
void infer_same(Node& n) {
  n.out()->shape = n.inputs[0]->shape;
  n.out()->dtype = n.inputs[0]->dtype;
}

// An elementwise math op (an UBF_MATH row of ops.def), by its operand types.
void infer_math(Node& n) {
  switch (op_info(n.op).math) {
    case MathTypes::Float:
      infer_same(n);
      require_float(n, n.inputs[0]);
      return;
    case MathTypes::Number:
      if (n.inputs.size() == 1) {
        infer_same(n);  // integers too; the eager kernel says which it computes
        return;
      }
      require_same_dtype(n, n.inputs[0], n.inputs[1]);
      if (n.inputs[0]->dtype == DType::boolean) {
        fail(n, "arithmetic on bool is not supported", "Cast to a numeric dtype first");
      }
      n.out()->dtype = n.inputs[0]->dtype;
      infer_broadcast(n);
      return;
    case MathTypes::Bool:
      infer_same(n);
      if (n.inputs[0]->dtype != DType::boolean) fail(n, "needs a bool input");
      return;
    case MathTypes::Compare:
      require_same_dtype(n, n.inputs[0], n.inputs[1]);
      n.out()->dtype = DType::boolean;
      infer_broadcast(n);
      return;
    case MathTypes::Select:
      if (n.inputs[0]->dtype != DType::boolean) fail(n, "condition must be bool");
      require_same_dtype(n, n.inputs[1], n.inputs[2]);
      n.out()->dtype = n.inputs[1]->dtype;
      infer_broadcast(n);
      return;
    case MathTypes::None:
      break;
  }
  UBF_CHECK(false, "infer_math: " + std::string(op_name(n.op)) + " is not a math op");
}

}  // namespace

void infer_node(Node& n) {
  const OpInfo& info = op_info(n.op);
  int nin = int(n.inputs.size());
  if (nin < info.min_inputs || (info.max_inputs >= 0 && nin > info.max_inputs)) {
    std::string want =
        info.max_inputs < 0 ? "at least " + std::to_string(info.min_inputs)
        : info.min_inputs == info.max_inputs
            ? std::to_string(info.min_inputs)
            : std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
    throw Error(n.describe() + ": takes " + want + " input(s), got " + std::to_string(nin));
  }
  for (int i = 0; i < nin; i++) {
    if (!n.inputs[i]) throw Error(n.describe() + ": input " + std::to_string(i) + " is null");
  }
  switch (n.op) {
#define UBF_OP(...)
#define UBF_MATH(name, ...) case OpKind::name:
#include "ubfuse/ops.def"
    infer_math(n);
    return;
    case OpKind::Gelu: {
      infer_same(n);
      require_float(n, n.inputs[0]);
      auto a = n.attr_str("approximate", "none");
      if (a != "none" && a != "tanh") {
        fail(n, "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + a + "\"");
      }
      return;
    }
    case OpKind::Pow:
      infer_same(n);
      require_float(n, n.inputs[0]);
      if (!n.has_attr("exponent")) fail(n, "missing attribute 'exponent'");
      n.attr_float("exponent", 1);
      return;
    case OpKind::Cast:
      infer_same(n);
      if (!n.has_attr("to")) fail(n, "missing attribute 'to'");
      n.out()->dtype = parse_dtype(n.attr_str("to", "f32"));
      return;
    case OpKind::LayerNorm:
    case OpKind::RMSNorm:
    case OpKind::Softmax:
      infer_row_op(n);
      return;
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
      infer_reduce(n);
      return;
    case OpKind::RotateHalf:
      infer_rotate_half(n);
      return;
    case OpKind::MatMul:
      infer_matmul(n);
      return;
    case OpKind::Gather:
      infer_gather(n);
      return;
    case OpKind::Reshape:
      infer_reshape(n);
      return;
    case OpKind::Transpose:
      infer_transpose(n);
      return;
    case OpKind::Slice:
      infer_slice(n);
      return;
    case OpKind::Concat:
      infer_concat(n);
      return;
    case OpKind::Expand:
      infer_expand(n);
      return;
    case OpKind::Constant:
      if (!n.payload.defined()) fail(n, "has no value");
      n.out()->dtype = n.payload.dtype();
      n.out()->shape = to_shape(n.payload.sizes());
      return;
    case OpKind::Host:
      if (!n.host) fail(n, "has no callback");
      n.out()->dtype = n.inputs[0]->dtype;
      n.out()->shape = n.inputs[0]->shape;
      return;
  }
  UBF_CHECK(false, "infer_node: unhandled op " + std::string(op_name(n.op)));
}

}  // namespace ubfuse
