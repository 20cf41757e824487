#include "ir/shape_util.h"

#include <algorithm>
#include <map>

namespace ubfuse {

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* why) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; i++) {
    const Dim one(1);
    const Dim& da = i < r - a.size() ? one : a[i - (r - a.size())];
    const Dim& db = i < r - b.size() ? one : b[i - (r - b.size())];
    if (da == db) {
      out[i] = da;
    } else if (da.is_static() && da.value() == 1) {
      out[i] = db;
    } else if (db.is_static() && db.value() == 1) {
      out[i] = da;
    } else if (!da.is_static() && db.is_static()) {
      out[i] = db;  // the symbol must equal the fixed size; checked at run time
    } else if (da.is_static() && !db.is_static()) {
      out[i] = da;
    } else {
      if (why) {
        *why = shape_str(a) + " and " + shape_str(b) + " differ in dim " + std::to_string(i) +
               " (" + da.str() + " vs " + db.str() + ")";
      }
      return std::nullopt;
    }
  }
  return out;
}

namespace {
// A product of dims as a constant and a multiset of symbol factors.
struct Product {
  int64_t k = 1;
  std::map<std::string, int> syms;
  void mul(const Dim& d) {
    if (d.is_static()) {
      k *= d.value();
      return;
    }
    std::string s = d.symbol();
    size_t pos = 0;
    while (true) {
      size_t star = s.find('*', pos);
      std::string f = s.substr(pos, star == std::string::npos ? std::string::npos : star - pos);
      if (!f.empty() && std::all_of(f.begin(), f.end(), ::isdigit)) {
        k *= std::stoll(f);
      } else {
        syms[f]++;
      }
      if (star == std::string::npos) break;
      pos = star + 1;
    }
  }
};
}  // namespace

std::optional<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& target,
                                    std::string* why) {
  Product total;
  for (auto& d : in) total.mul(d);
  Shape out;
  int infer_at = -1;
  Product known;
  for (size_t i = 0; i < target.size(); i++) {
    int64_t t = target[i];
    if (t == -1) {
      if (infer_at >= 0) {
        if (why) *why = "more than one -1";
        return std::nullopt;
      }
      infer_at = int(i);
      out.emplace_back(int64_t{1});
      continue;
    }
    if (t < -1) {
      if (why) *why = "negative dim " + std::to_string(t);
      return std::nullopt;
    }
    Dim d = t == 0 ? (i < in.size() ? in[i] : Dim(int64_t(0))) : Dim(t);
    if (t == 0 && i >= in.size()) {
      if (why) *why = "0 at position " + std::to_string(i) + " has no input dim to copy";
      return std::nullopt;
    }
    known.mul(d);
    out.push_back(d);
  }
  // Cancel known symbol factors from the total.
  for (auto& [s, c] : known.syms) {
    auto it = total.syms.find(s);
    if (it == total.syms.end() || it->second < c) {
      if (why)
        *why = "symbol '" + s + "' of the target is not a factor of the input " + shape_str(in);
      return std::nullopt;
    }
    it->second -= c;
  }
  if (infer_at >= 0) {
    if (known.k == 0 || total.k % known.k != 0) {
      if (why) *why = "input " + shape_str(in) + " does not divide into the target";
      return std::nullopt;
    }
    Dim d(total.k / known.k);
    for (auto& [s, c] : total.syms) {
      for (int j = 0; j < c; j++) d = Dim::mul(d, Dim(s));
    }
    out[size_t(infer_at)] = d;
    return out;
  }
  bool syms_left =
      std::any_of(total.syms.begin(), total.syms.end(), [](auto& p) { return p.second != 0; });
  if (syms_left || total.k != known.k) {
    if (why) *why = "element count of input " + shape_str(in) + " differs from the target";
    return std::nullopt;
  }
  return out;
}

int64_t slice_start(int64_t dim, int64_t start, int64_t step) {
  if (start < 0) start += dim;
  if (step > 0) return std::clamp<int64_t>(start, 0, dim);
  return std::clamp<int64_t>(start, -1, dim - 1);
}

int64_t slice_length(int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t s = slice_start(dim, start, step);
  if (end < 0) end += dim;
  int64_t e = step > 0 ? std::clamp<int64_t>(end, 0, dim) : std::clamp<int64_t>(end, -1, dim - 1);
  if (step > 0) return e > s ? (e - s + step - 1) / step : 0;
  return s > e ? (s - e + (-step) - 1) / (-step) : 0;
}

std::vector<int64_t> broadcast_strides(const Sizes& sizes, const Sizes& out) {
  std::vector<int64_t> st(out.size(), 0);
  int64_t stride = 1;
  size_t off = out.size() - sizes.size();
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i + off] = sizes[i] == 1 && out[i + off] != 1 ? 0 : stride;
    stride *= sizes[i];
  }
  return st;
}

}  // namespace ubfuse
