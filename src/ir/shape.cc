#include "ubfuse/shape.h"

#include <algorithm>

#include "ubfuse/error.h"

namespace ubfuse {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); i++) out += (i ? "," : "") + s[i].str();
  return out + "]";
}

std::string sizes_str(const Sizes& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); i++) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

Sizes static_sizes(const Shape& s) {
  Sizes out;
  for (auto& d : s) out.push_back(d.value());
  return out;
}

Shape to_shape(const Sizes& s) { return Shape(s.begin(), s.end()); }

int64_t numel(const Sizes& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

Sizes eval_shape(const Shape& s, const SymbolBindings& b) {
  Sizes out;
  for (auto& d : s) {
    auto v = eval_dim(d, b);
    if (!v) {
      std::string unbound;
      for (auto& name : d.symbols()) {
        if (!b.count(name)) unbound += (unbound.empty() ? "'" : ", '") + name + "'";
      }
      throw Error("symbol " + unbound + " of dim '" + d.symbol() + "' in shape " + shape_str(s) +
                  " is not bound");
    }
    if (*v < 0) {
      std::string vals;
      for (auto& name : d.symbols())
        vals += (vals.empty() ? "" : ", ") + name + "=" + std::to_string(b.at(name));
      throw Error("dim '" + d.str() + "' of shape " + shape_str(s) + " is " + std::to_string(*v) +
                  " with " + vals + "; a size cannot be negative");
    }
    out.push_back(*v);
  }
  return out;
}

}  // namespace ubfuse
