// Slow, obvious double-precision kernels: the oracle every fast kernel is tested against.
#include "kernels/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/shape_util.h"
#include "kernels/reference/jitter.h"
#include "ubfuse/error.h"

namespace ubfuse::ref {

namespace {

double round_to(DType t, double v) {
  switch (t) {
    case DType::f32:
      return double(float(v));
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(float(v)));
    case DType::f16:
      return f16_to_f32(f32_to_f16(float(v)));
    case DType::i64:
      return std::isfinite(v) ? double(int64_t(v)) : 0.0;
    case DType::i32:
      return std::isfinite(v) ? double(int32_t(v)) : 0.0;
    case DType::boolean:
      return v != 0 ? 1.0 : 0.0;
    case DType::i8:  // wraps (two's complement), as the kernels store integers
      return std::isfinite(v) ? double(int8_t(uint8_t(int64_t(v)))) : 0.0;
    case DType::u8:
      return std::isfinite(v) ? double(uint8_t(int64_t(v))) : 0.0;
  }
  return v;
}

// Index of `flat` (in `out` sizes) into an input via broadcast strides.
int64_t bcast_index(int64_t flat, const Sizes& out, const std::vector<int64_t>& strides) {
  int64_t idx = 0;
  for (size_t d = out.size(); d-- > 0;) {
    int64_t c = flat % out[d];
    flat /= out[d];
    idx += c * strides[d];
  }
  return idx;
}

std::vector<int64_t> strides_of(const Sizes& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// A value operand's elements (a Reshape's target, Slice bounds) as integers.
std::vector<int64_t> ints_of(const RefTensor& t) {
  std::vector<int64_t> v;
  for (double x : t.data) v.push_back(int64_t(x));
  return v;
}

RefTensor make(const Node& n, Sizes sizes, int out = 0) {
  RefTensor r;
  r.sizes = std::move(sizes);
  r.data.assign(size_t(numel(r.sizes)), 0.0);
  r.dtype = n.outputs[size_t(out)]->dtype;
  return r;
}

// A row op over the last axis of x: f(row of x, row of y or (reduce) its one value, row length).
template <typename F>
RefTensor rows(const Node& n, const RefTensor& x, bool reduce, F f) {
  int64_t c = x.sizes.back();
  int64_t nrows = c ? int64_t(x.data.size()) / c : 0;
  Sizes os = x.sizes;
  if (reduce) {
    if (n.attr_int("keepdims", 1) != 0) {
      os.back() = 1;
    } else {
      os.pop_back();
    }
  }
  RefTensor y = make(n, os);
  for (int64_t r = 0; r < nrows; r++) {
    f(x.data.data() + r * c, y.data.data() + (reduce ? r : r * c), c);
  }
  return y;
}

RefTensor layer_norm(const Node& n, const std::vector<RefTensor>& in) {
  const double eps = n.attr_float("eps", 1e-5);
  return rows(n, in[0], false, [&](const double* xr, double* yr, int64_t c) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; j++) mean += xr[j];
    mean /= double(c);
    for (int64_t j = 0; j < c; j++) var += (xr[j] - mean) * (xr[j] - mean);
    var /= double(c);
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < c; j++) {
      double v = (xr[j] - mean) * rstd;
      if (in.size() > 1) v *= in[1].data[size_t(j)];
      if (in.size() > 2) v += in[2].data[size_t(j)];
      yr[j] = v;
    }
  });
}

RefTensor rms_norm(const Node& n, const std::vector<RefTensor>& in) {
  const double eps = n.attr_float("eps", 1e-5);
  return rows(n, in[0], false, [&](const double* xr, double* yr, int64_t c) {
    double ms = 0;
    for (int64_t j = 0; j < c; j++) ms += xr[j] * xr[j];
    double rr = 1.0 / std::sqrt(ms / double(c) + eps);
    for (int64_t j = 0; j < c; j++) {
      yr[j] = xr[j] * rr * (in.size() > 1 ? in[1].data[size_t(j)] : 1.0);
    }
  });
}

RefTensor softmax(const Node& n, const RefTensor& x) {
  return rows(n, x, false, [&](const double* xr, double* yr, int64_t c) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t j = 0; j < c; j++) m = std::max(m, xr[j]);
    for (int64_t j = 0; j < c; j++) s += std::exp(xr[j] - m);
    for (int64_t j = 0; j < c; j++) yr[j] = std::exp(xr[j] - m) / s;
  });
}

RefTensor reduce_sum(const Node& n, const RefTensor& x, bool mean) {
  return rows(n, x, true, [&](const double* xr, double* yr, int64_t c) {
    double s = 0;
    for (int64_t j = 0; j < c; j++) s += xr[j];
    yr[0] = mean ? s / double(c) : s;
  });
}

RefTensor reduce_max(const Node& n, const RefTensor& x) {
  return rows(n, x, true, [&](const double* xr, double* yr, int64_t c) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; j++)
      m = std::isnan(xr[j]) || std::isnan(m) ? NAN : std::max(m, xr[j]);
    yr[0] = m;
  });
}

RefTensor reduce_prod(const Node& n, const RefTensor& x) {
  return rows(n, x, true, [&](const double* xr, double* yr, int64_t c) {
    double p = 1;
    for (int64_t j = 0; j < c; j++) p *= xr[j];
    yr[0] = p;
  });
}

// MaxPool and AveragePool, written out per spatial rank: each output's window visited tap by tap
// over a flat index of the window, the divisor counted as ONNX defines it.
std::vector<RefTensor> pool(const Node& n, const RefTensor& x) {
  const size_t sp = x.sizes.size() - 2;
  const auto k = n.attr_ints("kernel_shape"), st = n.attr_ints("strides"),
             dl = n.attr_ints("dilations"), pd = n.attr_ints("pads");
  const bool ceil = n.attr_int("ceil_mode", 0) != 0, incl = n.attr_int("count_include_pad", 0) != 0,
             colmajor = n.attr_int("storage_order", 0) != 0, max = n.op == OpKind::MaxPool;
  std::vector<ConvAxis> ax;
  Sizes os{x.sizes[0], x.sizes[1]};
  for (size_t i = 0; i < sp; i++) {
    ax.push_back(pool_axis(x.sizes[2 + i], k[i], st[i], dl[i], n.attr_str("auto_pad", "NOTSET"),
                           pd[i], pd[sp + i], ceil));
    if (ax.back().out < 1) throw Error(n.describe() + ": a spatial axis gives no output");
    os.push_back(ax.back().out);
  }
  RefTensor y = make(n, os), idx = make(n, os, n.outputs.size() > 1 ? 1 : 0);
  const Sizes in_sp(x.sizes.begin() + 2, x.sizes.end()), out_sp(os.begin() + 2, os.end());
  const int64_t isz = numel(in_sp), osz = numel(out_sp), taps = numel(Sizes(k.begin(), k.end()));
  for (int64_t p = 0; p < x.sizes[0] * x.sizes[1]; p++) {
    for (int64_t o = 0; o < osz; o++) {
      double acc = max ? -INFINITY : 0, count = 0;
      int64_t best = -1;
      for (int64_t t = 0; t < taps; t++) {
        // Output and tap coordinates from their flat indices (last axis fastest).
        int64_t oi = o, ti = t, flat = 0, colflat = 0, colstride = 1;
        bool inside = true, in_padded = true;
        std::vector<int64_t> pos(sp);
        for (size_t a = sp; a-- > 0;) {
          const int64_t oc = oi % out_sp[a], tc = ti % k[a];
          oi /= out_sp[a];
          ti /= k[a];
          pos[a] = oc * st[a] - ax[a].pad_begin + tc * dl[a];
          inside = inside && pos[a] >= 0 && pos[a] < in_sp[a];
          in_padded = in_padded && pos[a] >= -ax[a].pad_begin && pos[a] < in_sp[a] + ax[a].pad_end;
        }
        for (size_t a = 0; a < sp; a++) {
          flat = flat * in_sp[a] + pos[a];
          colflat += pos[a] * colstride;
          colstride *= in_sp[a];
        }
        if (max) {
          if (!inside) continue;
          const double v = x.data[size_t(p * isz + flat)];
          if (best < 0 || v > acc || (std::isnan(v) && !std::isnan(acc))) {
            acc = v;
            best = colmajor ? colflat : flat;
          }
        } else {
          if (inside) acc += x.data[size_t(p * isz + flat)];
          count += incl ? in_padded : inside;
        }
      }
      y.data[size_t(p * osz + o)] = max ? acc : acc / count;
      idx.data[size_t(p * osz + o)] = best < 0 ? -1.0 : double(p * isz + best);
    }
  }
  if (n.outputs.size() > 1) return {y, idx};
  return {y};
}

// Resize, as ONNX defines it: along each axis, output coordinate o maps to a coordinate x of the
// input; nearest picks one input element, linear and cubic weigh x's nearest 2 or 4 (antialias:
// more) elements of the edge-padded input. The axes are independent, so each is resized in turn
// by its weights (per output coordinate, the input indices and weights); tf_crop_and_resize's
// coordinates outside the input give extrapolation_value whatever the other axes give.
RefTensor resize(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const auto axes = n.attr_ints("axes");
  const std::string mode = n.attr_str("mode", "nearest"),
                    coord = n.attr_str("coordinate_transformation_mode", "half_pixel"),
                    nearest = n.attr_str("nearest_mode", "round_prefer_floor"),
                    policy = n.attr_str("keep_aspect_ratio_policy", "stretch");
  const double A = n.attr_float("cubic_coeff_a", -0.75);
  const bool excl = n.attr_int("exclude_outside", 0) != 0, aa = n.attr_int("antialias", 0) != 0;
  const size_t r = x.sizes.size();
  // Output sizes and scales: scales floor(in * scale); sizes as given (stretch) or by one scale.
  const bool by_sizes = !is_float(in[1].dtype);
  if (in[1].data.size() != axes.size()) {
    throw Error(n.describe() + ": " + std::to_string(in[1].data.size()) + " scales or sizes for " +
                std::to_string(axes.size()) + " axes");
  }
  Sizes os = x.sizes;
  std::vector<double> sc(r, 1.0), st(r, 0.0), en(r, 1.0);
  double common = policy == "not_larger" ? INFINITY : 0.0;
  for (size_t i = 0; i < axes.size(); i++) {
    const double q = in[1].data[i] / double(x.sizes[size_t(axes[i])]);
    common = policy == "not_larger" ? std::min(common, q) : std::max(common, q);
  }
  for (size_t i = 0; i < axes.size(); i++) {
    const size_t a = size_t(axes[i]);
    const double v = in[1].data[i], len = double(x.sizes[a]);
    if (!by_sizes) {
      sc[a] = v;
      os[a] = int64_t(std::floor(len * v));
    } else if (policy == "stretch") {
      os[a] = int64_t(v);
      sc[a] = v / len;
    } else {
      sc[a] = common;
      os[a] = int64_t(std::floor(common * len + 0.5));
    }
    if (in.size() > 2 && coord == "tf_crop_and_resize") {
      st[a] = in[2].data.at(i);
      en[a] = in[2].data.at(axes.size() + i);
    }
  }
  auto kernel = [&](double d) {  // the interpolation kernel at distance d
    d = std::fabs(d);
    if (mode == "linear") return std::max(0.0, 1 - d);
    if (d <= 1) return (A + 2) * d * d * d - (A + 3) * d * d + 1;
    if (d < 2) return A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A;
    return 0.0;
  };
  RefTensor cur = x;
  std::vector<std::vector<bool>> outside(r);
  for (size_t a = 0; a < r; a++) {
    const int64_t L = x.sizes[a], M = os[a];
    const double s = sc[a];
    outside[a].assign(size_t(M), false);
    // W[o]: the (input index, weight) pairs of output coordinate o.
    std::vector<std::vector<std::pair<size_t, double>>> W;
    W.resize(size_t(M));
    for (int64_t o = 0; o < M; o++) {
      double c = 0;
      if (coord == "half_pixel") c = (o + 0.5) / s - 0.5;
      if (coord == "half_pixel_symmetric") {
        c = (L / 2.0) * (1 - M / (s * L)) + (o + 0.5) / s - 0.5;
      }
      // The resized length is L * s here, not rounded (ONNX's reference).
      if (coord == "pytorch_half_pixel") c = L * s > 1 ? (o + 0.5) / s - 0.5 : 0;
      if (coord == "align_corners") c = L * s != 1 ? o * double(L - 1) / (L * s - 1) : 0;
      if (coord == "asymmetric") c = o / s;
      if (coord == "tf_half_pixel_for_nn") c = (o + 0.5) / s;
      if (coord == "tf_crop_and_resize") {
        c = M > 1 ? st[a] * (L - 1) + o * (en[a] - st[a]) * (L - 1) / double(M - 1)
                  : 0.5 * (st[a] + en[a]) * (L - 1);
        if (!(c >= 0 && c <= L - 1)) {  // NaN (a NaN roi) too
          outside[a][size_t(o)] = true;
          continue;
        }
      }
      auto clampi = [&](double i) { return size_t(std::clamp(i, 0.0, double(L - 1))); };
      if (mode == "nearest") {
        double i = std::floor(c);
        const double f = c - i;
        if (nearest == "round_prefer_floor" && f > 0.5) i += 1;
        if (nearest == "round_prefer_ceil" && f >= 0.5) i += 1;
        if (nearest == "ceil") i = std::ceil(c);
        W[size_t(o)].push_back({clampi(i), 1.0});
        continue;
      }
      // The neighbours of c: a whole c counts as the right end of the interval left of it.
      const double left = c == std::floor(c) ? c - 1 : std::floor(c), t = c - left;
      const double f = aa ? std::min(s, 1.0) : 1.0;  // antialias widens the kernel by 1 / s
      const double reach = (mode == "linear" ? 1.0 : 2.0) / f;
      std::vector<std::pair<double, double>> taps;  // (index, weight)
      double total = 0;
      for (double i = left - std::ceil(reach) - 1; i <= left + std::ceil(reach) + 2; i++) {
        const double d = i - left - t;  // distance from c
        if (!(std::fabs(d) * f < (mode == "linear" ? 1.0 : 2.0))) continue;
        taps.push_back({i, kernel(d * f)});
        total += taps.back().second;
      }
      if (aa) {
        for (auto& p : taps) p.second /= total;
      }
      if (excl) {
        total = 0;
        for (auto& p : taps) {
          if (p.first < 0 || p.first > L - 1) p.second = 0;
          total += p.second;
        }
        for (auto& p : taps) p.second = total != 0 ? p.second / total : p.second;
      }
      for (auto& p : taps) W[size_t(o)].push_back({clampi(p.first), p.second});
    }
    // cur along axis a times W.
    Sizes ns = cur.sizes;
    ns[a] = M;
    RefTensor nx = make(n, ns);
    int64_t inner = 1, outer = 1;
    for (size_t d = a + 1; d < r; d++) inner *= ns[d];
    for (size_t d = 0; d < a; d++) outer *= ns[d];
    for (int64_t p = 0; p < outer; p++) {
      for (int64_t o = 0; o < M; o++) {
        for (int64_t q = 0; q < inner; q++) {
          double acc = 0;
          for (auto [i, w] : W[size_t(o)]) {
            if (w != 0) acc += w * cur.data[(size_t(p * L) + i) * size_t(inner) + size_t(q)];
          }
          nx.data[size_t((p * M + o) * inner + q)] = acc;
        }
      }
    }
    cur = std::move(nx);
  }
  // Extrapolation wherever a coordinate of the element falls outside the input.
  const double ev = n.attr_float("extrapolation_value", 0.0);
  for (int64_t e = 0; e < int64_t(cur.data.size()); e++) {
    int64_t rem = e;
    bool out = false;
    for (size_t a = r; a-- > 0;) {
      out = out || outside[a][size_t(rem % os[a])];
      rem /= os[a];
    }
    if (out) cur.data[size_t(e)] = ev;
  }
  return cur;
}

RefTensor matmul(const Node& n, const std::vector<RefTensor>& in) {
  Sizes sa = in[0].sizes, sb = in[1].sizes;
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), nn = sb.back();
  Sizes ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Sizes batch(std::max(ba.size(), bb.size()));
  for (size_t i = 0; i < batch.size(); i++) {
    int64_t x = i < batch.size() - ba.size() ? 1 : ba[i - (batch.size() - ba.size())];
    int64_t y = i < batch.size() - bb.size() ? 1 : bb[i - (batch.size() - bb.size())];
    batch[i] = std::max(x, y);
  }
  auto sta = broadcast_strides(ba, batch), stb = broadcast_strides(bb, batch);
  Sizes os = batch;
  if (!a1) os.push_back(m);
  if (!b1) os.push_back(nn);
  RefTensor y = make(n, os);
  int64_t nb = numel(batch);
  for (int64_t b = 0; b < nb; b++) {
    int64_t ia = bcast_index(b, batch, sta) * m * k, ib = bcast_index(b, batch, stb) * k * nn;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < nn; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++)
          s += in[0].data[size_t(ia + i * k + p)] * in[1].data[size_t(ib + p * nn + j)];
        y.data[size_t(b * m * nn + i * nn + j)] = s;
      }
    }
  }
  return y;
}

// --- Quantization (ONNX opset 13 forms). The quotients and products ONNX's definitions take in
// float32 are taken in float32 here too, so a tie after rounding is the same tie. ---

// The range of an 8-bit integer dtype.
double qmin(DType t) { return t == DType::i8 ? -128 : 0; }
double qmax(DType t) { return t == DType::i8 ? 127 : 255; }
double saturate(double v, DType t) { return std::min(qmax(t), std::max(qmin(t), v)); }

// Element i's index into a per-axis parameter p (one element: per tensor).
size_t param_index(const Node& n, const Sizes& xs, const RefTensor& p, int64_t i) {
  if (p.data.size() == 1) return 0;
  const int64_t axis = n.attr_int("axis", 1);
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < xs.size(); d++) inner *= xs[d];
  return size_t((i / inner) % xs[size_t(axis)]);
}

RefTensor quantize_linear(const Node& n, const std::vector<RefTensor>& in) {
  const DType t = n.out()->dtype;
  RefTensor y = make(n, in[0].sizes);
  for (size_t i = 0; i < y.data.size(); i++) {
    const size_t k = param_index(n, in[0].sizes, in[1], int64_t(i));
    const double zp = in.size() > 2 ? in[2].data[k] : 0;
    const float q = float(in[0].data[i]) / float(in[1].data[k]);
    y.data[i] = saturate(std::nearbyint(double(q)) + zp, t);
  }
  return y;
}

RefTensor dequantize_linear(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor y = make(n, in[0].sizes);
  for (size_t i = 0; i < y.data.size(); i++) {
    const size_t k = param_index(n, in[0].sizes, in[1], int64_t(i));
    const double zp = in.size() > 2 ? in[2].data[k] : 0;
    y.data[i] = double(float(in[0].data[i] - zp) * float(in[1].data[k]));
  }
  return y;
}

// ONNX's DynamicQuantizeLinear: the range widened to include 0, scale = range / 255 (1 / 255 for
// an all-zero input, whose range is empty), zero point = saturate(round(-min / scale)).
std::vector<RefTensor> dynamic_quantize_linear(const RefTensor& x) {
  float lo = 0, hi = 0;
  for (double v : x.data) {
    lo = std::min(lo, float(v));
    hi = std::max(hi, float(v));
  }
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const float zp = float(std::nearbyint(saturate(double(0.0f - lo / scale), DType::u8)));
  // Its outputs' dtypes are fixed (DynamicQuantMatMul's reference calls this with a node of one
  // f32 output).
  auto part = [](Sizes sizes, DType t) {
    RefTensor r;
    r.data.assign(size_t(numel(sizes)), 0.0);
    r.sizes = std::move(sizes);
    r.dtype = t;
    return r;
  };
  RefTensor y = part(x.sizes, DType::u8), ys = part({}, DType::f32), yz = part({}, DType::u8);
  for (size_t i = 0; i < y.data.size(); i++) {
    y.data[i] = saturate(std::nearbyint(double(float(x.data[i]) / scale)) + zp, DType::u8);
  }
  ys.data[0] = scale;
  yz.data[0] = zp;
  return {y, ys, yz};
}

// A per-row (of a) or per-column (of b) parameter p's value for row or column r.
double row_col(const RefTensor& p, int64_t r) {
  return p.data.size() == 1 ? p.data[0] : p.data[size_t(r)];
}

// (a - a_zp) and (b - b_zp) of a MatMulInteger / QLinearMatMul, as plain matrices for matmul().
std::vector<RefTensor> minus_zero_points(const RefTensor& a, const RefTensor* za,
                                         const RefTensor& b, const RefTensor* zb) {
  RefTensor da = a, db = b;
  const int64_t k = a.sizes.back(), m = a.sizes.size() > 1 ? a.sizes[a.sizes.size() - 2] : 1;
  const int64_t nn = b.sizes.size() > 1 ? b.sizes.back() : 1;
  for (size_t i = 0; za && i < da.data.size(); i++) da.data[i] -= row_col(*za, int64_t(i) / k % m);
  for (size_t i = 0; zb && i < db.data.size(); i++) db.data[i] -= row_col(*zb, int64_t(i) % nn);
  return {da, db};
}

RefTensor matmul_integer(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor y = matmul(n, minus_zero_points(in[0], in.size() > 2 ? &in[2] : nullptr, in[1],
                                            in.size() > 3 ? &in[3] : nullptr));
  for (double& v : y.data) v = double(int32_t(uint32_t(int64_t(v))));  // i32 wraps
  return y;
}

// ONNX's QLinearMatMul: the integer product times a_scale * b_scale / y_scale (that factor in
// float32, the product in double as numpy takes int32 times float32), rounded, plus y_zp,
// saturated.
RefTensor qlinear_matmul(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor y = matmul(n, minus_zero_points(in[0], &in[2], in[3], &in[5]));
  const DType t = n.out()->dtype;
  const int64_t nn = y.sizes.empty() ? 1 : in[3].sizes.size() > 1 ? y.sizes.back() : 1;
  const int64_t m = in[0].sizes.size() > 1 ? in[0].sizes[in[0].sizes.size() - 2] : 1;
  for (size_t i = 0; i < y.data.size(); i++) {
    const int64_t col = int64_t(i) % nn, row = int64_t(i) / nn % m;
    const float f = float(row_col(in[1], row)) * float(row_col(in[4], col)) / float(in[6].data[0]);
    y.data[i] = saturate(std::nearbyint(y.data[i] * double(f)) + in[7].data[0], t);
  }
  return y;
}

// The chain it stands for, step by step: DynamicQuantizeLinear, MatMulInteger, the i32 sum as f32,
// times the f32 product of the two scales.
RefTensor dynamic_quant_matmul(const Node& n, const std::vector<RefTensor>& in) {
  const std::vector<RefTensor> q = dynamic_quantize_linear(in[0]);
  RefTensor y = matmul(n, minus_zero_points(q[0], &q[2], in[1], in.size() > 3 ? &in[3] : nullptr));
  const int64_t nn = y.sizes.back();
  for (size_t i = 0; i < y.data.size(); i++) {
    const float acc = float(int32_t(uint32_t(int64_t(y.data[i]))));
    y.data[i] = acc * (float(q[1].data[0]) * float(row_col(in[2], int64_t(i) % nn)));
  }
  return y;
}

RefTensor conv(const Node& n, const std::vector<RefTensor>& in);

RefTensor conv_integer(const Node& n, const std::vector<RefTensor>& in);

// As dynamic_quant_matmul around a ConvInteger; the factor per output channel (axis 1).
RefTensor dynamic_quant_conv(const Node& n, const std::vector<RefTensor>& in) {
  const std::vector<RefTensor> q = dynamic_quantize_linear(in[0]);
  std::vector<RefTensor> ci = {q[0], in[1], q[2]};
  if (in.size() > 3) ci.push_back(in[3]);
  RefTensor y = conv_integer(n, ci);
  const int64_t mo = y.sizes[1], per = mo ? int64_t(y.data.size()) / (y.sizes[0] * mo) : 0;
  for (size_t i = 0; i < y.data.size(); i++) {
    const float acc = float(int32_t(uint32_t(int64_t(y.data[i]))));
    y.data[i] = acc * (float(q[1].data[0]) * float(row_col(in[2], int64_t(i) / per % mo)));
  }
  y.dtype = DType::f32;
  return y;
}

RefTensor conv_integer(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor x = in[0], w = in[1];
  if (in.size() > 2) {
    for (double& v : x.data) v -= in[2].data[0];
  }
  if (in.size() > 3) {
    const int64_t per = w.sizes[0] ? int64_t(w.data.size()) / w.sizes[0] : 0;
    for (size_t i = 0; i < w.data.size(); i++) w.data[i] -= row_col(in[3], int64_t(i) / per);
  }
  return conv(n, {x, w});
}

// Conv over 1 or 2 spatial axes (a 1-D one as 2-D with height 1), in double.
RefTensor conv(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const RefTensor& w = in[1];
  const size_t sp = x.sizes.size() - 2;
  const auto st = n.attr_ints("strides"), dl = n.attr_ints("dilations"), pd = n.attr_ints("pads");
  const std::string ap = n.attr_str("auto_pad", "NOTSET");
  const int64_t group = n.attr_int("group", 1);
  // Axis 0 is the height (1 for a 1-D conv), axis 1 the width.
  int64_t len[2] = {1, 1}, k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0},
          out[2] = {1, 1};
  for (size_t i = 0; i < sp; i++) {
    const size_t a = 2 - sp + i;
    len[a] = x.sizes[2 + i];
    k[a] = w.sizes[2 + i];
    s[a] = st[i];
    d[a] = dl[i];
    const ConvAxis ca = conv_axis(len[a], k[a], s[a], d[a], ap, pd[i], pd[sp + i]);
    if (ca.out < 1) {
      throw Error(n.describe() + ": input " + sizes_str(x.sizes) + " and weight " +
                  sizes_str(w.sizes) + " give no output along spatial axis " + std::to_string(i));
    }
    pb[a] = ca.pad_begin;
    out[a] = ca.out;
  }
  const int64_t N = x.sizes[0], C = x.sizes[1], M = w.sizes[0], cg = C / group, mg = M / group;
  Sizes os{N, M};
  for (size_t i = 0; i < sp; i++) os.push_back(out[2 - sp + i]);
  RefTensor y = make(n, os);
  for (int64_t b = 0; b < N; b++) {
    for (int64_t m = 0; m < M; m++) {
      const int64_t g = m / mg;
      for (int64_t oh = 0; oh < out[0]; oh++) {
        for (int64_t ow = 0; ow < out[1]; ow++) {
          double acc = in.size() > 2 ? in[2].data[size_t(m)] : 0.0;
          for (int64_t c = 0; c < cg; c++) {
            const int64_t ci = g * cg + c;
            for (int64_t kh = 0; kh < k[0]; kh++) {
              const int64_t ih = oh * s[0] - pb[0] + kh * d[0];
              if (ih < 0 || ih >= len[0]) continue;
              for (int64_t kw = 0; kw < k[1]; kw++) {
                const int64_t iw = ow * s[1] - pb[1] + kw * d[1];
                if (iw < 0 || iw >= len[1]) continue;
                acc += x.data[size_t(((b * C + ci) * len[0] + ih) * len[1] + iw)] *
                       w.data[size_t(((m * cg + c) * k[0] + kh) * k[1] + kw)];
              }
            }
          }
          y.data[size_t(((b * M + m) * out[0] + oh) * out[1] + ow)] = acc;
        }
      }
    }
  }
  return y;
}

// GroupNorm: per sample and group, the mean and variance over the group's channels and positions.
RefTensor group_norm(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const double eps = n.attr_float("eps", 1e-5);
  const int64_t groups = n.attr_int("groups", 1);
  const int64_t N = x.sizes[0], C = x.sizes[1];
  const int64_t S = C ? int64_t(x.data.size()) / std::max<int64_t>(1, N * C) : 0;
  const int64_t cg = C / groups, len = cg * S;
  RefTensor y = make(n, x.sizes);
  for (int64_t b = 0; b < N; b++) {
    for (int64_t g = 0; g < groups; g++) {
      const size_t base = size_t((b * C + g * cg) * S);
      double mean = 0, var = 0;
      for (int64_t j = 0; j < len; j++) mean += x.data[base + size_t(j)];
      mean /= double(len);
      for (int64_t j = 0; j < len; j++) {
        const double dv = x.data[base + size_t(j)] - mean;
        var += dv * dv;
      }
      var /= double(len);
      const double rstd = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < len; j++) {
        const size_t c = size_t(g * cg + j / std::max<int64_t>(1, S));
        double v = (x.data[base + size_t(j)] - mean) * rstd;
        if (in.size() > 1) v *= in[1].data[c];
        if (in.size() > 2) v += in[2].data[c];
        y.data[base + size_t(j)] = v;
      }
    }
  }
  return y;
}

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
int64_t wrap_index(const Node& n, double v, int64_t dim, int64_t d) {
  const int64_t i = int64_t(v);
  if (i < -dim || i >= dim) {
    throw Error(n.describe() + ": index " + std::to_string(i) + " is out of range for dim " +
                std::to_string(d) + " of size " + std::to_string(dim));
  }
  return i < 0 ? i + dim : i;
}

// For each m-tuple of idx (its last axis) in order: the flat offset in x of the slice it names,
// within batch `batch` of x's first b dims (GatherND) or of all of x (b = 0).
std::vector<int64_t> tuple_offsets(const Node& n, const RefTensor& x, const RefTensor& idx,
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

// Generic gather of output coordinates from one input: fn maps output coords to input coords.
template <typename F>
RefTensor remap(const Node& n, const RefTensor& x, Sizes os, F fn) {
  RefTensor y = make(n, os);
  auto xs = strides_of(x.sizes);
  Sizes coord(os.size());
  for (int64_t f = 0; f < int64_t(y.data.size()); f++) {
    int64_t t = f;
    for (size_t d = os.size(); d-- > 0;) {
      coord[d] = t % os[d];
      t /= os[d];
    }
    Sizes ic = fn(coord);
    int64_t idx = 0;
    for (size_t d = 0; d < ic.size(); d++) idx += ic[d] * xs[d];
    y.data[size_t(f)] = x.data[size_t(idx)];
  }
  return y;
}

}  // namespace

RefTensor from_tensor(const Tensor& t) {
  RefTensor r;
  r.sizes = t.sizes();
  r.dtype = t.dtype();
  r.data.resize(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); i++) r.data[size_t(i)] = t.get(i);
  return r;
}

// Concrete sizes can fail to broadcast where the symbolic shapes did (a symbol bound to 6 against
// a fixed 38): a user error, as in the executor, never a dereferenced empty optional.
static Sizes broadcast_or_throw(const Node& n, const Sizes& a, const Shape& b) {
  std::string why;
  auto s = broadcast_shapes(to_shape(a), b, &why);
  if (!s)
    throw Error(n.describe() + ": sizes " + sizes_str(a) + " and " + shape_str(b) +
                " do not broadcast: " + why);
  return static_sizes(*s);
}

std::vector<RefTensor> eval_node(const Node& n, const std::vector<RefTensor>& in,
                                 Rounding rounding) {
  const DType out_dtype = n.out()->dtype;
  // A Cast to its input's own dtype rounds nothing in CastsOnly either: graph mode's simplify
  // drops it (the value already has that dtype), so a fused kernel keeps its f32 value.
  const bool rounding_cast = n.op == OpKind::Cast && n.inputs[0]->dtype != out_dtype;
  // One node alone has no kernel boundaries: KernelBoundaries computes it as CastsOnly.
  const bool exact = rounding != Rounding::EveryOp && !rounding_cast && is_float(out_dtype);
  auto round = [&](double v) { return exact ? v : round_to(out_dtype, v); };
  // Row ops and MatMul accumulate in double; their result is stored in its dtype like any other.
  auto stored = [&](RefTensor t) -> std::vector<RefTensor> {
    if (!exact) {
      for (double& v : t.data) v = round_to(out_dtype, v);
    }
    return {t};
  };
  // y = f(x) for each element.
  auto unary = [&](auto fn) -> std::vector<RefTensor> {
    RefTensor y = make(n, in[0].sizes);
    for (size_t i = 0; i < y.data.size(); i++) y.data[i] = round(fn(in[0].data[i]));
    return {y};
  };
  // y = f(a, b, c) for each element of the broadcast inputs (c = 0 for two inputs).
  auto broadcast = [&](auto fn) -> std::vector<RefTensor> {
    Sizes os = in[0].sizes;
    for (size_t i = 1; i < in.size(); i++) {
      os = broadcast_or_throw(n, os, to_shape(in[i].sizes));
    }
    RefTensor y = make(n, os);
    std::vector<std::vector<int64_t>> st;
    for (auto& t : in) st.push_back(broadcast_strides(t.sizes, os));
    for (int64_t e = 0; e < int64_t(y.data.size()); e++) {
      double a = in[0].data[size_t(bcast_index(e, os, st[0]))];
      double b = in[1].data[size_t(bcast_index(e, os, st[1]))];
      double c = in.size() > 2 ? in[2].data[size_t(bcast_index(e, os, st[2]))] : 0.0;
      y.data[size_t(e)] = round(fn(a, b, c));
    }
    return {y};
  };
  // One case per op, the elementwise math ones included: an op without one fails the build.
  switch (n.op) {
    case OpKind::Neg:
      return unary([](double x) { return -x; });
    case OpKind::Abs:
      return unary([](double x) { return std::fabs(x); });
    case OpKind::Exp:
      return unary([](double x) { return std::exp(x); });
    case OpKind::Log:
      return unary([](double x) { return std::log(x); });
    case OpKind::Sqrt:
      return unary([](double x) { return std::sqrt(x); });
    case OpKind::Rsqrt:
      return unary([](double x) { return 1.0 / std::sqrt(x); });
    case OpKind::Reciprocal:
      return unary([](double x) { return 1.0 / x; });
    case OpKind::Tanh:
      return unary([](double x) { return std::tanh(x); });
    case OpKind::Sigmoid:
      return unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
    case OpKind::Relu:
      return unary([](double x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0); });
    case OpKind::Silu:
      return unary([](double x) { return x / (1.0 + std::exp(-x)); });
    case OpKind::Erf:
      return unary([](double x) { return std::erf(x); });
    case OpKind::Sin:
      return unary([](double x) { return std::sin(x); });
    case OpKind::Cos:
      return unary([](double x) { return std::cos(x); });
    case OpKind::Tan:
      return unary([](double x) { return std::tan(x); });
    case OpKind::Asin:
      return unary([](double x) { return std::asin(x); });
    case OpKind::Acos:
      return unary([](double x) { return std::acos(x); });
    case OpKind::Atan:
      return unary([](double x) { return std::atan(x); });
    case OpKind::Sinh:
      return unary([](double x) { return std::sinh(x); });
    case OpKind::Cosh:
      return unary([](double x) { return std::cosh(x); });
    case OpKind::Asinh:
      return unary([](double x) { return std::asinh(x); });
    case OpKind::Acosh:
      return unary([](double x) { return std::acosh(x); });
    case OpKind::Atanh:
      return unary([](double x) { return std::atanh(x); });
    case OpKind::Floor:
      return unary([](double x) { return std::floor(x); });
    case OpKind::Ceil:
      return unary([](double x) { return std::ceil(x); });
    case OpKind::Round:  // ties to even (the default rounding mode)
      return unary([](double x) { return std::nearbyint(x); });
    case OpKind::Sign:
      return unary([](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; });
    case OpKind::IsNaN:
      return unary([](double x) { return std::isnan(x) ? 1.0 : 0.0; });
    case OpKind::IsInf:
      return unary([](double x) { return std::isinf(x) ? 1.0 : 0.0; });
    case OpKind::Gelu:
      // As x sigmoid(2u) and with erfc: 1 + tanh(u) and 1 + erf(x/sqrt(2)) cancel even in
      // double for large negative x (x = -7: 1 + tanh(u) is 6e-17, off by a third).
      if (n.attr_str("approximate", "none") == "tanh") {
        return unary([](double x) {
          return x / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        });
      }
      return unary([](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
    case OpKind::Pow: {
      const double e = n.attr_float("exponent", 1);
      return unary([e](double x) { return std::pow(x, e); });
    }
    case OpKind::Cast:
      if (is_float(n.inputs[0]->dtype) && !is_float(out_dtype) && out_dtype != DType::boolean) {
        // float -> integer: toward zero, saturated to the target's range, NaN -> 0 (the kernel)
        double lo = out_dtype == DType::i64   ? -9223372036854775808.0
                    : out_dtype == DType::i32 ? -2147483648.0
                                              : qmin(out_dtype);
        double hi = out_dtype == DType::i64   ? 9223372036854775807.0
                    : out_dtype == DType::i32 ? 2147483647.0
                                              : qmax(out_dtype);
        return unary([lo, hi](double x) {
          return std::isnan(x) ? 0.0 : std::min(hi, std::max(lo, std::trunc(x)));
        });
      }
      return unary([](double x) { return x; });
    case OpKind::Not:
      return unary([](double x) { return x != 0 ? 0.0 : 1.0; });
    case OpKind::Add:
      return broadcast([](double a, double b, double) { return a + b; });
    case OpKind::Sub:
      return broadcast([](double a, double b, double) { return a - b; });
    case OpKind::Mul:
      return broadcast([](double a, double b, double) { return a * b; });
    case OpKind::Div:
      return broadcast([](double a, double b, double) { return a / b; });
    case OpKind::Max:
      return broadcast([](double a, double b, double) {
        return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
      });
    case OpKind::Min:
      return broadcast([](double a, double b, double) {
        return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
      });
    case OpKind::Mod:  // the sign of b; a zero takes it too (numpy's mod)
      return broadcast([](double a, double b, double) {
        double r = std::fmod(a, b);
        if (r != 0 && (r < 0) != (b < 0)) r += b;
        return r == 0 ? std::copysign(0.0, b) : r;
      });
    case OpKind::Fmod:
      return broadcast([](double a, double b, double) { return std::fmod(a, b); });
    case OpKind::PowTensor:
      return broadcast([](double a, double b, double) { return std::pow(a, b); });
    case OpKind::Equal:
      return broadcast([](double a, double b, double) { return a == b ? 1.0 : 0.0; });
    case OpKind::Less:
      return broadcast([](double a, double b, double) { return a < b ? 1.0 : 0.0; });
    case OpKind::Greater:
      return broadcast([](double a, double b, double) { return a > b ? 1.0 : 0.0; });
    case OpKind::Where:
      return broadcast([](double a, double b, double c) { return a != 0 ? b : c; });
    case OpKind::LayerNorm:
      return stored(layer_norm(n, in));
    case OpKind::RMSNorm:
      return stored(rms_norm(n, in));
    case OpKind::Softmax:
      return stored(softmax(n, in[0]));
    case OpKind::ReduceSum:
      return stored(reduce_sum(n, in[0], false));
    case OpKind::ReduceMean:
      return stored(reduce_sum(n, in[0], true));
    case OpKind::ReduceMax:
      return stored(reduce_max(n, in[0]));
    case OpKind::ReduceProd:
      return stored(reduce_prod(n, in[0]));
    case OpKind::MatMul:
      return stored(matmul(n, in));
    case OpKind::GatherElements: {
      const RefTensor& x = in[0];
      const RefTensor& idx = in[1];
      const int64_t ax = n.attr_int("axis", 0), dim = x.sizes[size_t(ax)];
      auto ist = strides_of(idx.sizes);
      return {remap(n, x, idx.sizes, [&](const Sizes& c) {
        int64_t f = 0;
        for (size_t d = 0; d < c.size(); d++) f += c[d] * ist[d];
        int64_t v = int64_t(idx.data[size_t(f)]);
        if (v < -dim || v >= dim) {
          throw Error(n.describe() + ": index " + std::to_string(v) +
                      " is out of range for axis size " + std::to_string(dim));
        }
        Sizes xc = c;
        xc[size_t(ax)] = v < 0 ? v + dim : v;
        return xc;
      })};
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
      const RefTensor& x = in[0];
      const int64_t ax = n.attr_int("axis", 0);
      const bool last = n.attr_int("select_last_index", 0) != 0, max = n.op == OpKind::ArgMax;
      // From the input's sizes: the graph's shape may be symbolic.
      Sizes os = x.sizes;
      if (n.attr_int("keepdims", 1)) {
        os[size_t(ax)] = 1;
      } else {
        os.erase(os.begin() + ax);
      }
      const int64_t len = x.sizes[size_t(ax)];
      int64_t inner = 1;
      for (size_t d = size_t(ax) + 1; d < x.sizes.size(); d++) inner *= x.sizes[d];
      RefTensor y = make(n, os);
      for (size_t o = 0; o < y.data.size(); o++) {
        const int64_t outer = int64_t(o) / inner, in_i = int64_t(o) % inner;
        int64_t best = 0;
        double bv = x.data[size_t(outer * len * inner + in_i)];
        for (int64_t k = 1; k < len; k++) {
          double v = x.data[size_t((outer * len + k) * inner + in_i)];
          // Ordered comparisons: a NaN is never the extreme unless it comes first.
          if (max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv))) {
            best = k;
            bv = v;
          }
        }
        y.data[o] = double(best);
      }
      return {y};
    }
    case OpKind::CumSum: {
      const RefTensor& x = in[0];
      const int64_t r = int64_t(x.sizes.size());
      int64_t ax = in.size() > 1 ? ints_of(in[1]).at(0) : n.attr_int("axis", 0);
      if (ax < -r || ax >= r) {
        throw Error(n.describe() + ": axis " + std::to_string(ax) +
                    " is out of range for the input shape " + sizes_str(x.sizes));
      }
      if (ax < 0) ax += r;
      const int64_t len = x.sizes[size_t(ax)];
      const bool excl = n.attr_int("exclusive", 0) != 0, rev = n.attr_int("reverse", 0) != 0;
      int64_t inner = 1;
      for (size_t d = size_t(ax) + 1; d < x.sizes.size(); d++) inner *= x.sizes[d];
      RefTensor y = make(n, x.sizes);
      const int64_t lines = len * inner != 0 ? int64_t(x.data.size()) / len : 0;
      for (int64_t l = 0; l < lines; l++) {
        const int64_t base = (l / inner) * len * inner + l % inner;
        double s = 0;
        for (int64_t k = 0; k < len; k++) {
          const size_t i = size_t(base + (rev ? len - 1 - k : k) * inner);
          if (excl) {
            y.data[i] = s;
            s += x.data[i];
          } else {
            s += x.data[i];
            y.data[i] = s;
          }
        }
      }
      return stored(y);
    }
    case OpKind::TopK:
      return top_k(n, in);
    case OpKind::GatherND:
      return {gather_nd(n, in)};
    case OpKind::ScatterND:
    case OpKind::ScatterElements:
      return stored(scatter(n, in));
    case OpKind::Conv:
      return stored(conv(n, in));
    case OpKind::Resize: {
      RefTensor y = resize(n, in);
      if (!exact) {
        for (double& v : y.data) v = round_to(out_dtype, v);
      }
      return {y};
    }
    case OpKind::MaxPool:
    case OpKind::AveragePool: {
      std::vector<RefTensor> r = pool(n, in[0]);
      if (!exact) {
        for (double& v : r[0].data) v = round_to(out_dtype, v);
      }
      return r;
    }
    case OpKind::QuantizeLinear:
      return {quantize_linear(n, in)};
    case OpKind::DequantizeLinear:
      return {dequantize_linear(n, in)};
    case OpKind::DynamicQuantizeLinear:
      return dynamic_quantize_linear(in[0]);
    case OpKind::MatMulInteger:
      return {matmul_integer(n, in)};
    case OpKind::QLinearMatMul:
      return {qlinear_matmul(n, in)};
    case OpKind::DynamicQuantMatMul:
      return {dynamic_quant_matmul(n, in)};
    case OpKind::DynamicQuantConv:
      return {dynamic_quant_conv(n, in)};
    case OpKind::ConvInteger:
      return {conv_integer(n, in)};
    case OpKind::GroupNorm:
      return stored(group_norm(n, in));
    case OpKind::Gather: {
      const RefTensor& x = in[0];
      const RefTensor& idx = in[1];
      int64_t ax = n.attr_int("axis", 0);
      Sizes os(x.sizes.begin(), x.sizes.begin() + ax);
      os.insert(os.end(), idx.sizes.begin(), idx.sizes.end());
      os.insert(os.end(), x.sizes.begin() + ax + 1, x.sizes.end());
      size_t q = idx.sizes.size();
      auto ist = strides_of(idx.sizes);
      return {remap(n, x, os, [&](const Sizes& c) {
        Sizes ic(c.begin(), c.begin() + ax);
        int64_t f = 0;
        for (size_t d = 0; d < q; d++) f += c[size_t(ax) + d] * ist[d];
        int64_t v = int64_t(idx.data[size_t(f)]);
        if (v < 0) v += x.sizes[size_t(ax)];
        if (v < 0 || v >= x.sizes[size_t(ax)]) {
          throw Error(n.describe() + ": index " + std::to_string(int64_t(idx.data[size_t(f)])) +
                      " is out of range for axis size " + std::to_string(x.sizes[size_t(ax)]));
        }
        ic.push_back(v);
        ic.insert(ic.end(), c.begin() + ax + q, c.end());
        return ic;
      })};
    }
    case OpKind::Reshape: {
      RefTensor y = in[0];
      std::vector<Dim> target;
      if (in.size() > 1) {
        for (int64_t v : ints_of(in[1])) target.emplace_back(v);
      } else {
        for (int64_t v : n.attr_ints("shape")) target.emplace_back(v);
      }
      std::string why;
      auto s = reshape_target(to_shape(in[0].sizes), target, n.attr_int("allowzero", 0) != 0, &why);
      if (!s) {
        throw Error(n.describe() + ": cannot reshape " + sizes_str(in[0].sizes) + " to " +
                    shape_str(target) + ": " + why);
      }
      y.sizes = static_sizes(*s);
      y.dtype = n.out()->dtype;
      return {y};
    }
    case OpKind::Transpose: {
      auto perm = in.size() > 1 ? ints_of(in[1]) : n.attr_ints("perm");
      Sizes sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      bool is_perm = sorted.size() == in[0].sizes.size();
      for (size_t i = 0; is_perm && i < sorted.size(); i++) is_perm = sorted[i] == int64_t(i);
      if (!is_perm) {
        throw Error(n.describe() + ": perm " + sizes_str(perm) +
                    " is not a permutation of the axes of " + sizes_str(in[0].sizes));
      }
      Sizes os;
      for (auto p : perm) os.push_back(in[0].sizes[size_t(p)]);
      return {remap(n, in[0], os, [&](const Sizes& c) {
        Sizes ic(c.size());
        for (size_t d = 0; d < c.size(); d++) ic[size_t(perm[d])] = c[d];
        return ic;
      })};
    }
    case OpKind::Slice: {
      const bool operands = in.size() > 1;
      auto starts = operands ? ints_of(in[1]) : n.attr_ints("starts");
      auto ends = operands ? ints_of(in[2]) : n.attr_ints("ends");
      auto axes = operands ? ints_of(in[3]) : n.attr_ints("axes");
      auto steps = operands ? ints_of(in[4]) : n.attr_ints("steps");
      const int64_t r = int64_t(in[0].sizes.size());
      Sizes os = in[0].sizes, st(os.size(), 0), sp(os.size(), 1);
      for (size_t i = 0; i < starts.size(); i++) {
        if (axes[i] < -r || axes[i] >= r || steps[i] == 0) {
          throw Error(n.describe() + ": axis " + std::to_string(axes[i]) + " or step " +
                      std::to_string(steps[i]) + " is invalid for " + sizes_str(in[0].sizes));
        }
        size_t a = size_t(axes[i] < 0 ? axes[i] + r : axes[i]);
        int64_t d = in[0].sizes[a];
        os[a] = slice_length(d, starts[i], ends[i], steps[i]);
        st[a] = slice_start(d, starts[i], steps[i]);
        sp[a] = steps[i];
      }
      return {remap(n, in[0], os, [&](const Sizes& c) {
        Sizes ic(c.size());
        for (size_t d = 0; d < c.size(); d++) ic[d] = st[d] + c[d] * sp[d];
        return ic;
      })};
    }
    case OpKind::Concat: {
      int64_t ax = n.attr_int("axis", 0);
      Sizes os = in[0].sizes;
      os[size_t(ax)] = 0;
      for (auto& t : in) os[size_t(ax)] += t.sizes[size_t(ax)];
      RefTensor y = make(n, os);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < ax; d++) outer *= os[size_t(d)];
      for (size_t d = size_t(ax) + 1; d < os.size(); d++) inner *= os[d];
      int64_t off = 0;
      for (auto& t : in) {
        int64_t len = t.sizes[size_t(ax)] * inner;
        for (int64_t o = 0; o < outer; o++) {
          for (int64_t j = 0; j < len; j++) {
            y.data[size_t(o * os[size_t(ax)] * inner + off + j)] = t.data[size_t(o * len + j)];
          }
        }
        off += len;
      }
      return {y};
    }
    case OpKind::Expand: {
      Sizes os = in[0].sizes;
      auto tgt = in.size() > 1 ? ints_of(in[1]) : n.attr_ints("shape");
      Shape t;
      for (auto v : tgt) t.emplace_back(int64_t(v == -1 ? 1 : v));  // GCC 12: see importer.cc
      os = broadcast_or_throw(n, os, t);
      auto st = broadcast_strides(in[0].sizes, os);
      RefTensor y = make(n, os);
      for (int64_t f = 0; f < int64_t(y.data.size()); f++) {
        y.data[size_t(f)] = in[0].data[size_t(bcast_index(f, os, st))];
      }
      return {y};
    }
    case OpKind::Pad: {  // exact in every dtype: moves and the fill value
      const auto pads = in.size() > 2 ? ints_of(in[2]) : n.attr_ints("pads");
      const PadMode mode = *parse_pad_mode(n.attr_str("mode", "constant"));
      const double fill = in.size() > 1 ? in[1].data.at(0) : 0.0;
      const Sizes& xs = in[0].sizes;
      const size_t r = xs.size();
      Sizes os(r);
      if (pads.size() != 2 * r) {
        throw Error(n.describe() + ": pads " + sizes_str(pads) +
                    " do not have two values per axis of " + sizes_str(xs));
      }
      for (size_t i = 0; i < r; i++) os[i] = xs[i] + pads[i] + pads[r + i];
      for (size_t i = 0; i < r; i++) {
        if (os[i] < 0 || (mode != PadMode::Constant && xs[i] == 0 && os[i] > 0)) {
          throw Error(n.describe() + ": pads " + sizes_str(pads) + " do not fit input " +
                      sizes_str(xs));
        }
      }
      RefTensor y = make(n, os);
      auto xst = strides_of(xs);
      for (int64_t f = 0; f < int64_t(y.data.size()); f++) {
        int64_t t = f, idx = 0;
        bool filled = false;
        for (size_t a = r; a-- > 0;) {
          const int64_t src = pad_source(t % os[a] - pads[a], xs[a], mode);
          t /= os[a];
          if (src < 0) filled = true;
          idx += src * xst[a];
        }
        y.data[size_t(f)] = filled ? fill : in[0].data[size_t(idx)];
      }
      return {y};
    }
    case OpKind::RotateHalf: {  // exact in every dtype: a move and a sign
      RefTensor y = make(n, in[0].sizes);
      const int64_t d = in[0].sizes.empty() ? 0 : in[0].sizes.back();
      const int64_t r = n.attr_int("rotary_dims", 0) == 0 ? d : n.attr_int("rotary_dims", 0);
      const bool pairs = n.attr_int("interleaved", 0) != 0;
      for (int64_t f = 0; f < int64_t(y.data.size()); f++) {
        const int64_t row = f - f % d, j = f % d;
        double v = 0;  // columns past the rotated ones
        if (j < r && pairs) {
          v = j % 2 == 0 ? -in[0].data[size_t(row + j + 1)] : in[0].data[size_t(row + j - 1)];
        } else if (j < r) {
          v = j < r / 2 ? -in[0].data[size_t(row + j + r / 2)]
                        : in[0].data[size_t(row + j - r / 2)];
        }
        y.data[size_t(f)] = v;
      }
      return {y};
    }
    case OpKind::Shape: {
      const int64_t r = int64_t(in[0].sizes.size());
      auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
      const int64_t a = clampi(n.attr_int("start", 0)), b = clampi(n.attr_int("end", r));
      RefTensor y = make(n, {std::max<int64_t>(0, b - a)});
      for (int64_t i = a; i < b; i++) y.data[size_t(i - a)] = double(in[0].sizes[size_t(i)]);
      return {y};
    }
    case OpKind::Range: {
      const double start = in[0].data.at(0), limit = in[1].data.at(0), delta = in[2].data.at(0);
      if (delta == 0) throw Error(n.describe() + ": delta is 0");
      const int64_t len = std::max<int64_t>(0, int64_t(std::ceil((limit - start) / delta)));
      RefTensor y = make(n, {len});
      for (int64_t i = 0; i < len; i++) y.data[size_t(i)] = round(start + double(i) * delta);
      return {y};
    }
    case OpKind::AxesShape: {
      std::string why;
      auto out = axes_shape(n.attr_str("mode", ""), to_shape(ints_of(in[0])), ints_of(in[1]),
                            n.attr_int("axis", 0), &why);
      if (!out) throw Error(n.describe() + ": " + why);
      RefTensor y = make(n, {int64_t(out->size())});
      for (size_t i = 0; i < out->size(); i++) y.data[i] = double((*out)[i].value());
      return {y};
    }
    case OpKind::ConstantOfShape: {
      Sizes os = ints_of(in[0]);
      for (int64_t d : os) {
        if (d < 0) throw Error(n.describe() + ": shape " + sizes_str(os) + " has a negative dim");
      }
      RefTensor y = make(n, os);
      std::fill(y.data.begin(), y.data.end(), n.payload.get(0));
      return {y};
    }
    case OpKind::If: {
      // The taken branch, node by node, on the captured inputs.
      UBF_CHECK(!in[0].data.empty(), n.describe() + ": empty condition");
      const size_t b = in[0].data[0] != 0 ? 0 : 1;
      const Graph& g = *n.branches[b];
      std::vector<int64_t> map = n.attr_ints(b == 0 ? "then_inputs" : "else_inputs");
      std::map<const Value*, RefTensor> vals;
      for (size_t j = 0; j < map.size(); j++) vals[g.inputs()[j]] = in[size_t(map[j])];
      for (const Node* m : g.topo_order()) {
        std::vector<RefTensor> mi;
        for (const Value* v : m->inputs) mi.push_back(vals.at(v));
        std::vector<RefTensor> mo = eval_node(*m, mi, rounding);
        for (size_t k = 0; k < mo.size(); k++) vals[m->outputs[k]] = std::move(mo[k]);
      }
      std::vector<RefTensor> out;
      for (auto& [name, v] : g.outputs()) out.push_back(vals.at(v));
      return out;
    }
    case OpKind::Constant:
      return {from_tensor(n.payload)};
    case OpKind::Host: {
      Tensor t(in[0].dtype, in[0].sizes);
      for (int64_t i = 0; i < t.numel(); i++) t.set(i, in[0].data[size_t(i)]);
      n.host(t);
      return {from_tensor(t)};
    }
  }
  UBF_CHECK(false, "ref eval_node: unhandled op " + std::string(op_name(n.op)));
}

std::map<std::string, RefTensor> run_graph(const Graph& g,
                                           const std::map<std::string, Tensor>& inputs,
                                           Rounding rounding, Jitter jitter,
                                           const KernelOfNode* kernel_of) {
  const bool boundaries = rounding == Rounding::KernelBoundaries;
  if (boundaries && !kernel_of)
    throw Error("reference: KernelBoundaries needs a node-to-kernel map");
  // Whether node `reader` reads v from another kernel than v's producer (graph mode stores v).
  auto crosses = [&](const Value* v, const Node& reader) {
    if (!v->producer || !is_float(v->dtype)) return false;
    auto p = kernel_of->find(v->producer->name), r = kernel_of->find(reader.name);
    return p != kernel_of->end() && r != kernel_of->end() && p->second != r->second;
  };
  // Each op computes as CastsOnly; KernelBoundaries rounds at the reads that cross kernels.
  const Rounding op_rounding = boundaries ? Rounding::CastsOnly : rounding;
  std::map<const Value*, RefTensor> vals;
  for (auto* in : g.inputs()) {
    auto it = inputs.find(in->name);
    if (it == inputs.end()) throw Error("reference: missing input '" + in->name + "'");
    vals[in] = from_tensor(it->second);
  }
  uint64_t node_index = 0;
  uint32_t computing_index = 0;
  for (Node* n : g.topo_order()) {
    node_index++;
    std::vector<RefTensor> ins;
    for (auto* v : n->inputs) {
      ins.push_back(vals.at(v));
      if (boundaries && crosses(v, *n)) {
        for (double& x : ins.back().data) x = round_to(v->dtype, x);
      }
    }
    const bool nudgeable = jitterable(*n);
    if (nudgeable) computing_index++;
    const bool jittered =
        jitter.rel != 0 && nudgeable && (jitter.node == 0 || jitter.node == computing_index);
    // A jittered node is nudged before it is rounded to its dtype: a bf16 result nudged after
    // rounding would round back to itself, hiding a kernel's f32 value on the other side of a
    // rounding boundary. (CastsOnly leaves float results exact; `jittered` excludes casts.)
    auto outs = eval_node(*n, ins, jittered ? Rounding::CastsOnly : op_rounding);
    // A MatMul or Conv writes its result in its dtype in graph mode too (oneDNN's destination,
    // which a fused epilogue then reads), as the own kernels of GroupNorm, CumSum, Resize and the
    // Scatters do, so CastsOnly rounds it as EveryOp does.
    const bool stored = op_rounding == Rounding::EveryOp || n->op == OpKind::MatMul ||
                        n->op == OpKind::Conv || n->op == OpKind::DynamicQuantMatMul ||
                        n->op == OpKind::DynamicQuantConv || n->op == OpKind::GroupNorm ||
                        n->op == OpKind::AveragePool || n->op == OpKind::ReduceProd ||
                        n->op == OpKind::Resize || n->op == OpKind::CumSum ||
                        n->op == OpKind::ScatterND || n->op == OpKind::ScatterElements;
    for (size_t i = 0; i < outs.size(); i++) {
      const bool is_f = is_float(n->outputs[i]->dtype);
      if (jittered && is_f) {
        nudge_results(g, *n, jitter, node_index, ins.empty() ? nullptr : &ins[0].data,
                      outs[i].data);
      }
      // EveryOp stores every result in its dtype, nudged or not (eval_node rounded the others).
      if (stored && is_f && (jittered || op_rounding == Rounding::CastsOnly)) {
        for (double& v : outs[i].data) v = round_to(n->outputs[i]->dtype, v);
      }
      outs[i].dtype = n->outputs[i]->dtype;
      vals[n->outputs[i]] = std::move(outs[i]);
    }
  }
  std::map<std::string, RefTensor> out;
  for (auto& [name, v] : g.outputs()) out[name] = vals.at(v);
  return out;
}

double tolerance(DType t) {
  switch (t) {
    case DType::f32:
      return 1e-4;
    case DType::bf16:
      return 3e-2;
    case DType::f16:
      return 4e-3;
    default:
      return 0;
  }
}

double max_abs_diff(const Tensor& got, const RefTensor& want) {
  if (got.sizes() != want.sizes) {
    throw Error("max_abs_diff: sizes " + sizes_str(got.sizes()) + " vs " + sizes_str(want.sizes));
  }
  double m = 0;
  for (int64_t i = 0; i < got.numel(); i++) {
    double a = got.get(i), b = want.data[size_t(i)];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(a) && std::isinf(b) && (a > 0) == (b > 0)) continue;
    double d = std::fabs(a - b);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace ubfuse::ref
