// RotateHalf from RoPE's rotations as PyTorch writes them and their ONNX export keeps them:
//   rotate_half:       cat(-x[..., d/2:], x[..., :d/2], dim=-1)
//                      = Concat(Neg(Slice(x)), Slice(x), axis=-1)
//   rotate_every_two:  stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)  (GPT-J,
//   interleaved)
//                      = Reshape(Concat(Unsqueeze(Neg(Slice(x))), Unsqueeze(Slice(x)), axis=-1))
// (torch.chunk exports a Split, which the importer also turns into Slices; Unsqueeze imports as a
// Reshape), and partial rotary, where only the first r columns of the head rotate:
//   cat(x[..., :r] * cos + rot(x[..., :r]) * sin, x[..., r:], dim=-1)
//   -> x * pad(cos, 1) + RotateHalf(x, rotary_dims=r) * pad(sin, -0)
// whose columns past r are x * 1 + 0 * -0 = x (-0 included). As one op the rotation becomes a read
// pattern of the fused RoPE kernel instead of copies through memory, and the partial form one
// kernel over the whole head instead of slices and a concat; the padded cos/sin depend on the
// lengths alone, so a plan computes them once.
#include <cmath>

#include "ir/shape_util.h"
#include "passes/canonicalize.h"
#include "ubfuse/error.h"

namespace ubfuse::passes {

namespace {

// The [start, end) and step that Slice node s takes of its input's last axis (static dim d),
// every other sliced axis taken whole; false for anything else.
bool last_axis_slice(const Node* s, int64_t d, int64_t* start, int64_t* end, int64_t* step) {
  if (s->op != OpKind::Slice) return false;
  const Shape& in = s->inputs[0]->shape;
  const int64_t rank = int64_t(in.size());
  auto starts = s->attr_ints("starts"), ends = s->attr_ints("ends");
  auto axes = s->attr_ints("axes"), steps = s->attr_ints("steps");  // normalized by inference
  bool found = false;
  for (size_t i = 0; i < starts.size(); i++) {
    const int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax != rank - 1) {
      const Dim& dim = in[size_t(ax)];
      if (steps[i] != 1 || starts[i] != 0 || !dim.is_static() || ends[i] < dim.value()) {
        return false;
      }
      continue;
    }
    if (steps[i] <= 0) return false;
    *step = steps[i];
    *start = slice_start(d, starts[i], steps[i]);
    *end = *start + steps[i] * slice_length(d, starts[i], ends[i], steps[i]);
    found = true;
  }
  return found;
}
bool last_axis_range(const Node* s, int64_t d, int64_t* start, int64_t* end) {
  int64_t step = 0;
  return last_axis_slice(s, d, start, end, &step) && step == 1;
}

// The last axis' size when it is static, else -1.
int64_t last_dim(const Value* v) {
  return v->shape.empty() || !v->shape.back().is_static() ? -1 : v->shape.back().value();
}

// v's producer when it is a Reshape that only appends a dim of 1 (an Unsqueeze(-1)).
Node* unsqueezed_last(const Value* v) {
  Node* r = producer_if(v, OpKind::Reshape);
  if (!r) return nullptr;
  const Shape& in = r->inputs[0]->shape;
  Shape want = in;
  want.push_back(Dim(1));
  return r->out()->shape == want ? r : nullptr;
}

// cat(cos, ones) or cat(sin, -0s) along the last axis up to d columns: an existing Pad of v
// with that fill (sign of zero included), else a new one (its nodes added to `made` as they are
// made; inference may throw).
Value* pad_last(Graph& g, Value* v, int64_t d, double fill, const UseInfo& uses,
                std::vector<Node*>* made) {
  const size_t rank = v->shape.size();
  std::vector<int64_t> pads(2 * rank, 0);
  pads.back() = d - last_dim(v);
  for (Node* u : uses.users(v)) {
    if (u->op == OpKind::Pad && u->inputs.size() == 2 && u->inputs[0] == v &&
        u->attr_ints("pads") == pads && u->attr_str("mode", "constant") == "constant" &&
        uniform_constant(u->inputs[1]) == fill &&
        std::signbit(*uniform_constant(u->inputs[1])) == std::signbit(fill)) {
      return u->out();
    }
  }
  Node* c = g.add_node(OpKind::Constant, {}, {}, g.unique_name(v->name + ".rope_fill"));
  made->push_back(c);
  c->payload = Tensor::from_floats(v->dtype, {}, {float(fill)});
  infer_node(*c);
  Node* p =
      g.add_node(OpKind::Pad, {v, c->out()}, {{"pads", pads}, {"mode", std::string("constant")}},
                 g.unique_name(v->name + ".rope_pad"));
  made->push_back(p);
  infer_node(*p);
  return p->out();
}

}  // namespace

std::vector<Node*> match_rotate_pairs(Graph& g, Node* n, const UseInfo& uses) {
  if (n->op != OpKind::Reshape) return {};
  Node* cat = producer_if(n->inputs[0], OpKind::Concat);
  if (!cat || cat->inputs.size() != 2) return {};
  const int64_t crank = int64_t(cat->out()->shape.size());
  const int64_t axis = cat->attr_int("axis", 0);
  if (crank < 2 || (axis != crank - 1 && axis != -1) || last_dim(cat->out()) != 2) return {};
  // -x[..., 1::2] unsqueezed, the Neg before or after the Unsqueeze; x[..., ::2] unsqueezed.
  Node* neg = nullptr;
  Node* un0 = unsqueezed_last(cat->inputs[0]);
  if (un0) {
    neg = producer_if(un0->inputs[0], OpKind::Neg);
  } else if ((neg = producer_if(cat->inputs[0], OpKind::Neg))) {
    un0 = unsqueezed_last(neg->inputs[0]);
  }
  Node* un1 = unsqueezed_last(cat->inputs[1]);
  if (!neg || !un0 || !un1) return {};
  Node* odd = producer_if(
      un0 == producer_if(cat->inputs[0], OpKind::Reshape) ? neg->inputs[0] : un0->inputs[0],
      OpKind::Slice);
  Node* even = producer_if(un1->inputs[0], OpKind::Slice);
  if (!odd || !even || odd->inputs[0] != even->inputs[0]) return {};
  Value* x = odd->inputs[0];
  const int64_t d = last_dim(x);
  if (d <= 0 || d % 2 != 0 || !(n->out()->shape == x->shape)) return {};
  int64_t os = 0, oe = 0, ostep = 0, es = 0, ee = 0, estep = 0;
  if (!last_axis_slice(odd, d, &os, &oe, &ostep) || !last_axis_slice(even, d, &es, &ee, &estep)) {
    return {};
  }
  if (ostep != 2 || estep != 2 || os != 1 || es != 0 || last_dim(odd->out()) != d / 2 ||
      last_dim(even->out()) != d / 2) {
    return {};
  }
  std::vector<Node*> set{n, cat, un0, un1, neg, odd, even};
  if (!uses.private_to(set, n)) return {};
  if (!replace_node(g, n, OpKind::RotateHalf, {x}, {{"interleaved", int64_t(1)}})) return {};
  return set;
}

std::vector<Node*> match_partial_rotary(Graph& g, Node* n, const UseInfo& uses) {
  if (n->op != OpKind::Concat || n->inputs.size() != 2) return {};
  const int64_t rank = int64_t(n->out()->shape.size());
  const int64_t axis = n->attr_int("axis", 0);
  if (rank == 0 || (axis != rank - 1 && axis != -1)) return {};
  Node* add = producer_if(n->inputs[0], OpKind::Add);
  Node* pass = producer_if(n->inputs[1], OpKind::Slice);
  if (!add || !pass) return {};
  Value* x = pass->inputs[0];
  const int64_t d = last_dim(x);
  int64_t ps = 0, pe = 0;
  if (d <= 0 || !last_axis_range(pass, d, &ps, &pe) || pe != d || ps <= 0) return {};
  const int64_t r = ps;
  // add = x_r * cos + RotateHalf(x_r) * sin, each product and the sum in either order.
  Node *m_cos = nullptr, *m_sin = nullptr, *rot = nullptr, *xr = nullptr;
  Value *cos = nullptr, *sin = nullptr;
  for (int k = 0; k < 2 && !rot; k++) {
    Node* ms = producer_if(add->inputs[size_t(1 - k)], OpKind::Mul);
    Node* mc = producer_if(add->inputs[size_t(k)], OpKind::Mul);
    if (!ms || !mc) continue;
    for (int j = 0; j < 2 && !rot; j++) {
      Node* rh = producer_if(ms->inputs[size_t(j)], OpKind::RotateHalf);
      if (!rh || rh->attr_int("rotary_dims", 0) != 0) continue;
      Value* xin = rh->inputs[0];
      int jc = mc->inputs[0] == xin ? 0 : mc->inputs[1] == xin ? 1 : -1;
      if (jc < 0) continue;
      m_cos = mc;
      m_sin = ms;
      rot = rh;
      sin = ms->inputs[size_t(1 - j)];
      cos = mc->inputs[size_t(1 - jc)];
      xr = producer_if(xin, OpKind::Slice);
    }
  }
  int64_t rs = 0, re = 0;
  if (!rot || !xr || xr->inputs[0] != x || !last_axis_range(xr, d, &rs, &re) || rs != 0 ||
      re != r || last_dim(rot->out()) != r) {
    return {};
  }
  // cos and sin hold the r rotated columns (their other dims broadcast like before).
  if (last_dim(cos) != r || last_dim(sin) != r || cos->shape.size() > size_t(rank) ||
      sin->shape.size() > size_t(rank) || cos->dtype != x->dtype || sin->dtype != x->dtype) {
    return {};
  }
  std::vector<Node*> set{n, add, m_cos, m_sin, rot, xr, pass};
  if (!uses.private_to(set, n)) return {};
  // sin's padding is -0: the passed columns are x * 1 + 0 * -0 = x + -0 = x, -0 included.
  std::vector<Node*> made;
  Node* mul_cos = nullptr;
  Node* mul_sin = nullptr;
  bool ok = true;
  try {
    Value* cos_pad = pad_last(g, cos, d, 1.0, uses, &made);
    Value* sin_pad = pad_last(g, sin, d, -0.0, uses, &made);
    Attrs ra{{"rotary_dims", r}};
    if (rot->attr_int("interleaved", 0) != 0) ra["interleaved"] = int64_t(1);
    mul_cos = g.add_node(OpKind::Mul, {x, cos_pad}, {}, g.unique_name(m_cos->name + ".rotary"));
    made.push_back(mul_cos);
    Node* rot_x =
        g.add_node(OpKind::RotateHalf, {x}, std::move(ra), g.unique_name(rot->name + ".rotary"));
    made.push_back(rot_x);
    mul_sin = g.add_node(OpKind::Mul, {rot_x->out(), sin_pad}, {},
                         g.unique_name(m_sin->name + ".rotary"));
    made.push_back(mul_sin);
    for (Node* m : {mul_cos, rot_x, mul_sin}) infer_node(*m);
  } catch (const Error&) {
    ok = false;
  }
  if (!ok || !replace_node(g, n, OpKind::Add, {mul_cos->out(), mul_sin->out()})) {
    for (auto it = made.rbegin(); it != made.rend(); ++it) g.remove_node(*it);
    return {};
  }
  return set;
}

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
