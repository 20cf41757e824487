// Shapes whose dims are fixed numbers or named symbols ("batch", "seq"), and their binding to
// concrete sizes at run time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ubfuse {

// A dim is a fixed size or a symbol. A symbol may carry a product form ("batch*seq") when shape
// inference multiplies two symbolic dims, so reshapes of symbolic tensors stay exact.
class Dim {
 public:
  Dim(int64_t v = 1) : value_(v) {}                   // NOLINT: implicit from numbers is the point
  Dim(const char* sym) : value_(std::string(sym)) {}  // NOLINT
  Dim(std::string sym) : value_(std::move(sym)) {}    // NOLINT

  bool is_static() const { return std::holds_alternative<int64_t>(value_); }
  int64_t value() const;              // throws when symbolic
  const std::string& symbol() const;  // throws when static
  std::string str() const;
  bool operator==(const Dim& o) const { return value_ == o.value_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }

  // Product of two dims: static when both are, else a "a*b" symbol (factors kept sorted).
  static Dim mul(const Dim& a, const Dim& b);

 private:
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

// Value of `d` under `b`; products ("a*b") are evaluated factor by factor. nullopt if unbound.
std::optional<int64_t> eval_dim(const Dim& d, const SymbolBindings& b);
// Concrete sizes of `s` under `b`; throws naming the unbound symbol.
Sizes eval_shape(const Shape& s, const SymbolBindings& b);

}  // namespace ubfuse
