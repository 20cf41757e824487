// Reference TopK, GatherND, ScatterND and ScatterElements, in double (reference_ops.h).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ir/shape_util.h"
#include "kernels/reference/reference_ops.h"
#include "ubfuse/error.h"

namespace ubfuse::ref::detail {

// TopK: per line along the axis, its elements ranked (largest: NaN first, then the larger; else
// the smaller first, NaN last; equal ones by index), the first k kept with their indices.
std::vector<RefTensor> top_k(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const int64_t ax = n.attr_int("axis", -1), len = x.sizes[size_t(ax)];
  const bool largest = n.attr_int("largest", 1) != 0;
  if (in[1].data.size() != 1) throw Error(n.describe() + ": k must hold one value");
  const int64_t k = int64_t(in[1].data[0]);
  if (k < 0 || k > len) {
    throw Error(n.describe() + ": k " + std::to_string(k) + " is outside [0, " +
                std::to_string(len) + "] for " + sizes_str(x.sizes));
  }
  int64_t inner = 1;
  for (size_t d = size_t(ax) + 1; d < x.sizes.size(); d++) inner *= x.sizes[d];
  Sizes os = x.sizes;
  os[size_t(ax)] = k;
  RefTensor vals = make(n, os, 0), idx = make(n, os, 1);
  const int64_t lines = len * inner != 0 ? int64_t(x.data.size()) / len : 0;
  for (int64_t l = 0; l < lines; l++) {
    const int64_t o = l / inner, j = l % inner;
    auto at = [&](int64_t e) { return x.data[size_t((o * len + e) * inner + j)]; };
    std::vector<int64_t> order(static_cast<size_t>(len));
    for (int64_t e = 0; e < len; e++) order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const double va = at(a), vb = at(b);
      if (std::isnan(va) || std::isnan(vb)) return largest ? !std::isnan(vb) : !std::isnan(va);
      return largest ? va > vb : va < vb;
    });
    for (int64_t r = 0; r < k; r++) {
      const size_t out = size_t((o * k + r) * inner + j);
      vals.data[out] = at(order[size_t(r)]);
      idx.data[out] = double(order[size_t(r)]);
    }
  }
  return {vals, idx};
}

// An index into a dim of size `dim`, wrapped once when negative; throws when out of range.
static int64_t wrap_index(const Node& n, double v, int64_t dim, int64_t d) {
  const int64_t i = int64_t(v);
  if (i < -dim || i >= dim) {
    throw Error(n.describe() + ": index " + std::to_string(i) + " is out of range for dim " +
                std::to_string(d) + " of size " + std::to_string(dim));
  }
  return i < 0 ? i + dim : i;
}

// For each m-tuple of idx (its last axis) in order: the flat offset in x of the slice it names,
// within batch `batch` of x's first b dims (GatherND) or of all of x (b = 0).
static std::vector<int64_t> tuple_offsets(const Node& n, const RefTensor& x, const RefTensor& idx,
                                          int64_t b) {
  const int64_t m = idx.sizes.back(), r = int64_t(x.sizes.size());
  const int64_t tuples =
      m ? int64_t(idx.data.size()) / m : numel(Sizes(idx.sizes.begin(), idx.sizes.end() - 1));
  int64_t per_batch = 1;
  for (int64_t d = 0; d < b; d++) per_batch *= idx.sizes[size_t(d)];
  per_batch = per_batch ? tuples / per_batch : 0;
  const auto st = strides_of(x.sizes);
  std::vector<int64_t> off;
  for (int64_t t = 0; t < tuples; t++) {
    // The batch coordinates of tuple t are its leading coordinates in idx.
    int64_t o = 0, rest = per_batch ? t / per_batch : 0;
    for (int64_t d = b - 1; d >= 0; d--) {
      o += (rest % x.sizes[size_t(d)]) * st[size_t(d)];
      rest /= x.sizes[size_t(d)];
    }
    for (int64_t i = 0; i < m; i++) {
      const int64_t d = b + i;
      if (d >= r) throw Error(n.describe() + ": indices' tuples are longer than data's rank");
      o += wrap_index(n, idx.data[size_t(t * m + i)], x.sizes[size_t(d)], d) * st[size_t(d)];
    }
    off.push_back(o);
  }
  return off;
}

RefTensor gather_nd(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const RefTensor& idx = in[1];
  const int64_t b = n.attr_int("batch_dims", 0), m = idx.sizes.back();
  Sizes os(idx.sizes.begin(), idx.sizes.end() - 1);
  os.insert(os.end(), x.sizes.begin() + b + m, x.sizes.end());
  int64_t slice = 1;
  for (size_t d = size_t(b + m); d < x.sizes.size(); d++) slice *= x.sizes[d];
  RefTensor y = make(n, os);
  const auto off = tuple_offsets(n, x, idx, b);
  for (size_t t = 0; t < off.size(); t++) {
    for (int64_t e = 0; e < slice; e++)
      y.data[t * size_t(slice) + size_t(e)] = x.data[size_t(off[t] + e)];
  }
  return y;
}

// ScatterND and ScatterElements: data, then each update in index order, combined by the
// reduction in double (NaN wins max and min, as the Max and Min ops).
RefTensor scatter(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const RefTensor& idx = in[1];
  const RefTensor& u = in[2];
  const std::string red = n.attr_str("reduction", "none");
  RefTensor y = make(n, x.sizes);
  y.data = x.data;
  auto apply = [&](int64_t dst, int64_t src) {
    double& a = y.data[size_t(dst)];
    const double v = u.data[size_t(src)];
    if (red == "add") {
      a += v;
    } else if (red == "mul") {
      a *= v;
    } else if (red == "max" || red == "min") {
      a = std::isnan(a) || std::isnan(v) ? NAN : red == "max" ? std::max(a, v) : std::min(a, v);
    } else {
      a = v;
    }
  };
  if (n.op == OpKind::ScatterND) {
    const int64_t m = idx.sizes.back();
    int64_t slice = 1;
    for (size_t d = size_t(m); d < x.sizes.size(); d++) slice *= x.sizes[d];
    const auto off = tuple_offsets(n, x, idx, 0);
    for (size_t t = 0; t < off.size(); t++) {
      for (int64_t e = 0; e < slice; e++) apply(off[t] + e, int64_t(t) * slice + e);
    }
    return y;
  }
  const int64_t ax = n.attr_int("axis", 0);
  const auto xs = strides_of(x.sizes);
  for (int64_t i = 0; i < int64_t(idx.data.size()); i++) {
    int64_t rest = i, dst = 0;
    for (size_t d = idx.sizes.size(); d-- > 0;) {
      int64_t c = rest % idx.sizes[d];
      rest /= idx.sizes[d];
      if (int64_t(d) == ax) c = wrap_index(n, idx.data[size_t(i)], x.sizes[d], int64_t(d));
      dst += c * xs[d];
    }
    apply(dst, i);
  }
  return y;
}

}  // namespace ubfuse::ref::detail
