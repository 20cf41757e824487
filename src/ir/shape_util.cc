#include "ir/shape_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace ubfuse {

namespace {
bool is_runtime_dim(const Dim& d) {
  for (const std::string& s : d.symbols()) {
    if (!s.empty() && s[0] == '$') return true;  // ir/values.h runtime_dim
  }
  return false;
}
}  // namespace

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
    } else if (is_runtime_dim(db)) {
      out[i] = da;  // a run-time dim (a Range's length, a capped slice) must match; plans check
    } else if (is_runtime_dim(da)) {
      out[i] = db;
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
// The product of dims, after cancelling each dim that `other` also lists (as often as both do):
// dividing b*(past+seq)*512 by b*(past+seq) then needs no polynomial division at all.
Dim product_without(const Shape& dims, const Shape& other) {
  std::vector<bool> used(other.size(), false);
  Dim p(1);
  for (auto& d : dims) {
    bool cancelled = false;
    for (size_t j = 0; j < other.size() && !cancelled; j++) {
      if (!used[j] && other[j] == d) used[j] = cancelled = true;
    }
    if (!cancelled) p = Dim::mul(p, d);
  }
  return p;
}
}  // namespace

std::optional<Shape> reshape_target(const Shape& in, const std::vector<Dim>& target, bool allowzero,
                                    std::string* why) {
  Shape out, known;
  int infer_at = -1;
  for (size_t i = 0; i < target.size(); i++) {
    const Dim& t = target[i];
    if (t.is_static() && t.value() == -1) {
      if (infer_at >= 0) {
        if (why) *why = "more than one -1";
        return std::nullopt;
      }
      infer_at = int(i);
      out.emplace_back(int64_t{1});
      continue;
    }
    if (t.is_static() && t.value() < -1) {
      if (why) *why = "negative dim " + std::to_string(t.value());
      return std::nullopt;
    }
    const bool copy = !allowzero && t.is_static() && t.value() == 0;
    if (copy && i >= in.size()) {
      if (why) *why = "0 at position " + std::to_string(i) + " has no input dim to copy";
      return std::nullopt;
    }
    Dim d = copy ? in[i] : t;
    known.push_back(d);
    out.push_back(d);
  }
  auto has_zero = [](const Shape& s) {
    return std::any_of(s.begin(), s.end(), [](const Dim& d) { return d == Dim(int64_t(0)); });
  };
  // Both empty: equal counts, whatever the other dims (cancelling the 0s would compare them).
  if (infer_at < 0 && has_zero(in) && has_zero(known)) return out;
  Dim total = product_without(in, known), part = product_without(known, in);
  if (infer_at >= 0) {
    bool zero =
        std::any_of(known.begin(), known.end(), [](const Dim& d) { return d == Dim(int64_t(0)); });
    auto d = zero ? std::nullopt : Dim::div_exact(total, part);  // -1 beside a 0 is ambiguous
    if (!d) {
      if (why) *why = "input " + shape_str(in) + " does not divide into the target";
      return std::nullopt;
    }
    out[size_t(infer_at)] = *d;
    return out;
  }
  if (total != part) {
    if (why) *why = "element count of input " + shape_str(in) + " differs from the target";
    return std::nullopt;
  }
  return out;
}

std::optional<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& target,
                                    std::string* why) {
  std::vector<Dim> t(target.begin(), target.end());
  return reshape_target(in, t, false, why);
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

std::optional<Dim> slice_length(const Dim& dim, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return std::nullopt;
  if (dim.is_static()) return Dim(slice_length(dim.value(), start, end, step));
  // Once dim is large enough each clamped bound is a constant or dim plus a constant.
  struct Bound {
    bool rel;  // dim + c rather than c
    int64_t c;
  };
  constexpr int64_t kHuge = int64_t(1) << 62;  // "to the end" in exported graphs
  auto bound = [step](int64_t x) -> Bound {
    if (x >= kHuge) return {true, step > 0 ? 0 : -1};
    if (x <= -kHuge) return {false, step > 0 ? 0 : -1};
    return {x < 0, x};
  };
  Bound s = bound(start), e = bound(end);
  // The length grows with dim only when the far bound follows dim and the near one does not;
  // otherwise it is min(n, dim) or 0 for large dims, which a polynomial cannot say.
  Bound from = step > 0 ? s : e, to = step > 0 ? e : s;
  if (!to.rel || from.rel) return std::nullopt;
  int64_t k = step > 0 ? step : -step, c;
  if (__builtin_sub_overflow(to.c, from.c, &c) || __builtin_add_overflow(c, k - 1, &c)) {
    return std::nullopt;
  }
  return Dim::floordiv(Dim::add(dim, Dim(c)), k);  // ceil((dim + to - from) / k)
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

namespace {

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

ConvAxis conv_axis(int64_t in, int64_t k, int64_t s, int64_t d, const std::string& auto_pad,
                   int64_t pb, int64_t pe) {
  const int64_t dk = d * (k - 1) + 1;  // the dilated kernel's extent
  ConvAxis a;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    a.out = floor_div(in + s - 1, s);
    const int64_t total = std::max<int64_t>(0, (a.out - 1) * s + dk - in);
    const int64_t small = total / 2;
    a.pad_begin = auto_pad == "SAME_UPPER" ? small : total - small;
    a.pad_end = total - a.pad_begin;
    return a;
  }
  if (auto_pad != "VALID") {
    a.pad_begin = pb;
    a.pad_end = pe;
  }
  a.out = floor_div(in + a.pad_begin + a.pad_end - dk, s) + 1;
  return a;
}

ConvAxis pool_axis(int64_t in, int64_t k, int64_t s, int64_t d, const std::string& auto_pad,
                   int64_t pb, int64_t pe, bool ceil_mode) {
  ConvAxis a = conv_axis(in, k, s, d, auto_pad, pb, pe);
  if (!ceil_mode || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return a;
  const int64_t span = in + a.pad_begin + a.pad_end - (d * (k - 1) + 1);
  if (span < 0) return a;
  a.out = (span + s - 1) / s + 1;
  if ((a.out - 1) * s >= in + a.pad_begin) a.out--;
  return a;
}

std::optional<Dim> conv_out_dim(const Dim& in, int64_t k, int64_t s, int64_t d,
                                const std::string& auto_pad, int64_t pb, int64_t pe) {
  if (in.is_static()) return Dim(conv_axis(in.value(), k, s, d, auto_pad, pb, pe).out);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    return Dim::floordiv(Dim::add(in, Dim(s - 1)), s);
  }
  const int64_t pads = auto_pad == "VALID" ? 0 : pb + pe;
  auto q = Dim::floordiv(Dim::add(in, Dim(pads - d * (k - 1) - 1)), s);
  if (!q) return std::nullopt;
  return Dim::add(*q, Dim(int64_t(1)));
}

std::optional<PadMode> parse_pad_mode(const std::string& s) {
  if (s == "constant") return PadMode::Constant;
  if (s == "reflect") return PadMode::Reflect;
  if (s == "edge") return PadMode::Edge;
  return std::nullopt;
}

std::optional<ResizeMode> parse_resize_mode(const std::string& s) {
  if (s == "nearest") return ResizeMode::Nearest;
  if (s == "linear") return ResizeMode::Linear;
  if (s == "cubic") return ResizeMode::Cubic;
  return std::nullopt;
}

std::optional<ResizeCoord> parse_resize_coord(const std::string& s) {
  if (s == "half_pixel") return ResizeCoord::HalfPixel;
  if (s == "half_pixel_symmetric") return ResizeCoord::HalfPixelSymmetric;
  if (s == "pytorch_half_pixel") return ResizeCoord::PytorchHalfPixel;
  if (s == "align_corners") return ResizeCoord::AlignCorners;
  if (s == "asymmetric") return ResizeCoord::Asymmetric;
  if (s == "tf_half_pixel_for_nn") return ResizeCoord::TfHalfPixelForNN;
  if (s == "tf_crop_and_resize") return ResizeCoord::TfCropAndResize;
  return std::nullopt;
}

std::optional<ResizeNearest> parse_resize_nearest(const std::string& s) {
  if (s == "round_prefer_floor") return ResizeNearest::RoundPreferFloor;
  if (s == "round_prefer_ceil") return ResizeNearest::RoundPreferCeil;
  if (s == "floor") return ResizeNearest::Floor;
  if (s == "ceil") return ResizeNearest::Ceil;
  return std::nullopt;
}

std::optional<ResizeGeometry> resize_geometry(const Sizes& in, const std::vector<double>& values,
                                              bool sizes, const std::vector<int64_t>& axes,
                                              const std::string& policy, std::string* why) {
  auto values_str = [&] {
    std::string r = "[";
    for (size_t i = 0; i < values.size(); i++) {
      std::ostringstream o;
      o << values[i];
      r += (i ? "," : "") + o.str();
    }
    return r + "]";
  };
  ResizeGeometry g{in, std::vector<double>(in.size(), 1.0)};
  if (values.size() != axes.size()) {
    *why = std::string(sizes ? "sizes " : "scales ") + values_str() + " has " +
           std::to_string(values.size()) + " values for the " + std::to_string(axes.size()) +
           " axes resized of " + sizes_str(in) +
           "; hint: one value per axis in 'axes' (every axis without it)";
    return std::nullopt;
  }
  for (size_t i = 0; i < values.size(); i++) {
    const double v = values[i];
    const bool bad = sizes ? !(v >= 0) || v != std::trunc(v) : !(v > 0) || !std::isfinite(v);
    if (bad) {
      *why = std::string(sizes ? "sizes " : "scales ") + values_str() + " of " + sizes_str(in) +
             (sizes ? " holds a negative size" : " holds a scale that is not positive and finite") +
             "; hint: " + (sizes ? "sizes are the output's lengths" : "a scale is out / in, > 0");
      return std::nullopt;
    }
  }
  const bool keep = sizes && policy != "stretch";
  double common = policy == "not_larger" ? INFINITY : 0.0;
  if (keep) {
    for (size_t i = 0; i < axes.size(); i++) {
      if (in[size_t(axes[i])] == 0) continue;  // stays empty
      const double s = values[i] / double(in[size_t(axes[i])]);
      common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
    }
  }
  for (size_t i = 0; i < axes.size(); i++) {
    const size_t a = size_t(axes[i]);
    const int64_t n = in[a];
    int64_t o = 0;
    double s = 0;
    // Lengths past 2^62 are marked -1 rather than converted (out of int64's range).
    auto length = [](double l) { return l < 0x1p62 ? int64_t(l) : int64_t(-1); };
    if (!sizes) {
      s = values[i];
      o = length(std::floor(double(n) * s));
    } else if (keep) {
      s = common;
      o = n == 0 ? 0 : length(std::floor(s * double(n) + 0.5));
    } else {
      o = length(values[i]);
      s = double(o) / double(n);
    }
    if (o < 0) {  // past 2^62 (below): no tensor is that long
      *why = std::string(sizes ? "sizes " : "scales ") + values_str() + " make axis " +
             std::to_string(a) + " of " + sizes_str(in) +
             " longer than 2^62; hint: check the scales or sizes";
      return std::nullopt;
    }
    if (n == 0 && o != 0) {
      *why = "cannot resize the empty axis " + std::to_string(a) + " of " + sizes_str(in) + " to " +
             std::to_string(o) + "; hint: an empty axis has nothing to sample";
      return std::nullopt;
    }
    g.out[a] = o;
    g.scales[a] = n == 0 ? 1.0 : s;
  }
  return g;
}

int64_t pad_source(int64_t i, int64_t n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return i < 0 ? 0 : n - 1;
    case PadMode::Reflect: {
      if (n <= 1) return 0;
      const int64_t period = 2 * (n - 1);
      const int64_t m = ((i % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

int64_t axes_shape_length(const std::string& mode, int64_t r, int64_t k) {
  if (mode == "unsqueeze") return r + k;
  if (mode == "squeeze" || mode == "reduce_drop") return r - k;
  if (mode == "reduce_perm" || mode == "reduce_keep" || mode == "tiled") return r;
  if (mode == "reduce_merged") return r - k + 1;
  if (mode == "split") return k + 1;
  if (mode == "tile") return 2 * r;
  if (mode == "pad") return k % 3 == 0 ? 2 * r : -1;
  return -1;
}

std::optional<Shape> axes_shape(const std::string& mode, const Shape& s,
                                const std::vector<int64_t>& v, int64_t axis, std::string* why) {
  const int64_t r = int64_t(s.size()), k = int64_t(v.size());
  const bool reduce = mode.rfind("reduce_", 0) == 0;
  const std::string what = mode == "unsqueeze" ? "Unsqueeze's axes"
                           : mode == "squeeze" ? "Squeeze's axes"
                           : reduce            ? "the reduced axes"
                           : mode == "split"   ? "Split's sizes"
                           : mode == "pad"     ? "Pad's axes, begins and ends"
                                               : "Tile's repeats";
  const std::string ctx = what + " " + sizes_str(v) + " for the input shape " + shape_str(s);
  auto fail = [&](const std::string& m) -> std::optional<Shape> {
    *why = ctx + ": " + m;
    return std::nullopt;
  };
  why->clear();
  if (axes_shape_length(mode, 0, 0) < 0) {
    *why = "unknown mode '" + mode + "'";
    return std::nullopt;
  }
  if (axes_shape_length(mode, r, k) < 0) {
    return fail(mode == "pad" ? "they are not three lists of one length"
                              : "more axes than the input has");
  }
  Shape out;
  if (mode == "pad") {
    // [axes, begins, ends]: each axis' two pads into the all-axes form, 0 for the others.
    const int64_t na = k / 3;
    out.assign(size_t(2 * r), Dim(int64_t(0)));
    std::vector<bool> seen(size_t(r), false);
    for (int64_t i = 0; i < na; i++) {
      const int64_t a = v[size_t(i)];
      if (a < -r || a >= r) {
        return fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
      }
      const int64_t x = a < 0 ? a + r : a;
      if (seen[size_t(x)]) return fail("axis " + std::to_string(a) + " repeats");
      seen[size_t(x)] = true;
      out[size_t(x)] = Dim(v[size_t(na + i)]);
      out[size_t(r + x)] = Dim(v[size_t(2 * na + i)]);
    }
    return out;
  }
  if (mode == "split") {
    if (axis < 0 || axis >= r) return fail("axis " + std::to_string(axis) + " is out of range");
    int64_t total = 0;
    out.push_back(Dim(int64_t(0)));
    for (int64_t x : v) {
      if (x < 0) return fail("a size is negative");
      if (x > std::numeric_limits<int64_t>::max() - total) return fail("their sum overflows");
      total += x;
      out.emplace_back(total);
    }
    const Dim& d = s[size_t(axis)];
    if (!d.is_static()) return std::nullopt;  // the plan knows the axis' size
    if (total != d.value()) {
      return fail("they add up to " + std::to_string(total) + ", not the size " + d.str() +
                  " of axis " + std::to_string(axis));
    }
    return out;
  }
  if (mode == "tile" || mode == "tiled") {
    if (k != r) return fail("one repeat per axis is needed");
    for (int64_t i = 0; i < r; i++) {
      const int64_t rep = v[size_t(i)];
      if (rep < 0) return fail("the repeat of axis " + std::to_string(i) + " is negative");
      const Dim& d = s[size_t(i)];
      if (d.is_static() && d.value() > 0 && rep > std::numeric_limits<int64_t>::max() / d.value()) {
        return fail("the repeat of axis " + std::to_string(i) + " overflows its size");
      }
      const Dim times(rep);
      if (mode == "tile") out.push_back(times);
      out.push_back(mode == "tile" ? s[size_t(i)] : Dim::mul(s[size_t(i)], times));
    }
    return out;
  }
  // Axes: in [-n, n) for the rank n they index (the output's for Unsqueeze), each at most once.
  const int64_t n = mode == "unsqueeze" ? r + k : r;
  std::vector<bool> hit(size_t(n), false);
  for (int64_t a : v) {
    if (a < -n || a >= n) {
      return fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(n));
    }
    const int64_t na = a < 0 ? a + n : a;
    if (hit[size_t(na)]) return fail("axis " + std::to_string(a) + " repeats");
    hit[size_t(na)] = true;
  }
  bool open = false;
  size_t next = 0;
  Dim merged(int64_t(1));
  for (int64_t i = 0; i < n; i++) {
    const bool h = hit[size_t(i)];
    if (mode == "unsqueeze") {
      out.push_back(h ? Dim(int64_t(1)) : s[next++]);
      continue;
    }
    const Dim& d = s[size_t(i)];
    if (mode == "squeeze" && h) {
      if (!d.is_static()) open = true;
      if (d.is_static() && d.value() != 1) {
        return fail("axis " + std::to_string(i) + " has size " + d.str() + ", not 1");
      }
    }
    if (reduce && h && d == Dim(int64_t(0))) {
      return fail("reducing axis " + std::to_string(i) + " of size 0 is not supported");
    }
    if (h) merged = Dim::mul(merged, d);
    if (mode == "reduce_keep") out.push_back(h ? Dim(int64_t(1)) : d);
    if ((mode == "squeeze" || mode == "reduce_drop" || mode == "reduce_merged") && !h) {
      out.push_back(d);
    }
    if (mode == "reduce_perm" && !h) out.push_back(Dim(i));
  }
  if (mode == "reduce_perm") {
    for (int64_t i = 0; i < n; i++) {
      if (hit[size_t(i)]) out.push_back(Dim(i));
    }
  }
  if (mode == "reduce_merged") out.push_back(merged);
  if (open) return std::nullopt;
  return out;
}

}  // namespace ubfuse
