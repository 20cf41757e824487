#include "passes/rewrite_util.h"

#include <algorithm>
#include <cmath>

#include "ubfuse/error.h"

namespace ubfuse::passes {

void UseInfo::rebuild(const Graph& g) {
  users_.clear();
  outputs_.clear();
  for (Node* n : g.topo_order()) {
    for (Value* in : n->inputs) {
      auto& u = users_[in];
      if (std::find(u.begin(), u.end(), n) == u.end()) u.push_back(n);
    }
  }
  for (auto& [_, v] : g.outputs()) outputs_.insert(v);
}

const std::vector<Node*>& UseInfo::users(const Value* v) const {
  static const std::vector<Node*> kNone;
  auto it = users_.find(v);
  return it == users_.end() ? kNone : it->second;
}

bool UseInfo::private_to(const std::vector<Node*>& set, const Node* root) const {
  for (Node* n : set) {
    if (n == root) continue;
    for (Value* o : n->outputs) {
      if (is_output(o)) return false;
      for (Node* u : users(o)) {
        if (std::find(set.begin(), set.end(), u) == set.end()) return false;
      }
    }
  }
  return true;
}

Node* producer_if(const Value* v, OpKind op) {
  return v && v->producer && v->producer->op == op ? v->producer : nullptr;
}

bool is_constant(const Value* v) { return producer_if(v, OpKind::Constant) != nullptr; }

std::optional<double> uniform_constant(const Value* v) {
  Node* c = producer_if(v, OpKind::Constant);
  if (!c || !c->payload.defined() || c->payload.numel() == 0) return std::nullopt;
  double first = c->payload.get(0);
  for (int64_t i = 1; i < c->payload.numel(); i++) {
    double x = c->payload.get(i);
    if (!(x == first) || std::signbit(x) != std::signbit(first)) return std::nullopt;
  }
  return first;
}

double const_rel_tol(DType t) {
  switch (t) {
    case DType::bf16:
      return 1.0 / 128;  // two bf16 roundings (8-bit mantissa)
    case DType::f16:
      return 1.0 / 1024;  // two f16 roundings (11-bit mantissa)
    default:
      return 1e-4;
  }
}

bool near(double got, double want, double rel_tol) {
  return std::fabs(got - want) <= rel_tol * std::fabs(want);
}

Node* replace_node(Graph& g, Node* root, OpKind op, std::vector<Value*> inputs, Attrs attrs,
                   Tensor payload) {
  UBF_CHECK(root->outputs.size() == 1, "replace_node: root must have one output");
  const std::string name = root->name, value_name = root->out()->name;
  const std::string parked = g.unique_name(name + ".replaced");
  root->name = parked;  // frees the name for the new node
  root->out()->name = parked;
  Node* n = g.add_node(op, std::move(inputs), std::move(attrs), name);
  n->payload = std::move(payload);
  bool ok = true;
  try {
    infer_node(*n);
  } catch (const Error&) {
    ok = false;
  }
  ok = ok && n->out()->dtype == root->out()->dtype && n->out()->shape == root->out()->shape;
  if (!ok) {
    g.remove_node(n);
    root->name = name;
    root->out()->name = value_name;
    return nullptr;
  }
  n->out()->name = value_name;
  g.replace_uses(root->out(), n->out());
  return n;
}

}  // namespace ubfuse::passes
