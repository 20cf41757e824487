// Shapes whose dims are fixed numbers, named symbols ("batch", "seq") or integer polynomials of
// them ("past+seq"), and their binding to concrete sizes at run time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ubfuse {

// A dim is an integer polynomial over symbols: a fixed size (a constant polynomial), a symbol
// ("seq"), or an expression of symbols ("past+seq", "2*seq+1", "batch*seq", "seq-1"), so shape
// inference stays exact through concatenation, slicing and reshapes of symbolic tensors.
//
// Symbols come from ONNX dim_params and from users, so a name is a run of letters, digits, '_',
// '.', '$' and ':' with at least one non-digit; '+', '-', '*' and spaces are the expression syntax:
//   dim    := ['-'] term (('+' | '-') term)*
//   term   := factor ('*' factor)*
//   factor := integer | name
// with spaces allowed around any token. Every dim prints in one canonical form, so two equal
// polynomials are equal Dims and equal strings: products are expanded ((a+b)*c is "a*c+b*c"),
// like terms combined, zero terms dropped, the factors of a term sorted ("batch*seq"; a power
// repeats its factor, "seq*seq"); terms run from the highest degree down, equal degrees in order
// of their factor lists, the constant last; a coefficient other than 1 leads its term
// ("2*seq+1", "-seq+4"). A polynomial with no symbols is a static dim ("seq-seq" is 0).
// A dim is not known to be nonnegative ("seq-1" at seq=0): plans check every size they derive.
class Dim {
 public:
  Dim(int64_t v = 1) : value_(v) {}  // NOLINT: implicit from numbers is the point
  // Parses (and canonicalizes) an expression; throws Error naming the string when it is not one.
  Dim(const char* expr);  // NOLINT
  Dim(std::string expr);  // NOLINT

  bool is_static() const { return std::holds_alternative<int64_t>(value_); }
  // A lone symbol ("seq"), not an expression ("seq+1", "2*seq", "a*b").
  bool is_symbol() const;
  int64_t value() const;              // throws when symbolic
  const std::string& symbol() const;  // the canonical form; UBF_CHECK-fails when static
  std::string str() const;
  bool operator==(const Dim& o) const { return value_ == o.value_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }

  // One term: coefficient times its sorted factors (empty for the constant).
  struct Term {
    int64_t coef;
    std::vector<std::string> factors;
  };
  std::vector<Term> terms() const;           // in canonical order; empty for 0
  std::vector<std::string> symbols() const;  // the names it mentions, sorted, once each

  // Exact arithmetic; throws Error when a coefficient overflows 64 bits or a product expands
  // past a few hundred terms.
  static Dim add(const Dim& a, const Dim& b);
  static Dim sub(const Dim& a, const Dim& b);
  static Dim mul(const Dim& a, const Dim& b);
  // floor(a / k) for a constant k > 0 (throws Error otherwise), as a polynomial: when k divides
  // every non-constant coefficient the constant term floors on its own (floor((2*n+1)/2) = n for
  // every integer n); otherwise nullopt, and the caller needs a fresh symbol.
  static std::optional<Dim> floordiv(const Dim& a, int64_t k);
  // a / b when b divides a as polynomials (so for every value of the symbols), else nullopt.
  static std::optional<Dim> div_exact(const Dim& a, const Dim& b);

 private:
  friend struct DimAccess;
  std::variant<int64_t, std::string> value_;
};

using Shape = std::vector<Dim>;
using Sizes = std::vector<int64_t>;  // a concrete shape
using SymbolBindings = std::map<std::string, int64_t>;

std::string shape_str(const Shape& s);
std::string sizes_str(const Sizes& s);
bool is_static(const Shape& s);
Sizes static_sizes(const Shape& s);  // throws when any dim is symbolic
Shape to_shape(const Sizes& s);
int64_t numel(const Sizes& s);

// Value of `d` under `b`, nullopt when a symbol is unbound; throws Error naming the dim and the
// symbol values when it overflows 64 bits. The value may be negative ("seq-1" at seq=0).
std::optional<int64_t> eval_dim(const Dim& d, const SymbolBindings& b);
// Concrete sizes of `s` under `b`; throws naming the unbound symbol or a negative dim.
Sizes eval_shape(const Shape& s, const SymbolBindings& b);

// The one symbol of `d` that `b` leaves unbound, solved so that d == value: it must appear
// alone, linearly ("past+seq", "2*seq+1", not "batch*seq"), and the solution must be a whole
// number >= 0. nullopt otherwise, with *why saying which condition failed. Plans use it to bind
// symbols that only an op's output reveals (a Concat's "past+seq" once seq is known).
struct DimSolution {
  std::string symbol;
  int64_t value;
};
std::optional<DimSolution> solve_dim(const Dim& d, int64_t value, const SymbolBindings& b,
                                     std::string* why = nullptr);

}  // namespace ubfuse
