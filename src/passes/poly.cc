#include "passes/poly.h"

#include <algorithm>
#include <cmath>

namespace ubfuse::passes {

namespace {

using Terms = std::map<Poly::Monomial, double>;

int degree(const Poly::Monomial& m) {
  int d = 0;
  for (auto& [_, p] : m) d += p;
  return d;
}

Poly::Monomial mul_monomials(const Poly::Monomial& a, const Poly::Monomial& b) {
  std::map<int, int> powers;
  for (auto& [id, p] : a) powers[id] += p;
  for (auto& [id, p] : b) powers[id] += p;
  return Poly::Monomial(powers.begin(), powers.end());
}

void add_term(Terms& t, const Poly::Monomial& m, double c) {
  double& v = t[m];
  v += c;
  if (v == 0) t.erase(m);
}

class Expander {
 public:
  Expander(const UseInfo& uses, Poly& out) : uses_(uses), out_(out) {}

  std::optional<Terms> expand(Value* v, bool root) {
    if (auto c = uniform_constant(v)) {
      if (*c == 0) return Terms{};
      return Terms{{{}, *c}};
    }
    Node* p = v->producer;
    if (!p || !(root || uses_.single_use(v)) || !looks_through(*p)) return atom(v);
    if (int(out_.nodes.size()) >= kMaxPolyNodes) return std::nullopt;
    out_.nodes.push_back(p);
    std::optional<Terms> a = expand(p->inputs[0], false);
    if (!a) return std::nullopt;
    Terms r;
    if (p->op == OpKind::Neg) {
      for (auto& [m, c] : *a) add_term(r, m, -c);
      return checked(r);
    }
    if (p->op == OpKind::Div) {
      double k = 1.0 / *uniform_constant(p->inputs[1]);
      for (auto& [m, c] : *a) add_term(r, m, c * k);
      return checked(r);
    }
    if (p->op == OpKind::Pow) {
      int k = int(p->attr_float("exponent", 1));
      r = Terms{{{}, 1.0}};
      for (int i = 0; i < k && r.size(); i++) {
        auto next = mul(r, *a);
        if (!next) return std::nullopt;
        r = *next;
      }
      return checked(r);
    }
    std::optional<Terms> b = expand(p->inputs[1], false);
    if (!b) return std::nullopt;
    if (p->op == OpKind::Add || p->op == OpKind::Sub) {
      r = *a;
      for (auto& [m, c] : *b) add_term(r, m, p->op == OpKind::Add ? c : -c);
      return checked(r);
    }
    if (p->op == OpKind::Mul) return mul(*a, *b);
    return std::nullopt;
  }

 private:
  static bool looks_through(const Node& n) {
    const OpKind k = n.op;
    if (k == OpKind::Add || k == OpKind::Sub || k == OpKind::Mul || k == OpKind::Neg) return true;
    if (k == OpKind::Div) {
      auto c = uniform_constant(n.inputs[1]);
      return c && *c != 0 && std::isfinite(*c);
    }
    if (k == OpKind::Pow) {
      double e = n.attr_float("exponent", 1);
      return e >= 0 && e <= kMaxPolyPower && e == std::floor(e);
    }
    return false;
  }

  std::optional<Terms> atom(Value* v) {
    out_.atoms[v->id] = v;
    return Terms{{{{v->id, 1}}, 1.0}};
  }

  std::optional<Terms> mul(const Terms& a, const Terms& b) {
    Terms r;
    for (auto& [ma, ca] : a) {
      for (auto& [mb, cb] : b) add_term(r, mul_monomials(ma, mb), ca * cb);
    }
    return checked(r);
  }

  static std::optional<Terms> checked(const Terms& t) {
    if (int(t.size()) > kMaxPolyTerms) return std::nullopt;
    for (auto& [m, c] : t) {
      if (degree(m) > kMaxPolyDegree || !std::isfinite(c)) return std::nullopt;
    }
    return t;
  }

  const UseInfo& uses_;
  Poly& out_;
};

}  // namespace

Poly::Monomial monomial(std::vector<const Value*> factors) {
  std::map<int, int> powers;
  for (const Value* v : factors) powers[v->id]++;
  return Poly::Monomial(powers.begin(), powers.end());
}

std::optional<Poly> expand_poly(Value* v, const UseInfo& uses) {
  Poly p;
  Expander e(uses, p);
  auto terms = e.expand(v, true);
  if (!terms) return std::nullopt;
  p.terms = std::move(*terms);
  return p;
}

bool poly_matches(const Poly& p, const std::vector<std::pair<Poly::Monomial, double>>& want,
                  double rel_tol) {
  if (p.terms.size() != want.size()) return false;
  for (auto& [m, c] : want) {
    auto it = p.terms.find(m);
    if (it == p.terms.end() || !near(it->second, c, rel_tol)) return false;
  }
  return true;
}

}  // namespace ubfuse::passes
