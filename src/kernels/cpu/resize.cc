// Resize (ONNX Resize and Upsample): each output element is a weighted sum of input taps, and the
// weights are separable over the axes. Per run, each axis gets a table: for every output
// coordinate its taps (input offset, weight), worked out in double from ONNX's coordinate
// formulas, or a mark that the coordinate lies outside the input (tf_crop_and_resize's
// extrapolation). The output then sums the products of the axes' taps over an f32 copy of the
// input, rows split over the pool: per output row the outer axes' taps are multiplied out once,
// then each element sums them against the last axis' taps. Nearest is one tap per axis, a
// gather. Resize is rare in transformer inference (vision front ends), so a clear loop is
// preferred over a tuned one.
#include <algorithm>
#include <cmath>

#include "ir/shape_util.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

// Keys' cubic convolution kernel with coefficient a (ONNX's cubic_coeff_a).
double cubic_weight(double d, double a) {
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

struct AxisTaps {
  std::vector<int64_t> first;    // output coordinate o's taps: [first[o], first[o + 1])
  std::vector<int64_t> offset;   // input index times the axis' stride
  std::vector<double> weight;    // a tap's weight
  std::vector<uint8_t> outside;  // tf_crop_and_resize: the coordinate is outside the input
};

class ResizeKernel : public KernelBase {
 public:
  explicit ResizeKernel(const Node& n)
      : KernelBase(n),
        mode_(*parse_resize_mode(n.attr_str("mode", "nearest"))),
        coord_(*parse_resize_coord(n.attr_str("coordinate_transformation_mode", "half_pixel"))),
        nearest_(*parse_resize_nearest(n.attr_str("nearest_mode", "round_prefer_floor"))),
        a_(n.attr_float("cubic_coeff_a", -0.75)),
        extrapolation_(n.attr_float("extrapolation_value", 0.0)),
        exclude_outside_(n.attr_int("exclude_outside", 0) != 0),
        antialias_(n.attr_int("antialias", 0) != 0),
        axes_(n.attr_ints("axes")),
        policy_(n.attr_str("keep_aspect_ratio_policy", "stretch")) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 3, out);
    const Tensor& x = in[0];
    Tensor& y = out[0];
    const Tensor& v = in[1];
    const bool sizes = !is_float(v.dtype());
    std::vector<double> values;
    for (int64_t i = 0; i < v.numel(); i++) values.push_back(v.get(i));
    std::string why;
    auto g = resize_geometry(x.sizes(), values, sizes, axes_, policy_, &why);
    if (!g) fail(why);
    if (y.sizes() != g->out || y.dtype() != x.dtype()) {
      fail("output " + tensors_str({y}) + " does not match " + tensors_str({x}) + " resized to " +
           sizes_str(g->out));
    }
    const size_t r = size_t(x.rank());
    // roi per axis: [start, end] of the input, in its relative coordinates (the whole by default).
    std::vector<double> start(r, 0.0), end(r, 1.0);
    if (in.size() > 2 && coord_ == ResizeCoord::TfCropAndResize) {
      const Tensor& roi = in[2];
      if (roi.numel() != 2 * int64_t(axes_.size())) {
        fail("roi " + tensors_str({roi}) + " must hold " + std::to_string(2 * axes_.size()) +
                 " values",
             "roi lists every resized axis' start, then every one's end");
      }
      for (size_t i = 0; i < axes_.size(); i++) {
        start[size_t(axes_[i])] = roi.get(int64_t(i));
        end[size_t(axes_[i])] = roi.get(int64_t(axes_.size() + i));
      }
    }
    if (y.numel() == 0) return;
    std::vector<AxisTaps> taps(r);
    int64_t stride = 1, per_elem = 1;
    for (size_t a = r; a-- > 0;) {
      taps[a] = axis_taps(x.dim(int(a)), y.dim(int(a)), g->scales[a], start[a], end[a], stride);
      stride *= x.dim(int(a));
      per_elem *= std::max<int64_t>(1, int64_t(taps[a].offset.size()) / y.dim(int(a)));
    }
    std::vector<float> xf(size_t(x.numel())), yf(size_t(y.numel()));
    convert_floats(x.dtype(), x.data(), DType::f32, xf.data(), x.numel(), pool);
    const int64_t cols = y.dim(-1), rows = y.numel() / cols;
    const AxisTaps& last = taps[r - 1];
    pool.parallel_for(rows, grain_for(cols * per_elem), [&](int64_t lo, int64_t hi, int) {
      // A row's outer taps: the products of the taps of the axes before the last, as (input
      // offset, weight) pairs, then each output of the row sums them against the last axis' taps.
      std::vector<std::pair<int64_t, double>> outer, next;
      for (int64_t row = lo; row < hi; row++) {
        int64_t rem = row;
        bool outside = false;
        outer.assign(1, {0, 1.0});
        for (size_t a = r - 1; a-- > 0;) {
          const int64_t oc = rem % y.dim(int(a));
          rem /= y.dim(int(a));
          const AxisTaps& t = taps[a];
          outside = outside || t.outside[size_t(oc)];
          next.clear();
          for (int64_t k = t.first[size_t(oc)]; k < t.first[size_t(oc) + 1]; k++) {
            for (auto [off, w] : outer) {
              next.push_back({off + t.offset[size_t(k)], w * t.weight[size_t(k)]});
            }
          }
          outer.swap(next);
        }
        float* yr = yf.data() + row * cols;
        for (int64_t j = 0; j < cols; j++) {
          if (outside || last.outside[size_t(j)]) {
            yr[j] = float(extrapolation_);
            continue;
          }
          double acc = 0;
          for (int64_t k = last.first[size_t(j)]; k < last.first[size_t(j) + 1]; k++) {
            const float* xk = xf.data() + last.offset[size_t(k)];
            double part = 0;
            for (auto [off, w] : outer) part += w * double(xk[off]);
            acc += last.weight[size_t(k)] * part;
          }
          yr[j] = float(acc);
        }
      }
    });
    convert_floats(DType::f32, yf.data(), y.dtype(), y.data(), y.numel(), pool);
  }

 private:
  // Where output coordinate o of an axis of n inputs and m outputs (scale s) samples the input.
  double source(int64_t o, int64_t n, int64_t m, double s, double st, double en) const {
    const double xo = double(o);
    switch (coord_) {
      case ResizeCoord::HalfPixel:
        return (xo + 0.5) / s - 0.5;
      case ResizeCoord::HalfPixelSymmetric: {
        const double adjust = double(m) / (s * double(n)), center = double(n) / 2;
        return center * (1 - adjust) + (xo + 0.5) / s - 0.5;
      }
      // These two take the resized length as in * scale, unrounded, as ONNX's reference does.
      case ResizeCoord::PytorchHalfPixel:
        return s * double(n) > 1 ? (xo + 0.5) / s - 0.5 : 0.0;
      case ResizeCoord::AlignCorners:
        return s * double(n) == 1 ? 0.0 : xo * double(n - 1) / (s * double(n) - 1);
      case ResizeCoord::Asymmetric:
        return xo / s;
      case ResizeCoord::TfHalfPixelForNN:
        return (xo + 0.5) / s;
      case ResizeCoord::TfCropAndResize:
        return m > 1 ? st * double(n - 1) + xo * (en - st) * double(n - 1) / double(m - 1)
                     : 0.5 * (st + en) * double(n - 1);
    }
    return 0;
  }

  AxisTaps axis_taps(int64_t n, int64_t m, double s, double st, double en, int64_t stride) const {
    AxisTaps t;
    t.first.push_back(0);
    t.outside.assign(size_t(m), 0);
    auto add = [&](int64_t i, double w) {
      t.offset.push_back(std::clamp<int64_t>(i, 0, n - 1) * stride);
      t.weight.push_back(w);
    };
    std::vector<double> w;
    for (int64_t o = 0; o < m; o++) {
      const double xo = source(o, n, m, s, st, en);
      // (NaN from a NaN roi is outside too.)
      if (coord_ == ResizeCoord::TfCropAndResize && !(xo >= 0 && xo <= double(n - 1))) {
        t.outside[size_t(o)] = 1;
      } else if (mode_ == ResizeMode::Nearest) {
        const double fl = std::floor(xo), f = xo - fl;
        double pick = fl;
        switch (nearest_) {
          case ResizeNearest::RoundPreferFloor:
            pick = f > 0.5 ? fl + 1 : fl;
            break;
          case ResizeNearest::RoundPreferCeil:
            pick = f >= 0.5 ? fl + 1 : fl;
            break;
          case ResizeNearest::Floor:
            pick = fl;
            break;
          case ResizeNearest::Ceil:
            pick = std::ceil(xo);
            break;
        }
        add(int64_t(pick), 1.0);
      } else {
        // An integral coordinate is the right tap of the window left of it (ONNX's rule), so
        // the taps of every coordinate are base + i for i in [i0, 1 - i0].
        const double base = xo == std::floor(xo) ? xo - 1 : std::floor(xo), frac = xo - base;
        // Antialias stretches the filter by 1 / scale when shrinking.
        const double sc = antialias_ ? std::min(s, 1.0) : 1.0;
        const double support = mode_ == ResizeMode::Linear ? 1.0 : 2.0;
        const int64_t i0 = int64_t(std::floor(-support / sc)) + 1, nt = 2 - 2 * i0;
        w.assign(size_t(nt), 0.0);
        double total = 0;
        for (int64_t i = 0; i < nt; i++) {
          const double d = (double(i0 + i) - frac) * sc;
          w[size_t(i)] =
              mode_ == ResizeMode::Linear ? std::max(0.0, 1 - std::fabs(d)) : cubic_weight(d, a_);
          total += w[size_t(i)];
        }
        if (antialias_) {
          for (double& x : w) x /= total;
        }
        const int64_t b = int64_t(base) + i0;
        if (exclude_outside_) {
          total = 0;
          for (int64_t i = 0; i < nt; i++) {
            if (b + i < 0 || b + i >= n) w[size_t(i)] = 0;
            total += w[size_t(i)];
          }
          if (total != 0) {
            for (double& x : w) x /= total;
          }
        }
        for (int64_t i = 0; i < nt; i++) {
          if (w[size_t(i)] != 0) add(b + i, w[size_t(i)]);
        }
      }
      t.first.push_back(int64_t(t.offset.size()));
    }
    return t;
  }

  ResizeMode mode_;
  ResizeCoord coord_;
  ResizeNearest nearest_;
  double a_, extrapolation_;
  bool exclude_outside_, antialias_;
  std::vector<int64_t> axes_;
  std::string policy_;
};

}  // namespace

std::unique_ptr<OpKernel> make_resize_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Resize, "make_resize_kernel: " + n.describe());
  return std::make_unique<ResizeKernel>(n);
}

}  // namespace ubfuse::cpu
