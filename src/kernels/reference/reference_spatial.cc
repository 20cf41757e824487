// Reference pooling, resizing, convolution and GroupNorm, in double (reference_ops.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ir/shape_util.h"
#include "kernels/reference/reference_ops.h"
#include "ubfuse/error.h"

namespace ubfuse::ref::detail {

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

// Conv over 1, 2 or 3 spatial axes (fewer as 3 with leading lengths of 1), in double.
RefTensor conv(const Node& n, const std::vector<RefTensor>& in) {
  const RefTensor& x = in[0];
  const RefTensor& w = in[1];
  const size_t sp = x.sizes.size() - 2;
  if (sp < 1 || sp > 3) throw Error(n.describe() + ": Conv over 1, 2 or 3 spatial axes");
  const auto st = n.attr_ints("strides"), dl = n.attr_ints("dilations"), pd = n.attr_ints("pads");
  const std::string ap = n.attr_str("auto_pad", "NOTSET");
  const int64_t group = n.attr_int("group", 1);
  // Axes 0, 1, 2: depth, height, width (1 where the conv has fewer).
  int64_t len[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1},
          pb[3] = {0, 0, 0}, out[3] = {1, 1, 1};
  for (size_t i = 0; i < sp; i++) {
    const size_t a = 3 - sp + i;
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
  for (size_t i = 0; i < sp; i++) os.push_back(out[3 - sp + i]);
  RefTensor y = make(n, os);
  const int64_t osz = out[0] * out[1] * out[2], isz = len[0] * len[1] * len[2],
                ksz = k[0] * k[1] * k[2];
  for (int64_t b = 0; b < N; b++) {
    for (int64_t m = 0; m < M; m++) {
      const int64_t g = m / mg;
      for (int64_t o = 0; o < osz; o++) {
        const int64_t oz = o / (out[1] * out[2]), oh = o / out[2] % out[1], ow = o % out[2];
        double acc = in.size() > 2 ? in[2].data[size_t(m)] : 0.0;
        for (int64_t c = 0; c < cg; c++) {
          const int64_t ci = g * cg + c;
          // Padding is zero-valued input (ONNX), so a tap on it adds 0 * w: NaN for a NaN or
          // infinite weight, as oneDNN's kernels compute it.
          for (int64_t kz = 0; kz < k[0]; kz++) {
            const int64_t iz = oz * s[0] - pb[0] + kz * d[0];
            for (int64_t kh = 0; kh < k[1]; kh++) {
              const int64_t ih = oh * s[1] - pb[1] + kh * d[1];
              for (int64_t kw = 0; kw < k[2]; kw++) {
                const int64_t iw = ow * s[2] - pb[2] + kw * d[2];
                const bool in_x =
                    iz >= 0 && iz < len[0] && ih >= 0 && ih < len[1] && iw >= 0 && iw < len[2];
                const double xv =
                    in_x ? x.data[size_t((b * C + ci) * isz + (iz * len[1] + ih) * len[2] + iw)]
                         : 0.0;
                acc += xv * w.data[size_t((m * cg + c) * ksz + (kz * k[1] + kh) * k[2] + kw)];
              }
            }
          }
        }
        y.data[size_t((b * M + m) * osz + o)] = acc;
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

}  // namespace ubfuse::ref::detail
