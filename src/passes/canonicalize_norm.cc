// LayerNorm and RMSNorm from their decompositions over the last axis. Matching starts at the
// normalizing node (the "core") and grows outwards:
//
//   core      d / sqrt(a) | d * rsqrt(a) | d * reciprocal(sqrt(a)) | d * (1 / sqrt(a))
//             | d * pow(a, -0.5)                   (either operand order of the Mul)
//   a         v + eps | eps + v | v                (eps a non-negative constant; absent: 0)
//   LayerNorm d = x - m, m = ReduceMean(x), and v = ReduceMean(d^2) (PyTorch's export; d^2 as
//             Pow 2 or d*d, the two d's may be separate equal Subs) or
//             v = ReduceMean(x^2) - m^2 (the ONNX LayerNormalization function body)
//   RMSNorm   d = x and v = ReduceMean(x^2)
//   then      * w (a [C] weight, or [1,..,1,C]: reshaped), then for LayerNorm + b (a [C] bias)
//
// Every ReduceMean must keep dims (keepdims=1): ubfuse reductions are over the last axis, and
// keepdims=0 would broadcast the statistics along another axis. When x = Cast(x0) to a wider type
// and the normalized value is cast back to x0's dtype before the weight (LLaMA's RMSNorm under
// bf16), both casts are absorbed: the norm kernels compute in f32 whatever the storage dtype.
#include <cmath>
#include <optional>

#include "passes/canonicalize.h"

namespace ubfuse::passes {

namespace {

struct Match {
  OpKind op = OpKind::RMSNorm;
  Value* x = nullptr;
  double eps = 0;
  std::vector<Node*> nodes;  // every matched node, the core included
};

Node* keepdims_mean(const Value* v) {
  Node* r = producer_if(v, OpKind::ReduceMean);
  return r && r->attr_int("keepdims", 1) == 1 ? r : nullptr;
}

// q = y^2 written as Pow(y, 2) or y * y.
Node* square_of(const Value* q, const Value* y) {
  if (Node* p = producer_if(q, OpKind::Pow)) {
    return p->inputs[0] == y && p->attr_float("exponent", 0) == 2 ? p : nullptr;
  }
  Node* m = producer_if(q, OpKind::Mul);
  return m && m->inputs[0] == y && m->inputs[1] == y ? m : nullptr;
}

// r = 1 / sqrt(a): returns a and appends the nodes.
Value* inv_sqrt_arg(Value* r, std::vector<Node*>* nodes) {
  Node* p = r->producer;
  if (!p) return nullptr;
  Node* sq = nullptr;
  if (p->op == OpKind::Rsqrt) {
    nodes->push_back(p);
    return p->inputs[0];
  }
  if (p->op == OpKind::Pow && p->attr_float("exponent", 0) == -0.5) {
    nodes->push_back(p);
    return p->inputs[0];
  }
  if (p->op == OpKind::Reciprocal) sq = producer_if(p->inputs[0], OpKind::Sqrt);
  if (p->op == OpKind::Div) {
    auto one = uniform_constant(p->inputs[0]);
    if (one && *one == 1) sq = producer_if(p->inputs[1], OpKind::Sqrt);
  }
  if (!sq) return nullptr;
  nodes->insert(nodes->end(), {p, sq});
  return sq->inputs[0];
}

// s = sqrt(a): returns a and appends the node.
Value* sqrt_arg(Value* s, std::vector<Node*>* nodes) {
  Node* p = s->producer;
  bool ok =
      p && (p->op == OpKind::Sqrt || (p->op == OpKind::Pow && p->attr_float("exponent", 0) == 0.5));
  if (!ok) return nullptr;
  nodes->push_back(p);
  return p->inputs[0];
}

// The numerator d and the radicand a of core n.
std::optional<std::pair<Value*, Value*>> match_core(Node* n, std::vector<Node*>* nodes) {
  nodes->push_back(n);
  if (n->op == OpKind::Div) {
    if (Value* a = sqrt_arg(n->inputs[1], nodes)) return std::make_pair(n->inputs[0], a);
  } else if (n->op == OpKind::Mul) {
    for (size_t i = 0; i < 2; i++) {
      if (Value* a = inv_sqrt_arg(n->inputs[i], nodes)) return std::make_pair(n->inputs[1 - i], a);
    }
  }
  return std::nullopt;
}

// v = ReduceMean(d^2), where the d inside may be a separate Sub equal to d.
bool centered_variance(Value* v, Value* d, std::vector<Node*>* nodes) {
  Node* mean = keepdims_mean(v);
  if (!mean) return false;
  Node* sq = producer_if(mean->inputs[0], OpKind::Pow);
  if (!sq) sq = producer_if(mean->inputs[0], OpKind::Mul);
  if (!sq) return false;
  Value* d2 = sq->inputs[0];
  if (!square_of(sq->out(), d2)) return false;
  if (d2 != d) {
    Node* s1 = producer_if(d, OpKind::Sub);
    Node* s2 = producer_if(d2, OpKind::Sub);
    if (!s1 || !s2 || s1->inputs != s2->inputs) return false;
    nodes->push_back(s2);
  }
  nodes->insert(nodes->end(), {mean, sq});
  return true;
}

// v = ReduceMean(x^2) - m^2.
bool moment_variance(Value* v, Value* x, Value* m, std::vector<Node*>* nodes) {
  Node* sub = producer_if(v, OpKind::Sub);
  if (!sub) return false;
  Node* ms = keepdims_mean(sub->inputs[0]);
  if (!ms) return false;
  Node* xx = square_of(ms->inputs[0], x);
  Node* mm = square_of(sub->inputs[1], m);
  if (!xx || !mm) return false;
  nodes->insert(nodes->end(), {sub, ms, xx, mm});
  return true;
}

// The statistics part below the core, trying LayerNorm first.
std::optional<Match> match_stats(Value* d, Value* a, const std::vector<Node*>& core, const Node* n,
                                 const UseInfo& uses) {
  Match m;
  m.nodes = core;
  Value* v = a;
  if (Node* add = producer_if(a, OpKind::Add)) {
    for (size_t i = 0; i < 2; i++) {
      auto eps = uniform_constant(add->inputs[i]);
      if (eps && *eps >= 0 && std::isfinite(*eps)) {
        m.eps = *eps;
        v = add->inputs[1 - i];
        m.nodes.push_back(add);
        break;
      }
    }
  }
  // LayerNorm: d = x - ReduceMean(x).
  if (Node* sub = producer_if(d, OpKind::Sub)) {
    Node* mean = keepdims_mean(sub->inputs[1]);
    if (mean && mean->inputs[0] == sub->inputs[0]) {
      Match ln = m;
      ln.op = OpKind::LayerNorm;
      ln.x = sub->inputs[0];
      ln.nodes.insert(ln.nodes.end(), {sub, mean});
      bool var =
          centered_variance(v, d, &ln.nodes) || moment_variance(v, ln.x, mean->out(), &ln.nodes);
      if (var && uses.private_to(ln.nodes, n)) return ln;
    }
  }
  // RMSNorm: d = x.
  Node* mean = keepdims_mean(v);
  if (!mean) return std::nullopt;
  Node* sq = square_of(mean->inputs[0], d);
  if (!sq) return std::nullopt;
  m.x = d;
  m.nodes.insert(m.nodes.end(), {mean, sq});
  if (!uses.private_to(m.nodes, n)) return std::nullopt;
  return m;
}

// A weight or bias for x: x's dtype, shape [C] or [1,..,1,C] with C x's last dim.
bool is_param(const Value* p, const Value* x) {
  if (p->dtype != x->dtype || p->shape.empty() || p->shape.size() > x->shape.size()) return false;
  if (p->shape.back() != x->shape.back()) return false;
  for (size_t i = 0; i + 1 < p->shape.size(); i++) {
    if (p->shape[i] != Dim(1)) return false;
  }
  return true;
}

// The single reader of v when it is `op` (and v no graph output).
Node* sole_reader(const Value* v, OpKind op, const UseInfo& uses) {
  if (!uses.single_use(v)) return nullptr;
  Node* u = uses.users(v)[0];
  return u->op == op ? u : nullptr;
}

// Extends the match through a param op (Mul by a weight, Add of a bias) reading `cur`.
Value* absorb_param(Value*& cur, Node*& root, OpKind op, const Value* x, Match* m,
                    const UseInfo& uses) {
  Node* u = sole_reader(cur, op, uses);
  if (!u || u->out()->shape != cur->shape) return nullptr;
  Value* p = u->inputs[0] == cur ? u->inputs[1] : u->inputs[0];
  if (p == cur || !is_param(p, x)) return nullptr;
  m->nodes.push_back(u);
  root = u;
  cur = u->out();
  return p;
}

Value* as_vector(Graph& g, Value* p) {
  if (p->shape.size() == 1) return p;
  Node* r = g.add_node(OpKind::Reshape, {p}, {{"shape", std::vector<int64_t>{-1}}});
  infer_node(*r);
  return r->out();
}

}  // namespace

std::vector<Node*> match_norm(Graph& g, Node* n, const UseInfo& uses) {
  if (n->op != OpKind::Div && n->op != OpKind::Mul) return {};
  std::vector<Node*> core;
  auto da = match_core(n, &core);
  if (!da) return {};
  auto m = match_stats(da->first, da->second, core, n, uses);
  if (!m) return {};
  Node* root = n;
  Value* cur = n->out();
  // x = Cast(x0) from bf16/f16 to f32, with the result cast back to x0's dtype: normalize x0.
  if (Node* up = producer_if(m->x, OpKind::Cast)) {
    Value* x0 = up->inputs[0];
    Node* down = sole_reader(cur, OpKind::Cast, uses);
    bool widening =
        m->x->dtype == DType::f32 && (x0->dtype == DType::bf16 || x0->dtype == DType::f16);
    if (widening && down && down->out()->dtype == x0->dtype) {
      m->nodes.insert(m->nodes.end(), {up, down});
      if (uses.private_to(m->nodes, down)) {
        m->x = x0;
        root = down;
        cur = down->out();
      } else {
        m->nodes.resize(m->nodes.size() - 2);
      }
    }
  }
  std::vector<Value*> inputs{m->x};
  if (Value* w = absorb_param(cur, root, OpKind::Mul, m->x, &*m, uses)) {
    inputs.push_back(w);
    if (m->op == OpKind::LayerNorm) {
      if (Value* b = absorb_param(cur, root, OpKind::Add, m->x, &*m, uses)) inputs.push_back(b);
    }
  }
  for (size_t i = 1; i < inputs.size(); i++) inputs[i] = as_vector(g, inputs[i]);
  if (!replace_node(g, root, m->op, inputs, {{"eps", m->eps}})) return {};
  return m->nodes;
}

}  // namespace ubfuse::passes
