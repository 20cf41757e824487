// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (ONNX opset 13 forms), bit-exact with
// ONNX's definitions: the quotient x / scale and the product (x - zp) * scale in f32 (as ONNX's
// reference computes them), rounding half to even (nearbyint in the default rounding mode),
// saturating to the 8-bit range. Per tensor or per axis; plain loops over blocks of the axis.
// DynamicQuantizeLinear of f32 runs on vectors (it is the per-MatMul pass of onnxruntime's
// dynamic-quantizer form): the same division, rounding and clamping lane by lane.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on
#include <algorithm>
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The whole vectors of n floats: folds them into *lo and *hi (min and max, NaNs skipped, as the
// scalar std::min/max from 0 skip them); returns how many it read (the caller does the tail).
size_t DqlMinMax(const float* HWY_RESTRICT x, size_t n, float* lo, float* hi) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto vlo = hn::Set(d, *lo), vhi = hn::Set(d, *hi);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    auto v = hn::LoadU(d, x + i);
    v = hn::IfThenElseZero(hn::Eq(v, v), v);  // NaN -> 0, which the range holds anyway
    vlo = hn::Min(vlo, v);
    vhi = hn::Max(vhi, v);
  }
  *lo = hn::GetLane(hn::MinOfLanes(d, vlo));
  *hi = hn::GetLane(hn::MaxOfLanes(d, vhi));
  return i;
}

// quantize_run<uint8_t> on the whole vectors of n floats: y = saturate_u8(round_half_even(x /
// scale) + zp), NaN -> 0. Returns how many it wrote (the caller does the tail).
size_t DqlQuantize(const float* HWY_RESTRICT x, size_t n, float scale, float zp,
                   uint8_t* HWY_RESTRICT y) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, scale), vz = hn::Set(d, zp), v0 = hn::Zero(d),
             v255 = hn::Set(d, 255.0f);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    auto q = hn::Add(hn::Round(hn::Div(hn::LoadU(d, x + i), vs)), vz);
    q = hn::IfThenElse(hn::Eq(q, q), q, v0);
    q = hn::Min(hn::Max(q, v0), v255);
    hn::StoreU(hn::DemoteTo(du8, hn::ConvertTo(di, q)), du8, y + i);
  }
  return i;
}

// DynamicQuantMatMul's rescale of one row in place: the i32 sums c become float(c) * scale, lane
// by lane (c and y may be the same bytes: each vector is loaded before it is stored).
void DqmRescale(const int32_t* c, const float* HWY_RESTRICT scale, float* y, size_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::ConvertTo(d, hn::LoadU(di, c + i)), hn::LoadU(d, scale + i)), d, y + i);
  }
  for (; i < n; i++) {
    const float f = float(c[i]) * scale[i];
    y[i] = f;
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantize.h"

namespace ubfuse {
HWY_EXPORT(DqlMinMax);
HWY_EXPORT(DqlQuantize);
HWY_EXPORT(DqmRescale);

namespace cpu {
namespace {

constexpr int64_t kBlock = 256;

// The parameters of one call: scale (and zero point) per slice of `axis` (len == 1: per tensor),
// with the elements split as outer x len x inner.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

// Null when the scale fits neither per tensor nor per axis (shape inference rules that out).
std::optional<AxisSplit> split(const Tensor& x, const Tensor& scale, int64_t axis) {
  AxisSplit s;
  if (scale.numel() == 1) {
    s.inner = x.numel();
    return s;
  }
  if (axis < 0 || axis >= x.rank() || scale.numel() != x.dim(int(axis))) return std::nullopt;
  for (int64_t d = 0; d < axis; d++) s.outer *= x.dim(int(d));
  s.len = x.dim(int(axis));
  for (int64_t d = axis + 1; d < x.rank(); d++) s.inner *= x.dim(int(d));
  return s;
}

int32_t zero_point_at(const Tensor* zp, int64_t k) {
  if (!zp) return 0;
  switch (zp->dtype()) {
    case DType::i8:
      return zp->data_as<int8_t>()[k];
    case DType::u8:
      return zp->data_as<uint8_t>()[k];
    case DType::i32:
      return zp->data_as<int32_t>()[k];
    default:
      return 0;  // shape inference allows no other dtype
  }
}

template <typename Q>
void quantize_run(const float* x, float scale, int32_t zp, Q* y, int64_t n) {
  constexpr float lo = float(std::numeric_limits<Q>::min()),
                  hi = float(std::numeric_limits<Q>::max());
  for (int64_t i = 0; i < n; i++) {
    const float q = std::nearbyint(x[i] / scale) + float(zp);
    y[i] = Q(std::min(hi, std::max(lo, q)));  // NaN: std::max keeps lo, as the reference does
  }
}

// Reads n elements of float dtype t at element offset i of p as f32 into buf (or points at them).
const float* floats_at(const Tensor& x, int64_t i, int64_t n, float* buf) {
  if (x.dtype() == DType::f32) return x.data_as<float>() + i;
  convert_floats(x.dtype(), static_cast<const uint16_t*>(x.data()) + i, DType::f32, buf, n);
  return buf;
}

// QuantizeLinear and DequantizeLinear: a scale (and zero point) per tensor or per slice of
// attr axis, applied over blocks of kBlock elements of one slice row, in parallel.
class PerAxisKernel : public KernelBase {
 public:
  explicit PerAxisKernel(const Node& n) : KernelBase(n), axis_(n.attr_int("axis", 1)) {}

 protected:
  // Calls fn(at, n, k) for each block: n elements from flat offset `at`, all of slice k.
  template <typename F>
  void for_each_block(const Tensor& x, const Tensor& s, ThreadPool& pool, F&& fn) const {
    const std::optional<AxisSplit> spo = split(x, s, axis_);
    if (!spo) {
      fail("scale " + tensors_str({s}) + " is neither one element nor one per slice of axis " +
           std::to_string(axis_) + " of " + tensors_str({x}));
    }
    const AxisSplit sp = *spo;
    const int64_t rows = sp.outer * sp.len;
    const int64_t blocks = (sp.inner + kBlock - 1) / kBlock;
    pool.parallel_for(rows * blocks, grain_for(kBlock), [&](int64_t lo, int64_t hi, int) {
      for (int64_t t = lo; t < hi; t++) {
        const int64_t r = t / blocks, b0 = (t % blocks) * kBlock;
        fn(r * sp.inner + b0, std::min(kBlock, sp.inner - b0), r % sp.len);
      }
    });
  }

 private:
  int64_t axis_;
};

class QuantizeKernel : public PerAxisKernel {
 public:
  explicit QuantizeKernel(const Node& n) : PerAxisKernel(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 3, out);
    const Tensor& x = in[0];
    const Tensor& s = in[1];
    const Tensor* zp = in.size() > 2 ? &in[2] : nullptr;
    const Tensor& y = out[0];
    const DType qt = zp ? zp->dtype() : DType::u8;
    if (!is_float(x.dtype()) || s.dtype() != DType::f32 || y.dtype() != qt ||
        y.sizes() != x.sizes() || (zp && zp->numel() != s.numel())) {
      fail(
          "needs float x, f32 scale, zero point of the scale's size and an output of its dtype, "
          "got " +
          tensors_str(zp ? std::vector<Tensor>{x, s, *zp, y} : std::vector<Tensor>{x, s, y}));
    }
    for_each_block(x, s, pool, [&](int64_t at, int64_t n, int64_t k) {
      float buf[kBlock];
      const float* px = floats_at(x, at, n, buf);
      const float sc = s.data_as<float>()[k];
      const int32_t z = zero_point_at(zp, k);
      if (qt == DType::i8) {
        quantize_run(px, sc, z, y.data_as<int8_t>() + at, n);
      } else {
        quantize_run(px, sc, z, y.data_as<uint8_t>() + at, n);
      }
    });
  }
};

template <typename Q>
void dequantize_run(const Q* x, int32_t zp, float scale, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = float(int64_t(x[i]) - zp) * scale;
}

class DequantizeKernel : public PerAxisKernel {
 public:
  explicit DequantizeKernel(const Node& n) : PerAxisKernel(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 3, out);
    const Tensor& x = in[0];
    const Tensor& s = in[1];
    const Tensor* zp = in.size() > 2 ? &in[2] : nullptr;
    const Tensor& y = out[0];
    const DType t = x.dtype();
    if ((!is_int8(t) && t != DType::i32) || s.dtype() != DType::f32 || y.dtype() != DType::f32 ||
        y.sizes() != x.sizes() || (zp && (zp->dtype() != t || zp->numel() != s.numel()))) {
      fail(
          "needs u8, i8 or i32 x, f32 scale, zero point of x's dtype and the scale's size, f32 "
          "output, got " +
          tensors_str(zp ? std::vector<Tensor>{x, s, *zp, y} : std::vector<Tensor>{x, s, y}));
    }
    for_each_block(x, s, pool, [&](int64_t at, int64_t n, int64_t k) {
      const float sc = s.data_as<float>()[k];
      const int32_t z = zero_point_at(zp, k);
      float* py = y.data_as<float>() + at;
      if (t == DType::i8) {
        dequantize_run(x.data_as<int8_t>() + at, z, sc, py, n);
      } else if (t == DType::u8) {
        dequantize_run(x.data_as<uint8_t>() + at, z, sc, py, n);
      } else {
        dequantize_run(x.data_as<int32_t>() + at, z, sc, py, n);
      }
    });
  }
};

// ONNX's DynamicQuantizeLinear: u8 over x's range widened to include 0; scale = range / 255 (an
// all-zero x, whose range is empty, takes 1 / 255 rather than dividing by zero), zero point =
// round(saturate(0 - min / scale)).
class DynamicQuantizeKernel : public KernelBase {
 public:
  explicit DynamicQuantizeKernel(const Node& n) : KernelBase(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    // Three outputs: check_arity's one-output rule does not apply.
    UBF_CHECK(in.size() == 1 && out.size() == 3 && in[0].defined(),
              who_ + ": kernel takes one input and three outputs");
    const Tensor& x = in[0];
    if (out.size() != 3 || !is_float(x.dtype()) || out[0].dtype() != DType::u8 ||
        out[0].sizes() != x.sizes() || out[1].dtype() != DType::f32 || out[1].numel() != 1 ||
        out[2].dtype() != DType::u8 || out[2].numel() != 1) {
      fail("needs float x and outputs (u8 of x's shape, f32 [], u8 []), got " + tensors_str(in) +
           " -> " + tensors_str(out));
    }
    const DynamicQuantized q = dynamic_quantize(x, out[0].data_as<uint8_t>(), pool);
    out[1].data_as<float>()[0] = q.scale;
    out[2].data_as<uint8_t>()[0] = uint8_t(q.zero_point);
  }
};

}  // namespace

void rescale_row(const int32_t* c, const float* scale, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DqmRescale)(c, scale, y, size_t(n));
}

namespace {

// x's range widened to include 0 (NaN skipped): per-chunk minima and maxima, combined after (min
// and max are exact in any order).
void widened_range(const Tensor& x, ThreadPool& pool, float* lo_out, float* hi_out) {
  const int64_t n = x.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(blocks, 64));
  std::vector<float> lo_of(size_t(chunks), 0.0f), hi_of(size_t(chunks), 0.0f);
  const bool f32 = x.dtype() == DType::f32;
  pool.parallel_for(chunks, grain_for(n / chunks), [&](int64_t c0, int64_t c1, int) {
    float buf[kBlock];
    for (int64_t c = c0; c < c1; c++) {
      float lo = 0, hi = 0;
      for (int64_t b = c * blocks / chunks; b < (c + 1) * blocks / chunks; b++) {
        const int64_t m = std::min(kBlock, n - b * kBlock);
        const float* p = floats_at(x, b * kBlock, m, buf);
        int64_t i = f32 ? int64_t(HWY_DYNAMIC_DISPATCH(DqlMinMax)(p, size_t(m), &lo, &hi)) : 0;
        for (; i < m; i++) {
          lo = std::min(lo, p[i]);
          hi = std::max(hi, p[i]);
        }
      }
      lo_of[size_t(c)] = lo;
      hi_of[size_t(c)] = hi;
    }
  });
  *lo_out = *std::min_element(lo_of.begin(), lo_of.end());
  *hi_out = *std::max_element(hi_of.begin(), hi_of.end());
}

}  // namespace

DynamicQuantized dynamic_quantize(const Tensor& x, uint8_t* py, ThreadPool& pool,
                                  const float* range) {
  const int64_t n = x.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const bool f32 = x.dtype() == DType::f32;
  float lo = 0, hi = 0;
  if (range) {  // x's min and max, known already
    lo = std::min(0.0f, range[0]);
    hi = std::max(0.0f, range[1]);
  } else {
    widened_range(x, pool, &lo, &hi);
  }
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const float zpf = std::nearbyint(std::min(255.0f, std::max(0.0f, 0.0f - lo / scale)));
  const int32_t zp = int32_t(zpf);
  pool.parallel_for(blocks, grain_for(kBlock), [&](int64_t b0, int64_t b1, int) {
    float buf[kBlock];
    for (int64_t b = b0; b < b1; b++) {
      const int64_t m = std::min(kBlock, n - b * kBlock);
      const float* p = floats_at(x, b * kBlock, m, buf);
      uint8_t* q = py + b * kBlock;
      const int64_t i =
          f32 ? int64_t(HWY_DYNAMIC_DISPATCH(DqlQuantize)(p, size_t(m), scale, float(zp), q)) : 0;
      quantize_run(p + i, scale, zp, q + i, m - i);
    }
  });
  return {scale, zp};
}

std::unique_ptr<OpKernel> make_quantize_kernel(const Node& n) {
  if (n.op == OpKind::QuantizeLinear) return std::make_unique<QuantizeKernel>(n);
  if (n.op == OpKind::DequantizeLinear) return std::make_unique<DequantizeKernel>(n);
  UBF_CHECK(n.op == OpKind::DynamicQuantizeLinear, "make_quantize_kernel: " + n.describe());
  return std::make_unique<DynamicQuantizeKernel>(n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
