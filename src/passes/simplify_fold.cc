// Constant folding: a small node whose inputs are all Constants is evaluated at compile time with
// the double reference kernels and stored, rounded to its dtype, as a Constant. The folded value
// is at least as exact as the kernel's (one rounding of the exact result). Skipped where the
// run-time kernel is the authority: integer division by zero, integers beyond 2^53 (double loses
// them), non-finite values cast to integers, and anything the reference rejects (an out-of-range
// Gather index), which then fails at run time with the kernel's message.
#include <algorithm>
#include <cmath>

#include "kernels/reference/reference.h"
#include "passes/rewrite_util.h"
#include "passes/simplify_rules.h"
#include "ubfuse/error.h"

namespace ubfuse::passes {

namespace {

constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

bool foldable_shape(const Node& n) {
  if (n.outputs.size() != 1 || !is_static(n.out()->shape)) return false;
  int64_t out = numel(static_sizes(n.out()->shape));
  if (out > kMaxFoldElements) return false;
  int64_t in = 0;
  for (const Value* v : n.inputs) {
    int64_t k = v->producer->payload.numel();
    if (k > kMaxFoldElements) return false;  // a Gather from an embedding table, a big MatMul
    in += k;
  }
  if (out > kMaxFoldGrowth && out > in) return false;
  if (n.op == OpKind::MatMul) {
    const Sizes& a = n.inputs[0]->producer->payload.sizes();
    if (double(out) * double(a.empty() ? 1 : a.back()) > kMaxFoldWork) return false;
  }
  if (n.op == OpKind::Conv) {  // each output sums a kernel's worth of products
    const Sizes& w = n.inputs[1]->producer->payload.sizes();
    const double per_out = double(numel(w)) / double(std::max<int64_t>(1, w[0]));
    if (double(out) * per_out > kMaxFoldWork) return false;
  }
  return true;
}

bool integers_exact(const ref::RefTensor& t) {
  for (double v : t.data) {
    if (!std::isfinite(v) || std::fabs(v) > kMaxExactInt) return false;
  }
  return true;
}

}  // namespace

bool fold_constant_node(Graph& g, Node* n) {
  if (n->op == OpKind::Constant || n->op == OpKind::Host || n->inputs.empty()) return false;
  for (const Value* v : n->inputs) {
    if (!is_constant(v)) return false;
  }
  if (!foldable_shape(*n)) return false;
  const DType dt = n->out()->dtype;
  std::vector<ref::RefTensor> ins;
  for (const Value* v : n->inputs) {
    ins.push_back(ref::from_tensor(v->producer->payload));
    if (!is_float(v->dtype) && !integers_exact(ins.back())) return false;
    if (!is_float(dt) && is_float(v->dtype) && !integers_exact(ins.back())) return false;
  }
  if (!is_float(dt) && n->op == OpKind::Div) {
    for (double d : ins[1].data) {
      if (d == 0) return false;
    }
  }
  std::vector<ref::RefTensor> outs;
  try {
    outs = ref::eval_node(*n, ins);
  } catch (const Error&) {
    return false;
  }
  const ref::RefTensor& r = outs.at(0);
  if (r.sizes != static_sizes(n->out()->shape)) return false;
  if (!is_float(dt) && !integers_exact(r)) return false;
  Tensor t(dt, r.sizes);
  for (int64_t i = 0; i < t.numel(); i++) t.set(i, r.data[size_t(i)]);
  return replace_node(g, n, OpKind::Constant, {}, {}, t) != nullptr;
}

}  // namespace ubfuse::passes
