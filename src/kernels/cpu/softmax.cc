// Softmax over the last axis. Each row takes three passes: its max (reading the row from memory),
// exp(x - max) into a per-thread f32 scratch row while summing it (the row now from cache), and
// the scratch times 1/sum into the output. The passes of three rows share one loop: row r's exp
// pass, row r - 1's output pass and row r + 1's max pass, so the loads from memory and the stores
// to it spread over the exp arithmetic instead of each pass waiting on memory alone. One exp per
// element, f32 accumulation, and the max subtraction keeps exp from overflowing. The max pass
// also takes the row's min, so a row whose x - max all lie in ExpInRangeF's range (nearly every
// row) skips exp's per-vector range test: on Zen 3 (AVX2) 16-30% more elements per second in L2.
// Outputs past kStreamMinBytes use non-temporal stores where the core's store profile says so
// (store_policy.h; faster on Zen 4 and Zen 5, slower on Zen 3). Plain stores read each output
// line before writing it, which caps the loop near 67% of a streaming add.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/softmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

// The max and min of a row (NaN elements aside; a NaN max makes the row's range test fail).
struct RowRange {
  float max = 0.0f, min = 0.0f;
  // Whether every x - max of the row is in ExpInRangeF's range: x - max >= min - max, as
  // rounding is monotonic. False for a NaN or infinite max or min.
  bool exp_in_range() const { return min - max >= kExpInRangeMin; }
};

// One row-step of the pipelined loop over the columns [0, cols) of three consecutive rows, all
// through one f32 scratch row e: kPrev: yp = e * prev_inv (row r - 1's exps), then kCur:
// e = exp(xr - row_max) (row r), summed into *sum, with ExpInRangeF when kInRange; kNext: the
// max and min of xn (prefetched ahead, from memory) into *next. Each column is read for row r - 1
// before row r overwrites it, so one scratch row serves both: 16 KiB less in L1 for 4096
// columns (about 12% faster in cache). A row that does not exist at the start or end of the range
// drops its stage.
template <bool kCur, bool kPrev, bool kNext, bool kInRange, class D, typename T>
HWY_INLINE void SoftmaxStages(D d, size_t cols, const T* HWY_RESTRICT xr, float row_max,
                              float* HWY_RESTRICT e, float* sum, float prev_inv, T* HWY_RESTRICT yp,
                              const T* HWY_RESTRICT xn, RowRange* next, bool nt) {
  using V = hn::VFromD<D>;
  const size_t N = hn::Lanes(d);
  const V vmax = hn::Set(d, row_max), vinv = hn::Set(d, prev_inv);
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const V pinf = hn::Set(d, std::numeric_limits<float>::infinity());
  const auto exp = [d](V v) HWY_ATTR {
    if constexpr (kInRange) {
      return ExpInRangeF(d, v);
    } else {
      return ExpNonPositiveF(d, v);
    }
  };
  V s0 = hn::Zero(d), s1 = hn::Zero(d), m0 = ninf, m1 = ninf, n0 = pinf, n1 = pinf;
  size_t i = 0;
  for (; i + 2 * N <= cols; i += 2 * N) {
    if constexpr (kNext) PrefetchAhead(d, xn + i);
    if constexpr (kPrev) {
      const V o0 = hn::Mul(hn::LoadU(d, e + i), vinv);
      const V o1 = hn::Mul(hn::LoadU(d, e + i + N), vinv);
      StorePairF32(o0, o1, d, yp + i, nt);
    }
    if constexpr (kCur) {
      const V e0 = exp(hn::Sub(LoadF32(d, xr + i), vmax));
      const V e1 = exp(hn::Sub(LoadF32(d, xr + i + N), vmax));
      hn::StoreU(e0, d, e + i);
      hn::StoreU(e1, d, e + i + N);
      s0 = hn::Add(s0, e0);
      s1 = hn::Add(s1, e1);
    }
    if constexpr (kNext) {  // x86 max returns its second operand for NaN: exp(NaN - max) is NaN
      const V x0 = LoadF32(d, xn + i), x1 = LoadF32(d, xn + i + N);
      m0 = hn::Max(m0, x0);
      m1 = hn::Max(m1, x1);
      n0 = hn::Min(x0, n0);  // a NaN x is skipped on x86 (NaN elsewhere: the test fails)
      n1 = hn::Min(x1, n1);
    }
  }
  for (; i < cols; i += N) {
    const size_t c = cols - i < N ? cols - i : N;
    if constexpr (kPrev) StoreNF32(hn::Mul(hn::LoadU(d, e + i), vinv), d, yp + i, c);
    if constexpr (kCur) {
      const V ev = hn::IfThenElseZero(hn::FirstN(d, c), exp(hn::Sub(LoadNF32(d, xr + i, c), vmax)));
      hn::StoreU(ev, d, e + i);  // the scratch row has N spare floats
      s0 = hn::Add(s0, ev);
    }
    if constexpr (kNext) {
      const auto valid = hn::FirstN(d, c);
      const V xv = LoadNF32(d, xn + i, c);
      m0 = hn::Max(m0, hn::IfThenElse(valid, xv, ninf));
      n0 = hn::Min(hn::IfThenElse(valid, xv, pinf), n0);
    }
  }
  if constexpr (kCur) *sum = ReduceSumF(d, hn::Add(s0, s1));
  if constexpr (kNext) {
    next->max = ReduceMaxF(d, hn::Max(m0, m1));
    next->min = -ReduceMaxF(d, hn::Neg(hn::Min(n0, n1)));
  }
}

template <typename T>
HWY_NOINLINE void SoftmaxRows(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows, size_t cols,
                              bool stream) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  // Streamed pairs of vectors (StorePairF32) need every row start aligned to a pair.
  const size_t align = std::min<size_t>(2 * N * sizeof(T), 64);
  const bool nt =
      stream && reinterpret_cast<uintptr_t>(y) % align == 0 && (cols * sizeof(T)) % align == 0;
  thread_local std::vector<float> scratch_vec;
  if (scratch_vec.size() < cols + N) scratch_vec.resize(cols + N);
  float* e = scratch_vec.data();
  RowRange range, next_range;
  float prev_inv = 0.0f;
  // Step r: output of row r - 1, exp of row r, range of row r + 1 (step -1: row 0's range only).
  for (ptrdiff_t r = -1; r <= ptrdiff_t(rows); ++r) {
    const bool cur = r >= 0 && r < ptrdiff_t(rows);
    const bool prev = r > 0;
    const bool next = r + 1 < ptrdiff_t(rows);
    const T* xr = cur ? x + r * cols : nullptr;
    const T* xn = next ? x + (r + 1) * cols : nullptr;
    T* yp = prev ? y + (r - 1) * cols : nullptr;
    float sum = 0.0f;
    auto stages = [&]<bool kCur, bool kPrev, bool kNext>() HWY_ATTR {
      // kInRange = kCur: a step without an exp pass has one instantiation, not two.
      if (kCur && range.exp_in_range()) {
        SoftmaxStages<kCur, kPrev, kNext, kCur>(d, cols, xr, range.max, e, &sum, prev_inv, yp, xn,
                                                &next_range, nt);
      } else {
        SoftmaxStages<kCur, kPrev, kNext, false>(d, cols, xr, range.max, e, &sum, prev_inv, yp, xn,
                                                 &next_range, nt);
      }
    };
    if (cur && prev && next) {
      stages.template operator()<true, true, true>();
    } else if (cur && next) {
      stages.template operator()<true, false, true>();
    } else if (cur && prev) {
      stages.template operator()<true, true, false>();
    } else if (cur) {
      stages.template operator()<true, false, false>();
    } else if (prev) {
      stages.template operator()<false, true, false>();
    } else {
      stages.template operator()<false, false, true>();
    }
    if (cur) prev_inv = 1.0f / sum;
    range = next_range;
  }
}

void SoftmaxRun(int code, const void* x, void* y, size_t rows, size_t cols, bool stream) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    using T = typename decltype(s)::type;
    SoftmaxRows(static_cast<const T*>(x), static_cast<T*>(y), rows, cols, stream);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy/cache_control.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/store_policy.h"

namespace ubfuse {
HWY_EXPORT(SoftmaxRun);

namespace cpu {
namespace {

class SoftmaxKernel : public KernelBase {
 public:
  explicit SoftmaxKernel(const Node& n) : KernelBase(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (!is_float(x.dtype()) || y.dtype() != x.dtype() || y.numel() != x.numel() || x.rank() == 0) {
      fail("needs a float input of rank >= 1 and a like output, got " + tensors_str({x, y}));
    }
    const int64_t cols = x.dim(-1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    if (rows == 0) return;
    const int fc = float_code(x.dtype());
    const size_t es = dtype_size(x.dtype());
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    const bool stream = stream_output(y.nbytes(), ComputeLoop::kSoftmax, true, y.dtype());
    pool.parallel_for(rows, grain_for(cols), [&](int64_t lo, int64_t hi, int) {
      HWY_DYNAMIC_DISPATCH(SoftmaxRun)
      (fc, px + lo * cols * es, py + lo * cols * es, size_t(hi - lo), size_t(cols), stream);
      if (stream) hwy::FlushStream();
    });
  }
};

}  // namespace

std::unique_ptr<OpKernel> make_softmax_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Softmax, "make_softmax_kernel: " + n.describe());
  return std::make_unique<SoftmaxKernel>(n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
