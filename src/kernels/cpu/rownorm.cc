// LayerNorm and RMSNorm over the last axis, two passes per row: the statistics pass streams the
// row in from memory (prefetching 4 KiB ahead), the output pass re-reads it from cache (a
// 4096-float row is 16 KiB), so each input byte comes from DRAM once. Row r's output pass runs in
// one loop with row r + 1's statistics pass. f32 accumulation with
// independent vector accumulators; LayerNorm sums x - c and its square, c the median of three of
// the row's values (the shifted-data variance: c lies within the row's spread, so a large common
// offset cancels exactly and the sums do not). A row whose sums overflow f32 (|x| beyond ~1e19)
// is redone on x * 2^-k.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include <algorithm>
#include <cmath>

#include "hwy/cache_control.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/rownorm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

// One step of the statistics pass over a streamed row: adds d = x * scale - c (kScaled = false:
// scale is 1, one multiply fewer) of x[0, 2N) to s0 / s1 and d^2 to q0 / q1, prefetching ahead.
template <bool kScaled, class D, typename T, class V>
HWY_INLINE void ShiftedSumsStep(D d, const T* HWY_RESTRICT x, V vc, V vs, V& s0, V& s1, V& q0,
                                V& q1) {
  const size_t N = hn::Lanes(d);
  PrefetchAhead(d, x);
  auto scaled = [&](V v) HWY_ATTR { return kScaled ? hn::Mul(v, vs) : v; };
  const V a0 = hn::Sub(scaled(LoadF32(d, x)), vc);
  const V a1 = hn::Sub(scaled(LoadF32(d, x + N)), vc);
  s0 = hn::Add(s0, a0);
  s1 = hn::Add(s1, a1);
  q0 = hn::MulAdd(a0, a0, q0);
  q1 = hn::MulAdd(a1, a1, q1);
}
// The same over x[0, cnt), cnt <= N: the row's last elements.
template <bool kScaled, class D, typename T, class V>
HWY_INLINE void ShiftedSumsTail(D d, const T* HWY_RESTRICT x, size_t cnt, V vc, V vs, V& s0,
                                V& q0) {
  V v = LoadNF32(d, x, cnt);
  if constexpr (kScaled) v = hn::Mul(v, vs);
  const V a = hn::IfThenElseZero(hn::FirstN(d, cnt), hn::Sub(v, vc));
  s0 = hn::Add(s0, a);
  q0 = hn::MulAdd(a, a, q0);
}

// Sums of d = x * scale - c and of d^2 over x[0, n) in f32.
// kScaled = false: scale is 1 (the common case, one multiply fewer).
template <bool kScaled = false, class D, typename T>
HWY_INLINE void RowShiftedSums(D d, const T* HWY_RESTRICT x, size_t n, float c, float* sum_d,
                               float* sum_d2, float scale = 1.0f) {
  const size_t N = hn::Lanes(d);
  const auto vc = hn::Set(d, c);
  const auto vs = hn::Set(d, scale);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), q0 = hn::Zero(d), q1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) ShiftedSumsStep<kScaled>(d, x + i, vc, vs, s0, s1, q0, q1);
  for (; i < n; i += N) ShiftedSumsTail<kScaled>(d, x + i, n - i < N ? n - i : N, vc, vs, s0, q0);
  *sum_d = ReduceSumF(d, hn::Add(s0, s1));
  *sum_d2 = ReduceSumF(d, hn::Add(q0, q1));
}

// ((x - pivot) - md) * rstd [* w] [+ b] for the elements [i, i + count) (full vectors if kFull).
template <bool kW, bool kB, bool kFull, class D, class V>
HWY_INLINE V NormalizeF(D d, V xv, V vpivot, V vmd, V vrstd, const float* HWY_RESTRICT w,
                        const float* HWY_RESTRICT b, size_t i, size_t count) {
  V v = hn::Mul(hn::Sub(hn::Sub(xv, vpivot), vmd), vrstd);
  if constexpr (kW && kB) {
    return hn::MulAdd(v, LoadAt<kFull>(d, w, i, count), LoadAt<kFull>(d, b, i, count));
  }
  if constexpr (kW) v = hn::Mul(v, LoadAt<kFull>(d, w, i, count));
  if constexpr (kB) v = hn::Add(v, LoadAt<kFull>(d, b, i, count));
  return v;
}

// For a row of finite values whose sum of squares passes f32's range: the power of two 2^-e, for
// max |x| = m * 2^e (1 <= m < 2), that brings every |x| below 2, so no square can overflow. 0 when
// the row holds an Inf or NaN: then the overflow is real and stays (NaN / 0).
template <class D, typename T>
HWY_INLINE float RowRescale(D d, const T* HWY_RESTRICT x, size_t n) {
  const size_t N = hn::Lanes(d);
  auto m = hn::Zero(d);
  for (size_t i = 0; i < n; i += N) {
    const size_t cnt = n - i < N ? n - i : N;
    m = MaxF(d, m, hn::Abs(LoadNF32(d, x + i, cnt)));  // NaN-aware; lanes past cnt load 0
  }
  const float mx = ReduceMaxF(d, m);
  if (!std::isfinite(mx) || mx == 0.0f) return 0.0f;
  return std::ldexp(1.0f, -std::ilogb(mx));
}

// The median of x[0], x[n / 2] and x[n - 1] (0 for an empty row).
template <class D, typename T>
HWY_INLINE float RowPivot(D d, const T* HWY_RESTRICT x, size_t n) {
  if (n == 0) return 0.0f;
  const float a = hn::GetLane(LoadNF32(d, x, 1)), b = hn::GetLane(LoadNF32(d, x + n / 2, 1)),
              c = hn::GetLane(LoadNF32(d, x + n - 1, 1));
  return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

// The row's statistics: sums of d = x - pivot and of d^2 (see LayerNormRows).
struct ShiftedSums {
  float pivot = 0, sd = 0, sd2 = 0;
};

// Row r's output pass and row r + 1's statistics pass in one loop (2 vectors of each per step):
// row r + 1 streams in from memory while row r (in cache) computes, so loads and arithmetic
// overlap (at [8,2048,4096] f32, in one process: LayerNorm 14.5 -> 12.3 ms, 57% -> 67% of STREAM
// add; RMSNorm 19.7-21.1 -> 16.5-16.7 ms; the shared loop alone, without the near prefetch, did
// not gain in session 4). Row r becomes ((x - pivot) - md) * rstd [* w] [+ b] (RMSNorm: pivot
// and md 0, no bias); row r + 1's sums (its pivot set by the caller) go to *nx.
template <bool kW, bool kB, class D, typename T>
HWY_INLINE void NormalizeAndSumNext(D d, const T* HWY_RESTRICT xr, T* HWY_RESTRICT yr,
                                    const T* HWY_RESTRICT xn, size_t cols,
                                    const float* HWY_RESTRICT w, const float* HWY_RESTRICT b,
                                    float pivot, float md, float rstd, bool stream,
                                    ShiftedSums* nx) {
  const size_t N = hn::Lanes(d);
  const auto vpivot = hn::Set(d, pivot), vmd = hn::Set(d, md), vrstd = hn::Set(d, rstd);
  const auto vnp = hn::Set(d, nx->pivot), one = hn::Set(d, 1.0f);
  const bool nt = stream && reinterpret_cast<uintptr_t>(yr) % (N * sizeof(T)) == 0;
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), q0 = hn::Zero(d), q1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= cols; i += 2 * N) {
    const auto y0 = NormalizeF<kW, kB, true>(d, LoadF32(d, xr + i), vpivot, vmd, vrstd, w, b, i, N);
    const auto y1 =
        NormalizeF<kW, kB, true>(d, LoadF32(d, xr + i + N), vpivot, vmd, vrstd, w, b, i + N, N);
    if (nt) {
      StreamF32(y0, d, yr + i);
      StreamF32(y1, d, yr + i + N);
    } else {
      StoreF32(y0, d, yr + i);
      StoreF32(y1, d, yr + i + N);
    }
    ShiftedSumsStep<false>(d, xn + i, vnp, one, s0, s1, q0, q1);
  }
  for (; i < cols; i += N) {
    const size_t cnt = cols - i < N ? cols - i : N;
    const auto yv =
        NormalizeF<kW, kB, false>(d, LoadNF32(d, xr + i, cnt), vpivot, vmd, vrstd, w, b, i, cnt);
    StoreNF32(yv, d, yr + i, cnt);
    ShiftedSumsTail<false>(d, xn + i, cnt, vnp, one, s0, q0);
  }
  nx->sd = ReduceSumF(d, hn::Add(s0, s1));
  nx->sd2 = ReduceSumF(d, hn::Add(q0, q1));
}

template <typename T, bool kW, bool kB>
HWY_NOINLINE void LayerNormRows(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows,
                                size_t cols, const float* HWY_RESTRICT w,
                                const float* HWY_RESTRICT b, float eps, bool stream) {
  const hn::ScalableTag<float> d;
  // One statistics pass over d = x - pivot: the mean is pivot + mean(d), and the variance
  // mean(d^2) - mean(d)^2 loses (pivot - mean)^2 / var of relative accuracy. The median of the
  // row's first, middle and last element is within a few standard deviations of the mean
  // unless two of them are outliers (x[0] alone: 100 among U(-1, 1) values cost 4e-4).
  ShiftedSums cur, nx;
  if (rows > 0) {
    cur.pivot = RowPivot(d, x, cols);
    RowShiftedSums(d, x, cols, cur.pivot, &cur.sd, &cur.sd2);
  }
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T* next = r + 1 < rows ? xr + cols : nullptr;
    float pivot = cur.pivot, sd = cur.sd, sd2 = cur.sd2;
    // A row of finite values whose spread squared passes f32's range (|x| beyond ~1e19): redo
    // the statistics on x * 2^-k, and normalize x * 2^-k (the result does not change).
    float scale = 1.0f, eps_s = eps;
    if (!std::isfinite(sd) || !std::isfinite(sd2)) {
      const float s = RowRescale(d, xr, cols);
      if (s != 0.0f) {
        scale = s;
        pivot *= s;
        RowShiftedSums<true>(d, xr, cols, pivot, &sd, &sd2, s);
        eps_s = eps * s * s;  // var + eps, both scaled by s^2 (may flush to 0: negligible)
      }
    }
    const float md = sd / float(cols);
    const float raw = sd2 / float(cols) - md * md;
    const float var = raw < 0.0f ? 0.0f : raw;  // keeps NaN (an Inf in the row gives Inf - Inf)
    const float rstd = 1.0f / std::sqrt(var + eps_s);
    if (next && scale == 1.0f) {
      nx.pivot = RowPivot(d, next, cols);
      NormalizeAndSumNext<kW, kB>(d, xr, yr, next, cols, w, b, pivot, md, rstd, stream, &nx);
      cur = nx;
      continue;
    }
    const auto vpivot = hn::Set(d, pivot);
    const auto vmd = hn::Set(d, md);
    const auto vrstd = hn::Set(d, rstd);
    const auto vscale = hn::Set(d, scale);
    auto out = [&]<bool kScaled>() HWY_ATTR {
      MapStore(d, yr, cols, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
        auto xv = LoadAt<kFull>(d, xr, i, count);
        if constexpr (kScaled) xv = hn::Mul(xv, vscale);
        return NormalizeF<kW, kB, kFull>(d, xv, vpivot, vmd, vrstd, w, b, i, count);
      });
    };
    if (scale == 1.0f) {
      out.template operator()<false>();
    } else {
      out.template operator()<true>();
    }
    if (next) {
      cur.pivot = RowPivot(d, next, cols);
      RowShiftedSums(d, next, cols, cur.pivot, &cur.sd, &cur.sd2);
    }
  }
}

template <typename T, bool kW>
HWY_NOINLINE void RMSNormRows(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows, size_t cols,
                              const float* HWY_RESTRICT w, float eps, bool stream) {
  const hn::ScalableTag<float> d;
  ShiftedSums cur, nx;  // pivot 0: sd2 is the sum of squares
  if (rows > 0) RowShiftedSums(d, x, cols, 0.0f, &cur.sd, &cur.sd2);
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T* next = r + 1 < rows ? xr + cols : nullptr;
    float unused, ss = cur.sd2;
    // Squares past f32's range (|x| beyond ~1e19): x / rms(x) = (x s) / rms(x s) for s = 2^-k.
    float scale = 1.0f, eps_s = eps;
    if (!std::isfinite(ss)) {
      const float s = RowRescale(d, xr, cols);
      if (s != 0.0f) {
        scale = s;
        RowShiftedSums<true>(d, xr, cols, 0.0f, &unused, &ss, s);
        eps_s = eps * s * s;
      }
    }
    const float ms = ss / float(cols);
    // x * (s / rms(x s)): one multiply per element either way.
    const float rstd = scale / std::sqrt(ms + eps_s);
    if (next) {  // ((x - 0) - 0) * rstd [* w]: the same products as the loop below
      NormalizeAndSumNext<kW, false>(d, xr, yr, next, cols, w, nullptr, 0.0f, 0.0f, rstd, stream,
                                     &nx);
      cur = nx;
      continue;
    }
    const auto vrstd = hn::Set(d, rstd);
    MapStore(d, yr, cols, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
      auto v = hn::Mul(LoadAt<kFull>(d, xr, i, count), vrstd);
      if constexpr (kW) v = hn::Mul(v, LoadAt<kFull>(d, w, i, count));
      return v;
    });
    if (next) RowShiftedSums(d, next, cols, 0.0f, &cur.sd, &cur.sd2);
  }
}

template <typename T>
void NormTyped(bool rms, const void* x, void* y, size_t rows, size_t cols, const float* w,
               const float* b, float eps, bool stream) {
  const T* px = static_cast<const T*>(x);
  T* py = static_cast<T*>(y);
  if (rms) {
    if (w) return RMSNormRows<T, true>(px, py, rows, cols, w, eps, stream);
    return RMSNormRows<T, false>(px, py, rows, cols, w, eps, stream);
  }
  if (w && b) return LayerNormRows<T, true, true>(px, py, rows, cols, w, b, eps, stream);
  if (w) return LayerNormRows<T, true, false>(px, py, rows, cols, w, b, eps, stream);
  if (b) return LayerNormRows<T, false, true>(px, py, rows, cols, w, b, eps, stream);
  return LayerNormRows<T, false, false>(px, py, rows, cols, w, b, eps, stream);
}

// Normalizes `rows` rows of `cols` elements; w/b (f32, may be null) cover one row.
void NormRun(bool rms, int code, const void* x, void* y, size_t rows, size_t cols, const float* w,
             const float* b, float eps, bool stream) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    NormTyped<typename decltype(s)::type>(rms, x, y, rows, cols, w, b, eps, stream);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy/cache_control.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(NormRun);

namespace cpu {
namespace {

class NormKernel : public KernelBase {
 public:
  NormKernel(const Node& n, bool rms, float eps) : KernelBase(n), rms_(rms), eps_(eps) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, rms_ ? 2 : 3, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (!is_float(x.dtype()) || y.dtype() != x.dtype() || y.numel() != x.numel() || x.rank() == 0) {
      fail("needs a float input of rank >= 1 and a like output, got " + tensors_str({x, y}));
    }
    const int64_t cols = x.dim(-1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    if (rows == 0) return;
    // Weight and bias as f32 rows (converted per call when stored narrower: cols values).
    std::vector<float> wb[2];
    const float* params[2] = {nullptr, nullptr};
    for (size_t k = 1; k < in.size(); ++k) {
      const Tensor& p = in[k];
      if (!p.defined() && p.numel() != 0) continue;  // absent optional input
      if (p.numel() != cols || !is_float(p.dtype())) {
        fail(std::string(k == 1 ? "weight" : "bias") + " must have " + std::to_string(cols) +
                 " float values (the last axis), got " + tensors_str({p}),
             "weight and bias cover the normalized last axis");
      }
      if (p.dtype() == DType::f32) {
        params[k - 1] = p.data_as<float>();
      } else {
        wb[k - 1].resize(size_t(cols));
        convert_floats(p.dtype(), p.data(), DType::f32, wb[k - 1].data(), cols);
        params[k - 1] = wb[k - 1].data();
      }
    }
    const int fc = float_code(x.dtype());
    const size_t es = dtype_size(x.dtype());
    const bool stream = use_stream(y.nbytes());
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(rows, grain_for(cols), [&](int64_t lo, int64_t hi, int) {
      HWY_DYNAMIC_DISPATCH(NormRun)
      (rms_, fc, px + lo * cols * es, py + lo * cols * es, size_t(hi - lo), size_t(cols), params[0],
       params[1], eps_, stream);
      if (stream) hwy::FlushStream();
    });
  }

 private:
  bool rms_;
  float eps_;
};

}  // namespace

std::unique_ptr<OpKernel> make_norm_kernel(const Node& n) {
  const bool rms = n.op == OpKind::RMSNorm;
  UBF_CHECK(rms || n.op == OpKind::LayerNorm, "make_norm_kernel: " + n.describe());
  const double eps = n.attr_float("eps", rms ? 1e-6 : 1e-5);
  if (!(eps >= 0)) kernel_fail(n.describe(), "eps must be >= 0, got " + std::to_string(eps));
  return std::make_unique<NormKernel>(n, rms, float(eps));
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
