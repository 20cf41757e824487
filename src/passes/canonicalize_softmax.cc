// Softmax from the numerically safe decomposition (the ONNX Softmax_expanded body):
//   m = ReduceMax(x, keepdims=1); e = Exp(x - m); y = e / ReduceSum(e, keepdims=1)
// (or e * Reciprocal(sum)). The form without the max subtraction is left alone: it overflows
// where Softmax does not, so replacing it would change results for large inputs.
#include "passes/canonicalize.h"

namespace ubfuse::passes {

namespace {

Node* keepdims_reduce(const Value* v, OpKind op) {
  Node* r = producer_if(v, op);
  return r && r->attr_int("keepdims", 1) == 1 ? r : nullptr;
}

}  // namespace

std::vector<Node*> match_softmax(Graph& g, Node* n, const UseInfo& uses) {
  std::vector<Node*> set{n};
  Value *e = nullptr, *s = nullptr;
  if (n->op == OpKind::Div) {
    e = n->inputs[0];
    s = n->inputs[1];
  } else if (n->op == OpKind::Mul) {
    for (int i = 0; i < 2 && !s; i++) {
      if (Node* rc = producer_if(n->inputs[size_t(i)], OpKind::Reciprocal)) {
        e = n->inputs[size_t(1 - i)];
        s = rc->inputs[0];
        set.push_back(rc);
      }
    }
  }
  if (!s) return {};
  Node* sum = keepdims_reduce(s, OpKind::ReduceSum);
  Node* exp = producer_if(e, OpKind::Exp);
  if (!sum || !exp || sum->inputs[0] != e) return {};
  Node* sub = producer_if(exp->inputs[0], OpKind::Sub);
  if (!sub) return {};
  Value* x = sub->inputs[0];
  Node* max = keepdims_reduce(sub->inputs[1], OpKind::ReduceMax);
  if (!max || max->inputs[0] != x) return {};
  set.insert(set.end(), {sum, exp, sub, max});
  if (!uses.private_to(set, n)) return {};
  if (!replace_node(g, n, OpKind::Softmax, {x})) return {};
  return set;
}

}  // namespace ubfuse::passes
