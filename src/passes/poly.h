// Polynomials over graph values, to recognize activations written as arithmetic whatever the
// grouping and operand order: 0.5*x*(1+e), x*0.5*(1+e), (x + x*e)/2 and x*(1+e)*0.5 all expand to
// {x: 0.5, x*e: 0.5}.
//
// The expansion looks through Add, Sub, Neg, Mul, Div by a constant and Pow by a small
// non-negative integer, but only into values read by exactly one node (and not graph outputs), so
// every node it looks through is private to the expression. Everything else is an atom: graph
// inputs, other ops (Erf, Tanh, Sigmoid, ...), values with several readers. Constants with one
// repeated value are numbers. Limits below keep it cheap on any graph.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "passes/rewrite_util.h"

namespace ubfuse::passes {

inline constexpr int kMaxPolyNodes = 32;  // nodes looked through per expansion
inline constexpr int kMaxPolyTerms = 16;
inline constexpr int kMaxPolyDegree = 8;
inline constexpr int kMaxPolyPower = 4;  // Pow(x, k) is looked through for integer 0 <= k <= 4

struct Poly {
  // A monomial: (value id, power) pairs sorted by id; the empty monomial is the constant term.
  using Monomial = std::vector<std::pair<int, int>>;
  std::map<Monomial, double> terms;  // zero coefficients are dropped
  std::map<int, Value*> atoms;       // by value id
  std::vector<Node*> nodes;          // the nodes looked through, the root's producer included
};

// Monomial of the given atoms, each to the power 1 (repeat an atom for higher powers).
Poly::Monomial monomial(std::vector<const Value*> factors);

// Expands the expression that computes v (looking through v's own producer whatever its readers).
// nullopt when a limit is exceeded.
std::optional<Poly> expand_poly(Value* v, const UseInfo& uses);

// True when p has exactly the monomials of `want`, each coefficient within rel_tol.
bool poly_matches(const Poly& p, const std::vector<std::pair<Poly::Monomial, double>>& want,
                  double rel_tol);

}  // namespace ubfuse::passes
