// Silu and Gelu from arithmetic. The root's expression is expanded as a polynomial over two atoms,
// x and f(u) with f one of Sigmoid, Erf, Tanh (poly.h), so every grouping and operand order of
// the same formula matches:
//   Silu          x * sigmoid(x)                                      {x*s: 1}
//   Gelu "none"   0.5 * x * (1 + erf(u)),  u = x / sqrt(2)            {x: 0.5, x*e: 0.5}
//   Gelu "tanh"   0.5 * x * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 * x^3)
// The argument u is expanded the same way (x / 1.4142, x * 0.7071, x^3 as Pow 3 or x*x*x), and
// constants match within const_rel_tol of x's dtype.
#include <cmath>

#include "passes/canonicalize.h"
#include "passes/poly.h"

namespace ubfuse::passes {

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;  // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

// The Gelu approximation that `u`, f's argument, selects: "none" for erf, "tanh" for tanh; "" when
// u is not x/sqrt(2) or sqrt(2/pi)*(x + 0.044715x^3).
std::string gelu_kind(OpKind f, Value* u, Value* x, const UseInfo& uses, std::vector<Node*>* seen) {
  if (!uses.single_use(u)) return "";
  auto q = expand_poly(u, uses);
  if (!q || q->atoms.size() != 1 || q->atoms.begin()->second != x) return "";
  double tol = const_rel_tol(x->dtype);
  auto mx = monomial({x});
  bool ok = false;
  if (f == OpKind::Erf) {
    ok = poly_matches(*q, {{mx, kSqrtHalf}}, tol);
  } else {
    ok = poly_matches(*q, {{mx, kSqrt2OverPi}, {monomial({x, x, x}), kSqrt2OverPi * kGeluCubic}},
                      tol);
  }
  if (!ok) return "";
  seen->insert(seen->end(), q->nodes.begin(), q->nodes.end());
  return f == OpKind::Erf ? "none" : "tanh";
}

}  // namespace

std::vector<Node*> match_activation(Graph& g, Node* n, const UseInfo& uses) {
  if (n->op != OpKind::Mul && n->op != OpKind::Add && n->op != OpKind::Div &&
      n->op != OpKind::Sub) {
    return {};
  }
  auto p = expand_poly(n->out(), uses);
  if (!p || p->atoms.size() != 2) return {};
  for (auto& [id, fv] : p->atoms) {
    Node* f = fv->producer;
    if (!f || !uses.single_use(fv)) continue;
    Value* x =
        p->atoms.begin()->second == fv ? p->atoms.rbegin()->second : p->atoms.begin()->second;
    double tol = const_rel_tol(x->dtype);
    auto x_f = monomial({x, fv});
    std::vector<Node*> matched = p->nodes;
    matched.push_back(f);
    Node* r = nullptr;
    if (f->op == OpKind::Sigmoid && f->inputs[0] == x && poly_matches(*p, {{x_f, 1.0}}, tol)) {
      if (uses.private_to(matched, n)) r = replace_node(g, n, OpKind::Silu, {x});
    } else if ((f->op == OpKind::Erf || f->op == OpKind::Tanh) &&
               poly_matches(*p, {{monomial({x}), 0.5}, {x_f, 0.5}}, tol)) {
      std::string kind = gelu_kind(f->op, f->inputs[0], x, uses, &matched);
      if (!kind.empty() && uses.private_to(matched, n)) {
        r = replace_node(g, n, OpKind::Gelu, {x}, {{"approximate", kind}});
      }
    }
    if (r) return matched;
  }
  return {};
}

}  // namespace ubfuse::passes
