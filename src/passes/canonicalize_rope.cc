// RotateHalf from RoPE's rotate_half as PyTorch writes it and its ONNX export keeps it:
//   cat(-x[..., d/2:], x[..., :d/2], dim=-1)  =  Concat(Neg(Slice(x)), Slice(x), axis=-1)
// (torch.chunk exports a Split, which the importer also turns into Slices). As one op the
// rotation becomes a read pattern of the fused RoPE kernel instead of four copies through memory.
#include "ir/shape_util.h"
#include "passes/canonicalize.h"

namespace ubfuse::passes {

namespace {

// The [start, end) that Slice node s takes of its input's last axis (static dim d) with step 1,
// every other sliced axis taken whole; false for anything else.
bool last_axis_range(const Node* s, int64_t d, int64_t* start, int64_t* end) {
  const Shape& in = s->inputs[0]->shape;
  const int64_t rank = int64_t(in.size());
  auto starts = s->attr_ints("starts"), ends = s->attr_ints("ends");
  auto axes = s->attr_ints("axes"), steps = s->attr_ints("steps");  // normalized by inference
  bool found = false;
  for (size_t i = 0; i < starts.size(); i++) {
    if (steps[i] != 1) return false;
    const int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax != rank - 1) {
      const Dim& dim = in[size_t(ax)];
      if (starts[i] != 0 || !dim.is_static() || ends[i] < dim.value()) return false;
      continue;
    }
    *start = slice_start(d, starts[i], 1);
    *end = *start + slice_length(d, starts[i], ends[i], 1);
    found = true;
  }
  return found;
}

}  // namespace

std::vector<Node*> match_rotate_half(Graph& g, Node* n, const UseInfo& uses) {
  if (n->op != OpKind::Concat || n->inputs.size() != 2) return {};
  const int64_t rank = int64_t(n->out()->shape.size());
  const int64_t axis = n->attr_int("axis", 0);
  if (rank == 0 || (axis != rank - 1 && axis != -1)) return {};
  Node* neg = producer_if(n->inputs[0], OpKind::Neg);
  if (!neg) return {};
  Node* upper = producer_if(neg->inputs[0], OpKind::Slice);
  Node* lower = producer_if(n->inputs[1], OpKind::Slice);
  if (!upper || !lower || upper->inputs[0] != lower->inputs[0]) return {};
  Value* x = upper->inputs[0];
  const Dim& last = x->shape.back();
  if (x->shape.size() != size_t(rank) || !last.is_static() || last.value() % 2 != 0) return {};
  const int64_t d = last.value(), h = d / 2;
  int64_t us = 0, ue = 0, ls = 0, le = 0;
  if (h == 0 || !last_axis_range(upper, d, &us, &ue) || !last_axis_range(lower, d, &ls, &le)) {
    return {};
  }
  if (us != h || ue != d || ls != 0 || le != h) return {};
  std::vector<Node*> set{n, neg, upper, lower};
  if (!uses.private_to(set, n)) return {};
  if (!replace_node(g, n, OpKind::RotateHalf, {x})) return {};
  return set;
}

}  // namespace ubfuse::passes
