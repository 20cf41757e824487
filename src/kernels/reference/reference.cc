// Slow, obvious double-precision kernels: the oracle every fast kernel is tested against.
#include "kernels/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/shape_util.h"
#include "kernels/reference/jitter.h"
#include "kernels/reference/reference_ops.h"
#include "ubfuse/error.h"

namespace ubfuse::ref {

namespace detail {

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

RefTensor make(const Node& n, Sizes sizes, int out) {
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
    batch[i] = x == 1 ? y : x;  // numpy: 1 broadcasts, 0 stays 0
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

}  // namespace detail

using namespace detail;

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
    case OpKind::RNN:
    case OpKind::GRU:
    case OpKind::LSTM: {
      auto outs = recurrent_cell(n, in);
      for (RefTensor& t : outs) t = stored(std::move(t))[0];
      return outs;
    }
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
    case OpKind::MatMulNBits:
      return {matmul_nbits(n, in)};
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
                        n->op == OpKind::MatMulNBits ||
                        n->op == OpKind::DynamicQuantConv || n->op == OpKind::GroupNorm ||
                        n->op == OpKind::AveragePool || n->op == OpKind::ReduceProd ||
                        n->op == OpKind::Resize || n->op == OpKind::CumSum ||
                        n->op == OpKind::ScatterND || n->op == OpKind::ScatterElements ||
                        n->op == OpKind::RNN || n->op == OpKind::GRU || n->op == OpKind::LSTM;
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
