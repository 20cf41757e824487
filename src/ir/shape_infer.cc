// Shape and dtype inference, one case per op, with the user-facing checks. Symbolic dims follow
// numpy broadcasting (a symbol against 1 keeps the symbol; a symbol against a fixed size N > 1
// takes N and is checked at run time; two dims broadcast only when equal as polynomials), and
// stay exact polynomials through reshapes ("batch*seq"), concatenation ("past+seq") and slices
// ("seq-1").
#include <algorithm>
#include <cmath>

#include "ir/shape_infer_internal.h"
#include "ir/shape_util.h"
#include "ir/values.h"
#include "ubfuse/error.h"
#include "ubfuse/graph.h"

namespace ubfuse {

namespace shape_infer {

std::string in_shapes(const Node& n) {
  std::string s;
  for (size_t i = 0; i < n.inputs.size(); i++) {
    s += (i ? ", " : "") + shape_str(n.inputs[i]->shape) + " " +
         std::string(dtype_name(n.inputs[i]->dtype));
  }
  return s;
}

[[noreturn]] void fail(const Node& n, const std::string& what, const std::string& hint) {
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
    fail(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank),
         "an axis lies in [-rank, rank); a negative one counts from the end");
  }
  return axis < 0 ? axis + rank : axis;
}

// A value operand that must be a vector of known length: its length, or a failure naming it.
int64_t operand_length(Node& n, int i, const char* what) {
  const Value* v = n.inputs[size_t(i)];
  if (v->dtype != DType::i64 && v->dtype != DType::i32) {
    fail(n, std::string(what) + " must be i64 or i32, got " + std::string(dtype_name(v->dtype)));
  }
  if (v->shape.size() > 1) fail(n, std::string(what) + " must be a vector");
  if (v->shape.empty()) return 1;
  if (!v->shape[0].is_static()) {
    fail(n, std::string(what) + " has a symbolic length " + v->shape[0].str(),
         "the rank of a result must be known when the model is compiled");
  }
  return v->shape[0].value();
}

// The output of a one-input elementwise op: its input's shape and dtype.
void infer_same(Node& n) {
  n.out()->shape = n.inputs[0]->shape;
  n.out()->dtype = n.inputs[0]->dtype;
}

}  // namespace shape_infer

namespace {

using namespace shape_infer;

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
  n.out()->dtype = a->dtype;
  n.out()->shape = matmul_shape(n, a, b);
}

}  // namespace

Shape shape_infer::matmul_shape(const Node& n, const Value* a, const Value* b) {
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
  return out;
}

namespace {

// The output types of If branch b when its inputs take the If's input types (and contents,
// where known): as the branch declares them, or re-inferred on a copy when the If's inputs are
// more precise (concrete sizes while a plan is built, known shape values).
std::vector<std::pair<DType, Shape>> branch_outputs(const Node& n, size_t b) {
  const char* side = b == 0 ? "then" : "else";
  const Graph& g = *n.branches[b];
  std::vector<int64_t> map = n.attr_ints(b == 0 ? "then_inputs" : "else_inputs");
  if (map.size() != g.inputs().size()) {
    fail(n, std::string("the ") + side + " branch has " + std::to_string(g.inputs().size()) +
                " inputs but " + side + "_inputs names " + std::to_string(map.size()));
  }
  bool as_declared = true;
  for (size_t j = 0; j < map.size(); j++) {
    if (map[j] < 1 || map[j] >= int64_t(n.inputs.size())) {
      fail(n, std::string(side) + "_inputs[" + std::to_string(j) + "] = " + std::to_string(map[j]) +
                  " is not an input of the If");
    }
    const Value* v = n.inputs[size_t(map[j])];
    const Value* w = g.inputs()[j];
    if (v->dtype != w->dtype || v->shape.size() != w->shape.size()) {
      fail(n, std::string("input ") + std::to_string(map[j]) + " is " + shape_str(v->shape) + " " +
                  std::string(dtype_name(v->dtype)) + " but the " + side + " branch's input '" +
                  w->name + "' is " + shape_str(w->shape) + " " +
                  std::string(dtype_name(w->dtype)));
    }
    as_declared =
        as_declared && v->shape == w->shape && !v->known && !operand_value(n, int(map[j]));
  }
  std::vector<std::pair<DType, Shape>> out;
  if (as_declared) {
    for (auto& [name, v] : g.outputs()) out.emplace_back(v->dtype, v->shape);
    return out;
  }
  Graph c = g.clone();
  for (size_t j = 0; j < map.size(); j++) {
    Value* w = c.inputs()[j];
    w->shape = n.inputs[size_t(map[j])]->shape;
    if (const Tensor* t = operand_value(n, int(map[j]))) {
      set_known_from_constant(*w, *t);
    } else {
      w->known = n.inputs[size_t(map[j])]->known;
    }
  }
  try {
    for (Node* m : c.topo_order()) infer_node(*m);
  } catch (const Error& e) {
    fail(n, std::string("in its ") + side + " branch: " + e.what());
  }
  for (auto& [name, v] : c.outputs()) out.emplace_back(v->dtype, v->shape);
  return out;
}

bool has_runtime_symbol(const Dim& d) {
  for (const std::string& s : d.symbols()) {
    if (is_runtime_symbol(s)) return true;
  }
  return false;
}

// If(cond, captured...): the taken branch's outputs when the condition is known (while a plan is
// built), else what both branches agree on, with run-time dims where they differ.
void infer_if(Node& n) {
  if (n.branches.size() != 2 || !n.branches[0] || !n.branches[1]) {
    fail(n, "needs a then and an else branch");
  }
  const Value* c = n.inputs[0];
  for (const Dim& d : c->shape) {
    if (d != Dim(int64_t(1))) fail(n, "the condition must have one element");
  }
  if (n.branches[0]->outputs().size() != n.outputs.size() ||
      n.branches[1]->outputs().size() != n.outputs.size()) {
    fail(n, "has " + std::to_string(n.outputs.size()) + " outputs but its branches " +
                std::to_string(n.branches[0]->outputs().size()) + " and " +
                std::to_string(n.branches[1]->outputs().size()));
  }
  if (const Tensor* t = operand_value(n, 0)) {
    auto outs = branch_outputs(n, t->get(0) != 0 ? 0 : 1);
    for (size_t k = 0; k < outs.size(); k++) {
      n.outputs[k]->dtype = outs[k].first;
      n.outputs[k]->shape = outs[k].second;
    }
    return;
  }
  auto th = branch_outputs(n, 0), el = branch_outputs(n, 1);
  for (size_t k = 0; k < th.size(); k++) {
    const std::string out =
        "output " + std::to_string(k) + " ('" + n.branches[0]->outputs()[k].first + "')";
    if (th[k].first != el[k].first) {
      fail(n, out + " is " + std::string(dtype_name(th[k].first)) + " in the then branch but " +
                  std::string(dtype_name(el[k].first)) + " in the else branch");
    }
    if (th[k].second.size() != el[k].second.size()) {
      fail(n,
           out + " is " + shape_str(th[k].second) + " in the then branch but " +
               shape_str(el[k].second) + " in the else branch",
           "ubfuse needs both branches to give each output one rank");
    }
    Shape s = th[k].second;
    for (size_t d = 0; d < s.size(); d++) {
      if (s[d] != el[k].second[d] || has_runtime_symbol(s[d]))
        s[d] = runtime_dim(n, int(k), int(d));
    }
    n.outputs[k]->dtype = th[k].first;
    n.outputs[k]->shape = s;
  }
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
    case MathTypes::Test:
      infer_same(n);
      require_float(n, n.inputs[0]);
      n.out()->dtype = DType::boolean;
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

// The known dims of output 0 when n is integer arithmetic on known vectors (ir/values.h): the
// shape arithmetic exporters write (Shape -> Gather -> Add -> Concat) stays exact, so a Reshape
// or Range reading the result gets polynomial dims, not run-time ones.
std::optional<std::vector<Dim>> known_result(const Node& n) {
  const Value* out = n.out();
  // An integer cast to f32 keeps its values (sizes below 2^24 are exact): arange over a length
  // read from a shape and cast to float (rotary positions) then has that length, not a run-time
  // dim of its own.
  if (n.op == OpKind::Cast && out->dtype == DType::f32 && !is_float(n.inputs[0]->dtype) &&
      out->shape.size() <= 1) {
    auto d = operand_dims(n, 0);
    if (!d) return std::nullopt;
    for (const Dim& x : *d) {
      if (x.is_static() && std::abs(x.value()) > (int64_t(1) << 24)) return std::nullopt;
    }
    return d;
  }
  if ((out->dtype != DType::i64 && out->dtype != DType::i32) || out->shape.size() > 1) {
    return std::nullopt;
  }
  auto in = [&](int i) { return operand_dims(n, i); };
  const OpKind op = n.op;
  if (op == OpKind::Add || op == OpKind::Sub || op == OpKind::Mul || op == OpKind::Div ||
      op == OpKind::Max || op == OpKind::Min) {
    auto a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    size_t len = std::max(a->size(), b->size());
    if ((a->size() != len && a->size() != 1) || (b->size() != len && b->size() != 1)) {
      return std::nullopt;
    }
    std::vector<Dim> r;
    for (size_t i = 0; i < len; i++) {
      const Dim& x = (*a)[a->size() == 1 ? 0 : i];
      const Dim& y = (*b)[b->size() == 1 ? 0 : i];
      if (n.op == OpKind::Add) {
        r.push_back(Dim::add(x, y));
      } else if (n.op == OpKind::Sub) {
        r.push_back(Dim::sub(x, y));
      } else if (n.op == OpKind::Mul) {
        r.push_back(Dim::mul(x, y));
      } else if (x.is_static() && y.is_static()) {
        int64_t p = x.value(), q = y.value();
        if (n.op == OpKind::Div) {
          if (q == 0) return std::nullopt;
          r.push_back(Dim(p / q));  // ONNX integer Div truncates
        } else {
          r.push_back(Dim(n.op == OpKind::Max ? std::max(p, q) : std::min(p, q)));
        }
      } else if (n.op == OpKind::Div && y.is_static() && y.value() > 0) {
        // A symbolic dividend is a size, so truncation is floor.
        auto q = Dim::floordiv(x, y.value());
        if (!q) return std::nullopt;
        r.push_back(*q);
      } else {
        return std::nullopt;
      }
    }
    return r;
  }
  if (op == OpKind::Concat) {
    std::vector<Dim> r;
    for (int i = 0; i < int(n.inputs.size()); i++) {
      auto a = in(i);
      if (!a) return std::nullopt;
      r.insert(r.end(), a->begin(), a->end());
    }
    return r;
  }
  if (op == OpKind::Cast || op == OpKind::Reshape ||
      (op == OpKind::Expand && n.inputs[0]->shape == out->shape)) {
    return in(0);  // the same elements (integer to integer; to f32 above)
  }
  if (op == OpKind::Gather) {
    auto data = in(0);
    auto idx = operand_ints(n, 1);
    if (!data || !idx || n.inputs[0]->shape.size() != 1) return std::nullopt;
    std::vector<Dim> r;
    for (int64_t i : *idx) {
      int64_t k = i < 0 ? i + int64_t(data->size()) : i;
      if (k < 0 || k >= int64_t(data->size())) return std::nullopt;
      r.push_back((*data)[size_t(k)]);
    }
    return r;
  }
  if (op == OpKind::Slice) {
    auto data = in(0);
    if (!data || n.inputs.size() != 1 || !out->shape[0].is_static()) return std::nullopt;
    auto st = n.attr_ints("starts"), en = n.attr_ints("ends"), sp = n.attr_ints("steps");
    if (st.size() != 1 || sp.size() != 1) return std::nullopt;
    const int64_t len = int64_t(data->size());
    std::vector<Dim> r;
    for (int64_t i = slice_start(len, st[0], sp[0]), k = 0; k < out->shape[0].value();
         k++, i += sp[0]) {
      r.push_back((*data)[size_t(i)]);
    }
    return r;
  }
  return std::nullopt;
}

void infer_node_op(Node& n);

}  // namespace

void infer_node(Node& n) {
  infer_node_op(n);
  // Set by infer_shape_op and infer_axes_shape.
  if (n.op == OpKind::Shape || n.op == OpKind::AxesShape) return;
  for (Value* o : n.outputs) o->known.reset();
  if (n.op == OpKind::Constant) {
    set_known_from_constant(*n.out(), n.payload);
  } else if (n.outputs.size() == 1) {
    n.out()->known = known_result(n);
  }
}

namespace {

void infer_node_op(Node& n) {
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
  for (int i = 0; i < nin; i++) {
    if (is_int8(n.inputs[i]->dtype) && !takes_int8(n, i)) {
      fail(n,
           "input " + std::to_string(i) + " is " + std::string(dtype_name(n.inputs[i]->dtype)) +
               "; 8-bit integers are taken by data movement, Cast, Where, integer elementwise "
               "arithmetic (Add, Sub, Mul, Div, Mod, Max, Min, Neg, Abs, Relu, Sign), "
               "comparisons and the quantization ops only",
           "DequantizeLinear (or Cast to i32 or f32) first");
    }
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
    case OpKind::ReduceProd:
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
    case OpKind::GatherElements:
      infer_gather_elements(n);
      return;
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      infer_arg(n);
      return;
    case OpKind::CumSum:
      infer_cumsum(n);
      return;
    case OpKind::TopK:
      infer_topk(n);
      return;
    case OpKind::GatherND:
      infer_gather_nd(n);
      return;
    case OpKind::ScatterND:
      infer_scatter_nd(n);
      return;
    case OpKind::ScatterElements:
      infer_scatter_elements(n);
      return;
    case OpKind::Conv:
      infer_conv(n);
      return;
    case OpKind::RNN:
    case OpKind::GRU:
    case OpKind::LSTM:
      infer_recurrent(n);
      return;
    case OpKind::MaxPool:
    case OpKind::AveragePool:
      infer_pool(n);
      return;
    case OpKind::GroupNorm:
      infer_group_norm(n);
      return;
    case OpKind::QuantizeLinear:
      infer_quantize_linear(n);
      return;
    case OpKind::DequantizeLinear:
      infer_dequantize_linear(n);
      return;
    case OpKind::DynamicQuantizeLinear:
      infer_dynamic_quantize_linear(n);
      return;
    case OpKind::MatMulInteger:
      infer_matmul_integer(n);
      return;
    case OpKind::QLinearMatMul:
      infer_qlinear_matmul(n);
      return;
    case OpKind::DynamicQuantMatMul:
      infer_dynamic_quant_matmul(n);
      return;
    case OpKind::MatMulNBits:
      infer_matmul_nbits(n);
      return;
    case OpKind::DynamicQuantConv:
      infer_dynamic_quant_conv(n);
      return;
    case OpKind::ConvInteger:
      infer_conv_integer(n);
      return;
    case OpKind::Pad:
      infer_pad(n);
      return;
    case OpKind::Resize:
      infer_resize(n);
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
    case OpKind::Shape:
      infer_shape_op(n);
      return;
    case OpKind::Range:
      infer_range(n);
      return;
    case OpKind::ConstantOfShape:
      infer_constant_of_shape(n);
      return;
    case OpKind::AxesShape:
      infer_axes_shape(n);
      return;
    case OpKind::If:
      infer_if(n);
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

}  // namespace

}  // namespace ubfuse
