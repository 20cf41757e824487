// Algebraic identities and no-op data movement. An identity applies only when the result keeps
// x's shape (x * ones[3,4] with x of shape [4] broadcasts, so it is not a no-op). x + 0 may turn
// -0 into +0; like XLA's simplifier we accept that sign-of-zero difference, and nothing else:
// x * 0, x - x and x / x stay, since NaN and Inf make them differ from 0 and 1.
#include <numeric>

#include "ir/shape_util.h"
#include "passes/rewrite_util.h"
#include "passes/simplify_rules.h"
#include "ubfuse/error.h"

namespace ubfuse::passes {

namespace {

bool is_uniform(const Value* v, double want) {
  auto c = uniform_constant(v);
  return c && *c == want;  // 0 matches -0 too
}

// Makes every read of n's output read x instead (x has the same dtype and shape).
bool bypass(Graph& g, Node* n, Value* x) {
  if (x->dtype != n->out()->dtype || x->shape != n->out()->shape) return false;
  g.replace_uses(n->out(), x);
  return true;
}

// Reshape attribute that turns x's shape into `target` directly: static dims as numbers, a
// symbolic dim equal to x's at the same position as 0 (copy), at most one other as -1.
std::optional<std::vector<int64_t>> reshape_attr_for(const Shape& x, const Shape& target) {
  std::vector<int64_t> attr;
  bool inferred = false;
  for (size_t i = 0; i < target.size(); i++) {
    const Dim& d = target[i];
    if (d.is_static() && d.value() != 0) {
      attr.push_back(d.value());
    } else if (i < x.size() && x[i] == d) {
      attr.push_back(0);
    } else if (!d.is_static() && !inferred) {
      attr.push_back(-1);
      inferred = true;
    } else {
      return std::nullopt;
    }
  }
  auto got = reshape_target(x, attr, nullptr);
  if (!got || *got != target) return std::nullopt;
  return attr;
}

// Re-infers n after an in-place edit: true when its output type stayed the same.
bool keeps_type(Node* n) {
  DType dt = n->out()->dtype;
  Shape s = n->out()->shape;
  try {
    infer_node(*n);
  } catch (const Error&) {
    return false;
  }
  return n->out()->dtype == dt && n->out()->shape == s;
}

bool merge_reshapes(Node* n) {
  Node* inner = producer_if(n->inputs[0], OpKind::Reshape);
  if (!inner) return false;
  auto attr = reshape_attr_for(inner->inputs[0]->shape, n->out()->shape);
  if (!attr) return false;
  Value* old_in = n->inputs[0];
  AttrValue old_attr = n->attrs["shape"];
  n->inputs[0] = inner->inputs[0];
  n->attrs["shape"] = *attr;
  if (keeps_type(n)) return true;
  n->inputs[0] = old_in;
  n->attrs["shape"] = old_attr;
  infer_node(*n);
  return false;
}

bool merge_transposes(Node* n) {
  Node* inner = producer_if(n->inputs[0], OpKind::Transpose);
  if (!inner || inner->inputs.size() != 1) return false;  // a perm given at run time stays
  auto p1 = inner->attr_ints("perm"), p2 = n->attr_ints("perm");
  std::vector<int64_t> q;
  for (int64_t i : p2) q.push_back(p1.at(size_t(i)));  // out[i] = inner[p2[i]] = x[p1[p2[i]]]
  Value* old_in = n->inputs[0];
  n->inputs[0] = inner->inputs[0];
  n->attrs["perm"] = q;
  if (keeps_type(n)) return true;
  n->inputs[0] = old_in;
  n->attrs["perm"] = p2;
  infer_node(*n);
  return false;
}

// Reshape(y), y = rowop(Reshape(x), params) -> rowop(x, params) when the reshapes only regroup
// the rows: row ops (LayerNorm, RMSNorm, Softmax) treat each last-axis row alike.
bool sink_row_op_reshapes(Graph& g, Node* n) {
  Node* y = n->inputs[0]->producer;
  if (!y || (y->op != OpKind::LayerNorm && y->op != OpKind::RMSNorm && y->op != OpKind::Softmax)) {
    return false;
  }
  Node* z = producer_if(y->inputs[0], OpKind::Reshape);
  if (!z) return false;
  Value* x = z->inputs[0];
  if (x->shape != n->out()->shape || x->shape.empty() ||
      x->shape.back() != z->out()->shape.back()) {
    return false;
  }
  if (g.is_output(y->out()) || g.users(y->out()).size() != 1) return false;
  Value* old_in = y->inputs[0];
  y->inputs[0] = x;
  infer_node(*y);  // the same rows: x's shape, y's dtype
  if (bypass(g, n, y->out())) return true;
  y->inputs[0] = old_in;
  infer_node(*y);
  return false;
}

// Gather(Transpose(x, perm), i, axis a) with a scalar index i is Transpose(Gather(x, i, axis
// perm[a]), perm without a). Applied only when every reader of the Transpose is such a Gather, so
// no element moves twice: a fused QKV split ([B, L, 3, H, D] -> [3, B, H, L, D] -> q, k, v) then
// leaves each part behind its own head Transpose, which an attention group reads in place.
bool sink_scalar_gather(Graph& g, Node* n) {
  Node* tr = producer_if(n->inputs[0], OpKind::Transpose);
  if (!tr || tr->inputs.size() != 1 || g.is_output(tr->out())) return false;
  for (const Node* u : g.users(tr->out())) {
    if (u->op != OpKind::Gather || u->inputs[0] != tr->out() || !u->inputs[1]->shape.empty()) {
      return false;
    }
  }
  const auto perm = tr->attr_ints("perm");
  const int64_t a = n->attr_int("axis", 0);  // normalized by shape inference
  const int64_t from = perm.at(size_t(a));
  std::vector<int64_t> rest;
  for (size_t i = 0; i < perm.size(); i++) {
    if (int64_t(i) != a) rest.push_back(perm[i] - (perm[i] > from ? 1 : 0));
  }
  Node* part = g.add_node(OpKind::Gather, {tr->inputs[0], n->inputs[1]}, {{"axis", from}},
                          g.unique_name(n->name + ".part"));
  try {
    infer_node(*part);
  } catch (const Error&) {
    g.remove_node(part);
    return false;
  }
  if (replace_node(g, n, OpKind::Transpose, {part->out()}, {{"perm", rest}})) return true;
  g.remove_node(part);
  return false;
}

}  // namespace

bool simplify_identity(Graph& g, Node* n) {
  auto in = [&](size_t i) { return n->inputs[i]; };
  const OpKind k = n->op;
  if (k == OpKind::Add) {
    if (is_uniform(in(1), 0) && bypass(g, n, in(0))) return true;
    return is_uniform(in(0), 0) && bypass(g, n, in(1));
  }
  if (k == OpKind::Sub) return is_uniform(in(1), 0) && bypass(g, n, in(0));
  if (k == OpKind::Mul) {
    if (is_uniform(in(1), 1) && bypass(g, n, in(0))) return true;
    return is_uniform(in(0), 1) && bypass(g, n, in(1));
  }
  if (k == OpKind::Div) return is_uniform(in(1), 1) && bypass(g, n, in(0));
  if (k == OpKind::Pow) return n->attr_float("exponent", 0) == 1 && bypass(g, n, in(0));
  if (k == OpKind::Neg) {
    Node* inner = producer_if(in(0), OpKind::Neg);
    return inner && bypass(g, n, inner->inputs[0]);
  }
  if (k == OpKind::Cast) return bypass(g, n, in(0));  // only when `to` is x's dtype
  return false;
}

bool simplify_data_movement(Graph& g, Node* n) {
  if (n->op == OpKind::Reshape || n->op == OpKind::Expand) {
    if (bypass(g, n, n->inputs[0])) return true;
    return n->op == OpKind::Reshape && (merge_reshapes(n) || sink_row_op_reshapes(g, n));
  }
  if (n->op == OpKind::Transpose && n->inputs.size() == 1) {
    auto perm = n->attr_ints("perm");
    std::vector<int64_t> iota(perm.size());
    std::iota(iota.begin(), iota.end(), 0);
    return (perm == iota && bypass(g, n, n->inputs[0])) || merge_transposes(n);
  }
  if (n->op == OpKind::Gather && n->inputs[1]->shape.empty()) return sink_scalar_gather(g, n);
  return false;
}

}  // namespace ubfuse::passes
