#include "ubfuse/shape.h"

#include <algorithm>
#include <sstream>

#include "ubfuse/error.h"

namespace ubfuse {

int64_t Dim::value() const {
  if (!is_static()) throw Error("dim '" + symbol() + "' is symbolic, a fixed size was needed");
  return std::get<int64_t>(value_);
}

const std::string& Dim::symbol() const {
  UBF_CHECK(!is_static(), "symbol() of a static dim");
  return std::get<std::string>(value_);
}

std::string Dim::str() const { return is_static() ? std::to_string(value()) : symbol(); }

static std::vector<std::string> split_factors(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '*') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

Dim Dim::mul(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value() * b.value());
  if (a.is_static() && a.value() == 1) return b;
  if (b.is_static() && b.value() == 1) return a;
  std::vector<std::string> f;
  int64_t k = 1;
  for (const Dim* d : {&a, &b}) {
    if (d->is_static()) {
      k *= d->value();
    } else {
      for (auto& s : split_factors(d->symbol())) {
        bool numeric = !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit);
        if (numeric) {
          k *= std::stoll(s);
        } else {
          f.push_back(s);
        }
      }
    }
  }
  std::sort(f.begin(), f.end());
  std::string out = k != 1 ? std::to_string(k) : "";
  for (auto& s : f) out += (out.empty() ? "" : "*") + s;
  return Dim(out);
}

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

std::optional<int64_t> eval_dim(const Dim& d, const SymbolBindings& b) {
  if (d.is_static()) return d.value();
  int64_t v = 1;
  for (auto& f : split_factors(d.symbol())) {
    bool numeric = !f.empty() && std::all_of(f.begin(), f.end(), ::isdigit);
    int64_t x;
    if (numeric) {
      x = std::stoll(f);
    } else {
      auto it = b.find(f);
      if (it == b.end()) return std::nullopt;
      x = it->second;
    }
    if (__builtin_mul_overflow(v, x, &v)) {
      throw Error("dim '" + d.symbol() + "' overflows a 64-bit size with " + f + "=" +
                  std::to_string(x) + "; hint: check the symbol values (input shapes, gears)");
    }
  }
  return v;
}

Sizes eval_shape(const Shape& s, const SymbolBindings& b) {
  Sizes out;
  for (auto& d : s) {
    auto v = eval_dim(d, b);
    if (!v) throw Error("symbol '" + d.symbol() + "' of shape " + shape_str(s) + " is not bound");
    out.push_back(*v);
  }
  return out;
}

}  // namespace ubfuse
