// LayerNorm and RMSNorm over the last axis, and GroupNorm over blocks of channels; two passes per
// row: the statistics pass streams the row in from memory (prefetching 4 KiB ahead), the output
// pass re-reads it from cache (a 4096-float row is 16 KiB), so each input byte comes from DRAM
// once. Two rows' output passes run in one loop with the next two rows' statistics passes. f32
// accumulation with independent vector accumulators; LayerNorm sums x - c and its square, c the
// median of three of the row's values (the shifted-data variance: c lies within the row's spread,
// so a large common offset cancels exactly and the sums do not). A row whose sums overflow f32 (|x|
// beyond ~1e19) is redone on x * 2^-k.
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

// ((x - pivot) - md) * rstd [* w] [+ b], given the weight and bias vectors.
template <bool kW, bool kB, class V>
HWY_INLINE V NormalizeV(V xv, V vpivot, V vmd, V vrstd, V wv, V bv) {
  V v = hn::Mul(hn::Sub(hn::Sub(xv, vpivot), vmd), vrstd);
  if constexpr (kW && kB) return hn::MulAdd(v, wv, bv);
  if constexpr (kW) v = hn::Mul(v, wv);
  if constexpr (kB) v = hn::Add(v, bv);
  return v;
}
// The same for the elements [i, i + count) (full vectors if kFull), loading w and b.
template <bool kW, bool kB, bool kFull, class D, class V>
HWY_INLINE V NormalizeF(D d, V xv, V vpivot, V vmd, V vrstd, const float* HWY_RESTRICT w,
                        const float* HWY_RESTRICT b, size_t i, size_t count) {
  const V wv = kW ? LoadAt<kFull>(d, w, i, count) : V();
  const V bv = kB ? LoadAt<kFull>(d, b, i, count) : V();
  return NormalizeV<kW, kB>(xv, vpivot, vmd, vrstd, wv, bv);
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

// How a row is normalized: ((x * scale - pivot) - md) * rstd [* w] [+ b]. scale is 1 unless the
// row's squares passed f32's range (then a power of two that brings them back).
struct RowCoef {
  float pivot = 0, md = 0, rstd = 0, scale = 1;
};

// How many rows share one loop of the pipelined form: their output passes load each [C] weight
// and bias vector once for all of them. With 32 vector registers 2 rows fit (Zen 5: 2 rows 65-71%
// of STREAM add, 4 rows 59-61%); with 16 (AVX2, SSE) 2 rows spill every step (Zen 3: 12-15%,
// against 62-65% for 1 row).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3  // AVX2 and older: 16 vector registers
constexpr size_t kRowsPerStep = 1;
#else
constexpr size_t kRowsPerStep = 2;
#endif

// Rows [0, K)'s output passes and rows [K, 2K)'s statistics passes (their pivots set by the
// caller, their sums to nx) in one loop, 2 vectors per row per step: the next rows stream in
// from memory (prefetched 4 KiB ahead) while the current ones (in cache) compute, and the weight
// and bias are loaded once per step. The sums take the steps of RowShiftedSums in its order, so a
// row's statistics never depend on which loop computed them (or on the thread count).
template <size_t K, bool kW, bool kB, class D, typename T>
HWY_INLINE void NormalizeRowsAndSumNext(D d, const T* HWY_RESTRICT x, T* HWY_RESTRICT y,
                                        size_t cols, const float* HWY_RESTRICT w,
                                        const float* HWY_RESTRICT b, const RowCoef* c, bool stream,
                                        ShiftedSums* nx) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  const T* HWY_RESTRICT xn = x + K * cols;
  V vp[K], vmd[K], vr[K], vnp[K], s0[K], s1[K], q0[K], q1[K];
  for (size_t k = 0; k < K; ++k) {
    vp[k] = hn::Set(d, c[k].pivot);
    vmd[k] = hn::Set(d, c[k].md);
    vr[k] = hn::Set(d, c[k].rstd);
    vnp[k] = hn::Set(d, nx[k].pivot);
    s0[k] = s1[k] = q0[k] = q1[k] = hn::Zero(d);
  }
  const V one = hn::Set(d, 1.0f);
  const size_t align = std::min<size_t>(2 * N * sizeof(T), 64);  // a pair (StorePairF32)
  const bool nt = stream && reinterpret_cast<uintptr_t>(y) % align == 0 &&
                  (cols * sizeof(T)) % align == 0;  // every row aligned
  size_t i = 0;
  for (; i + 2 * N <= cols; i += 2 * N) {
    const V w0 = kW ? hn::LoadU(d, w + i) : one, w1 = kW ? hn::LoadU(d, w + i + N) : one;
    const V b0 = kB ? hn::LoadU(d, b + i) : one, b1 = kB ? hn::LoadU(d, b + i + N) : one;
    for (size_t k = 0; k < K; ++k) {
      const T* xr = x + k * cols + i;
      T* yr = y + k * cols + i;
      const V y0 = NormalizeV<kW, kB>(LoadF32(d, xr), vp[k], vmd[k], vr[k], w0, b0);
      const V y1 = NormalizeV<kW, kB>(LoadF32(d, xr + N), vp[k], vmd[k], vr[k], w1, b1);
      StorePairF32(y0, y1, d, yr, nt);
    }
    for (size_t k = 0; k < K; ++k) {
      ShiftedSumsStep<false>(d, xn + k * cols + i, vnp[k], one, s0[k], s1[k], q0[k], q1[k]);
    }
  }
  for (; i < cols; i += N) {
    const size_t cnt = cols - i < N ? cols - i : N;
    for (size_t k = 0; k < K; ++k) {
      const V yv = NormalizeF<kW, kB, false>(d, LoadNF32(d, x + k * cols + i, cnt), vp[k], vmd[k],
                                             vr[k], w, b, i, cnt);
      StoreNF32(yv, d, y + k * cols + i, cnt);
      ShiftedSumsTail<false>(d, xn + k * cols + i, cnt, vnp[k], one, s0[k], q0[k]);
    }
  }
  for (size_t k = 0; k < K; ++k) {
    nx[k].sd = ReduceSumF(d, hn::Add(s0[k], s1[k]));
    nx[k].sd2 = ReduceSumF(d, hn::Add(q0[k], q1[k]));
  }
}

// One row's output pass alone: ((x * scale - pivot) - md) * rstd [* w] [+ b].
template <bool kW, bool kB, class D, typename T>
HWY_INLINE void NormalizeRow(D d, const T* HWY_RESTRICT xr, T* HWY_RESTRICT yr, size_t cols,
                             const float* HWY_RESTRICT w, const float* HWY_RESTRICT b,
                             const RowCoef& c, bool stream) {
  const auto vpivot = hn::Set(d, c.pivot), vmd = hn::Set(d, c.md), vrstd = hn::Set(d, c.rstd);
  const auto vscale = hn::Set(d, c.scale);
  auto out = [&]<bool kScaled>() HWY_ATTR {
    MapStore(d, yr, cols, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
      auto xv = LoadAt<kFull>(d, xr, i, count);
      if constexpr (kScaled) xv = hn::Mul(xv, vscale);
      return NormalizeF<kW, kB, kFull>(d, xv, vpivot, vmd, vrstd, w, b, i, count);
    });
  };
  if (c.scale == 1.0f) {
    out.template operator()<false>();
  } else {
    out.template operator()<true>();
  }
}

// Normalizes rows [0, rows) kRowsPerStep at a time: each group's output passes share a loop with
// the next group's statistics passes; the last group, and any group holding a row that needs
// rescaling, runs its passes one row at a time. pivot_of(row) gives a row's pivot, coef(row, sums)
// its RowCoef.
template <bool kW, bool kB, class D, typename T, class PivotFn, class CoefFn>
HWY_INLINE void NormalizeRowsPipelined(D d, const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows,
                                       size_t cols, const float* HWY_RESTRICT w,
                                       const float* HWY_RESTRICT b, bool stream,
                                       const PivotFn& pivot_of, const CoefFn& coef) {
  constexpr size_t K = kRowsPerStep;
  ShiftedSums cur[K];
  auto sums_alone = [&](size_t r, ShiftedSums* st) HWY_ATTR {
    const T* xr = x + r * cols;
    st->pivot = pivot_of(xr);
    RowShiftedSums(d, xr, cols, st->pivot, &st->sd, &st->sd2);
  };
  for (size_t k = 0; k < K && k < rows; ++k) sums_alone(k, &cur[k]);
  for (size_t r = 0; r < rows;) {
    const size_t g = std::min(K, rows - r);       // rows in this group
    const size_t gn = std::min(K, rows - r - g);  // rows in the next one
    RowCoef c[K];
    bool plain = true;
    for (size_t k = 0; k < g; ++k) {
      c[k] = coef(x + (r + k) * cols, cur[k]);
      plain = plain && c[k].scale == 1.0f;
    }
    if (plain && g == K && gn == K) {
      ShiftedSums nx[K];
      for (size_t k = 0; k < K; ++k) nx[k].pivot = pivot_of(x + (r + K + k) * cols);
      NormalizeRowsAndSumNext<K, kW, kB>(d, x + r * cols, y + r * cols, cols, w, b, c, stream, nx);
      for (size_t k = 0; k < K; ++k) cur[k] = nx[k];
    } else {
      for (size_t k = 0; k < g; ++k) {
        NormalizeRow<kW, kB>(d, x + (r + k) * cols, y + (r + k) * cols, cols, w, b, c[k], stream);
      }
      for (size_t k = 0; k < gn; ++k) sums_alone(r + g + k, &cur[k]);
    }
    r += g;
  }
}

// How LayerNorm (and GroupNorm, over a group's block) normalizes a row of n values from its
// shifted sums st.
template <class D, typename T>
HWY_INLINE RowCoef LayerNormCoef(D d, const T* HWY_RESTRICT xr, size_t n, const ShiftedSums& st,
                                 float eps) {
  RowCoef c;
  c.pivot = st.pivot;
  float sd = st.sd, sd2 = st.sd2, eps_s = eps;
  // A row of finite values whose spread squared passes f32's range (|x| beyond ~1e19): redo
  // the statistics on x * 2^-k, and normalize x * 2^-k (the result does not change).
  if (!std::isfinite(sd) || !std::isfinite(sd2)) {
    const float s = RowRescale(d, xr, n);
    if (s != 0.0f) {
      c.scale = s;
      c.pivot *= s;
      RowShiftedSums<true>(d, xr, n, c.pivot, &sd, &sd2, s);
      eps_s = eps * s * s;  // var + eps, both scaled by s^2 (may flush to 0: negligible)
    }
  }
  c.md = sd / float(n);
  const float raw = sd2 / float(n) - c.md * c.md;
  const float var = raw < 0.0f ? 0.0f : raw;  // keeps NaN (an Inf in the row gives Inf - Inf)
  c.rstd = 1.0f / std::sqrt(var + eps_s);
  return c;
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
  auto pivot_of = [&](const T* xr) HWY_ATTR { return RowPivot(d, xr, cols); };
  auto coef = [&](const T* xr, const ShiftedSums& st)
                  HWY_ATTR { return LayerNormCoef(d, xr, cols, st, eps); };
  NormalizeRowsPipelined<kW, kB>(d, x, y, rows, cols, w, b, stream, pivot_of, coef);
}

template <typename T, bool kW>
HWY_NOINLINE void RMSNormRows(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows, size_t cols,
                              const float* HWY_RESTRICT w, float eps, bool stream) {
  const hn::ScalableTag<float> d;
  // Pivot 0: sd2 is the sum of squares, and ((x - 0) - 0) * rstd is x * rstd exactly.
  auto pivot_of = [](const T*) { return 0.0f; };
  auto coef = [&](const T* xr, const ShiftedSums& st) HWY_ATTR {
    float unused, ss = st.sd2;
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
    RowCoef c;  // x * (s / rms(x s)): one multiply per element either way, scale stays 1
    c.rstd = scale / std::sqrt(ss / float(cols) + eps_s);
    return c;
  };
  NormalizeRowsPipelined<kW, false>(d, x, y, rows, cols, w, nullptr, stream, pivot_of, coef);
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

// GroupNorm over blocks [0, blocks) of x: block k is group k % groups of a sample, cpg channels
// of S positions each, contiguous. Its statistics are a LayerNorm row's over the cpg * S values
// (shifted sums, rescaled past f32's range); channel c (of all C = groups * cpg) then takes
// ((x * scale - pivot) - md) * rstd * w[c] + b[c] (w, b f32, may be null).
template <typename T>
HWY_NOINLINE void GroupNormBlocks(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t first,
                                  size_t blocks, size_t groups, size_t cpg, size_t S,
                                  const float* HWY_RESTRICT w, const float* HWY_RESTRICT b,
                                  float eps, bool stream) {
  const hn::ScalableTag<float> d;
  const size_t len = cpg * S;
  for (size_t k = first; k < first + blocks; ++k) {
    const T* xb = x + k * len;
    T* yb = y + k * len;
    ShiftedSums st;
    st.pivot = RowPivot(d, xb, len);
    RowShiftedSums(d, xb, len, st.pivot, &st.sd, &st.sd2);
    const RowCoef c = LayerNormCoef(d, xb, len, st, eps);
    const auto vp = hn::Set(d, c.pivot), vmd = hn::Set(d, c.md), vr = hn::Set(d, c.rstd),
               vs = hn::Set(d, c.scale);
    const size_t c0 = (k % groups) * cpg;
    for (size_t ch = 0; ch < cpg; ++ch) {
      const auto vw = hn::Set(d, w ? w[c0 + ch] : 1.0f);
      const auto vb = hn::Set(d, b ? b[c0 + ch] : 0.0f);
      const T* xr = xb + ch * S;
      MapStore(d, yb + ch * S, S, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
        auto xv = LoadAt<kFull>(d, xr, i, count);
        if (c.scale != 1.0f) xv = hn::Mul(xv, vs);
        return hn::MulAdd(hn::Mul(hn::Sub(hn::Sub(xv, vp), vmd), vr), vw, vb);
      });
    }
  }
}

void GroupNormRun(int code, const void* x, void* y, size_t first, size_t blocks, size_t groups,
                  size_t cpg, size_t S, const float* w, const float* b, float eps, bool stream) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    using T = typename decltype(s)::type;
    GroupNormBlocks<T>(static_cast<const T*>(x), static_cast<T*>(y), first, blocks, groups, cpg, S,
                       w, b, eps, stream);
  });
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
HWY_EXPORT(GroupNormRun);

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

// GroupNorm (and InstanceNormalization, one channel per group) over x [N, C, ...]: a group of a
// sample is one contiguous block of C / groups channels, so blocks are normalized like rows.
class GroupNormKernel : public KernelBase {
 public:
  GroupNormKernel(const Node& n, int64_t groups, float eps)
      : KernelBase(n), groups_(groups), eps_(eps) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 3, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (!is_float(x.dtype()) || y.dtype() != x.dtype() || y.sizes() != x.sizes() || x.rank() < 2) {
      fail("needs a float input [N, C, ...] and a like output, got " + tensors_str({x, y}));
    }
    const int64_t N = x.dim(0), C = x.dim(1);
    if (C % groups_ != 0) {
      fail("groups " + std::to_string(groups_) + " does not divide the channels of " +
               tensors_str({x}),
           "num_groups must divide X's dim 1");
    }
    if (x.numel() == 0) return;
    const int64_t S = x.numel() / (N * C), cpg = C / groups_;
    std::vector<float> wb[2];
    const float* params[2] = {nullptr, nullptr};
    for (size_t k = 1; k < in.size(); ++k) {
      const Tensor& p = in[k];
      if (p.numel() != C || !is_float(p.dtype())) {
        fail(std::string(k == 1 ? "scale" : "bias") + " must have " + std::to_string(C) +
             " float values (one per channel), got " + tensors_str({p}));
      }
      wb[k - 1].resize(size_t(C));
      convert_floats(p.dtype(), p.data(), DType::f32, wb[k - 1].data(), C);
      params[k - 1] = wb[k - 1].data();
    }
    const int fc = float_code(x.dtype());
    const bool stream = use_stream(y.nbytes());
    const int64_t blocks = N * groups_;
    pool.parallel_for(blocks, grain_for(cpg * S), [&](int64_t lo, int64_t hi, int) {
      HWY_DYNAMIC_DISPATCH(GroupNormRun)
      (fc, x.data(), y.data(), size_t(lo), size_t(hi - lo), size_t(groups_), size_t(cpg), size_t(S),
       params[0], params[1], eps_, stream);
      if (stream) hwy::FlushStream();
    });
  }

 private:
  int64_t groups_;
  float eps_;
};

}  // namespace

std::unique_ptr<OpKernel> make_group_norm_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::GroupNorm, "make_group_norm_kernel: " + n.describe());
  const double eps = n.attr_float("eps", 1e-5);
  const int64_t groups = n.attr_int("groups", 1);
  if (!(eps >= 0) || groups < 1) {
    kernel_fail(n.describe(), "eps must be >= 0 and groups >= 1, got eps " + std::to_string(eps) +
                                  ", groups " + std::to_string(groups));
  }
  return std::make_unique<GroupNormKernel>(n, groups, float(eps));
}

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
