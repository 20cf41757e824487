// MaxPool and AveragePool over 1 to 3 spatial axes, and ReduceProd over the last axis: plain loops
// over f32 copies of the operands (exact for the 8-bit integers MaxPool takes), the (sample,
// channel) planes or rows split over the pool. Averages and products accumulate in double and
// round once, as the reference does. Pooling is rare in transformer inference, so a clear loop is
// preferred over oneDNN's pooling, whose ceil_mode and count_include_pad rules differ from ONNX's.
#include <cmath>
#include <limits>

#include "ir/shape_util.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

// t's elements as f32: floats converted, integers (u8, i8: exact in f32) read one by one.
std::vector<float> as_f32(const Tensor& t, ThreadPool& pool) {
  std::vector<float> v(size_t(t.numel()));
  if (is_float(t.dtype())) {
    convert_floats(t.dtype(), t.data(), DType::f32, v.data(), t.numel(), pool);
  } else {
    for (int64_t i = 0; i < t.numel(); i++) v[size_t(i)] = float(t.get(i));
  }
  return v;
}

void store_f32(const std::vector<float>& v, Tensor& t, ThreadPool& pool) {
  if (is_float(t.dtype())) {
    convert_floats(DType::f32, v.data(), t.dtype(), t.data(), t.numel(), pool);
  } else {
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, double(v[size_t(i)]));
  }
}

// One call's window geometry, with leading axes of length 1 so that every pool is 3-D.
struct PoolGeometry {
  int64_t planes = 0, len[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1},
          pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0}, out[3] = {1, 1, 1};
};

// Along one axis, how many of a window's k taps starting at `start` land in [lo, hi).
int64_t taps_in(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t j = 0; j < k; j++) n += start + j * d >= lo && start + j * d < hi;
  return n;
}

class PoolKernel : public KernelBase {
 public:
  explicit PoolKernel(const Node& n) : KernelBase(n) {
    if (n.op == OpKind::ReduceProd) return;
    k_ = n.attr_ints("kernel_shape");
    strides_ = n.attr_ints("strides");
    dilations_ = n.attr_ints("dilations");
    pads_ = n.attr_ints("pads");
    auto_pad_ = n.attr_str("auto_pad", "NOTSET");
    ceil_ = n.attr_int("ceil_mode", 0) != 0;
    include_pad_ = n.attr_int("count_include_pad", 0) != 0;
    column_major_ = n.attr_int("storage_order", 0) != 0;
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    if (op_ == OpKind::ReduceProd) {
      check_arity(in, 1, 1, out);
      return reduce_prod(in[0], out[0], pool);
    }
    // MaxPool may have a second output, its indices.
    UBF_CHECK(in.size() == 1 && in[0].defined() && (out.size() == 1 || out.size() == 2),
              who_ + ": kernel needs 1 input and 1 or 2 outputs");
    const Tensor& x = in[0];
    const PoolGeometry g = geometry(x, out);
    const bool max = op_ == OpKind::MaxPool;
    const std::vector<float> xf = as_f32(x, pool);
    const int64_t isz = g.len[0] * g.len[1] * g.len[2], osz = g.out[0] * g.out[1] * g.out[2];
    std::vector<float> yf(size_t(g.planes * osz));
    int64_t* idx = out.size() > 1 ? out[1].data_as<int64_t>() : nullptr;
    pool.parallel_for(
        g.planes, grain_for(osz * g.k[0] * g.k[1] * g.k[2]), [&](int64_t lo, int64_t hi, int) {
          for (int64_t p = lo; p < hi; p++) {
            const float* xp = xf.data() + p * isz;
            for (int64_t o = 0; o < osz; o++) {
              const int64_t oc[3] = {o / (g.out[1] * g.out[2]), o / g.out[2] % g.out[1],
                                     o % g.out[2]};
              int64_t st[3];
              for (int a = 0; a < 3; a++) st[a] = oc[a] * g.s[a] - g.pb[a];
              double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
              int64_t best = -1;
              for (int64_t j0 = 0; j0 < g.k[0]; j0++) {
                const int64_t i0 = st[0] + j0 * g.d[0];
                if (i0 < 0 || i0 >= g.len[0]) continue;
                for (int64_t j1 = 0; j1 < g.k[1]; j1++) {
                  const int64_t i1 = st[1] + j1 * g.d[1];
                  if (i1 < 0 || i1 >= g.len[1]) continue;
                  for (int64_t j2 = 0; j2 < g.k[2]; j2++) {
                    const int64_t i2 = st[2] + j2 * g.d[2];
                    if (i2 < 0 || i2 >= g.len[2]) continue;
                    const double v = xp[(i0 * g.len[1] + i1) * g.len[2] + i2];
                    if (!max) {
                      acc += v;
                    } else if (best < 0 || v > acc || (std::isnan(v) && !std::isnan(acc))) {
                      acc = v;  // the first of equal maxima; a NaN wins
                      best = column_major_ ? i0 + g.len[0] * (i1 + g.len[1] * i2)
                                           : (i0 * g.len[1] + i1) * g.len[2] + i2;
                    }
                  }
                }
              }
              if (!max) {
                int64_t count = 1;
                for (int a = 0; a < 3; a++) {
                  count *= include_pad_
                               ? taps_in(st[a], g.k[a], g.d[a], -g.pb[a], g.len[a] + g.pe[a])
                               : taps_in(st[a], g.k[a], g.d[a], 0, g.len[a]);
                }
                acc /= double(count);
              }
              yf[size_t(p * osz + o)] = float(acc);
              if (idx) idx[p * osz + o] = best < 0 ? -1 : p * isz + best;  // -1: a window of pads
            }
          }
        });
    store_f32(yf, out[0], pool);
  }

 private:
  // The geometry of this call, checking the output against the input and the attributes.
  PoolGeometry geometry(const Tensor& x, const std::vector<Tensor>& out) const {
    const int64_t r = x.rank();
    const size_t sp = size_t(r - 2);
    if (r < 3 || r > 5 || k_.size() != sp || strides_.size() != sp || dilations_.size() != sp ||
        pads_.size() != 2 * sp) {
      fail("input " + tensors_str({x}) + " does not match the attributes (kernel_shape " +
               sizes_str(k_) + ", pads " + sizes_str(pads_) + ")",
           "the input is [N, C, spatial...] with one kernel size, stride and dilation and two "
           "pads per spatial axis");
    }
    PoolGeometry g;
    g.planes = x.dim(0) * x.dim(1);
    Sizes want{x.dim(0), x.dim(1)};
    for (size_t i = 0; i < sp; i++) {
      const size_t a = 3 - sp + i;
      g.len[a] = x.dim(int(2 + i));
      g.k[a] = k_[i];
      g.s[a] = strides_[i];
      g.d[a] = dilations_[i];
      const ConvAxis ca =
          pool_axis(g.len[a], g.k[a], g.s[a], g.d[a], auto_pad_, pads_[i], pads_[sp + i], ceil_);
      if (ca.out < 1) {
        fail("spatial axis " + std::to_string(i) + " of " + tensors_str({x}) +
                 " gives no output (kernel " + std::to_string(g.k[a]) + ", dilation " +
                 std::to_string(g.d[a]) + ")",
             "pad the input or use a smaller kernel or dilation");
      }
      g.pb[a] = ca.pad_begin;
      g.pe[a] = ca.pad_end;
      g.out[a] = ca.out;
      want.push_back(ca.out);
    }
    for (size_t i = 0; i < out.size(); i++) {
      const DType t = i == 0 ? x.dtype() : DType::i64;
      if (out[i].sizes() != want || out[i].dtype() != t) {
        fail("output " + tensors_str({out[i]}) + " does not match pooling " + tensors_str({x}) +
             ", which gives " + sizes_str(want) + " of " + std::string(dtype_name(t)));
      }
    }
    return g;
  }

  // The product of each row (the last axis), in double; an empty row gives 1.
  void reduce_prod(const Tensor& x, Tensor& y, ThreadPool& pool) const {
    if (x.rank() < 1 || !is_float(x.dtype()) || y.dtype() != x.dtype() ||
        y.numel() * x.dim(int(x.rank() - 1)) != x.numel()) {
      fail("output " + tensors_str({y}) + " does not hold the products of the rows of " +
           tensors_str({x}));
    }
    const int64_t cols = x.dim(int(x.rank() - 1)), rows = y.numel();
    const std::vector<float> xf = as_f32(x, pool);
    std::vector<float> yf(static_cast<size_t>(rows));
    pool.parallel_for(rows, grain_for(cols), [&](int64_t lo, int64_t hi, int) {
      for (int64_t r = lo; r < hi; r++) {
        double p = 1;
        for (int64_t c = 0; c < cols; c++) p *= xf[size_t(r * cols + c)];
        yf[size_t(r)] = float(p);
      }
    });
    store_f32(yf, y, pool);
  }

  std::vector<int64_t> k_, strides_, dilations_, pads_;
  std::string auto_pad_;
  bool ceil_ = false, include_pad_ = false, column_major_ = false;
};

}  // namespace

std::unique_ptr<OpKernel> make_pool_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::MaxPool || n.op == OpKind::AveragePool || n.op == OpKind::ReduceProd,
            "make_pool_kernel: " + n.describe());
  return std::make_unique<PoolKernel>(n);
}

}  // namespace ubfuse::cpu
