// Softmax over the last axis, one row at a time: pass 1 reads the row from memory for its max,
// pass 2 writes exp(x - max) into a per-thread f32 scratch row (from L1) and sums it while
// prefetching the next row, pass 3 scales the scratch by 1/sum into the output. One exp per
// element, f32 accumulation, and the max subtraction keeps exp from overflowing.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include <vector>

#include "hwy/cache_control.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/softmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

template <typename T>
HWY_NOINLINE void SoftmaxRows(const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows, size_t cols,
                              bool stream) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  thread_local std::vector<float> scratch_vec;
  if (scratch_vec.size() < cols + N) scratch_vec.resize(cols + N);
  float* HWY_RESTRICT e = scratch_vec.data();
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T* next = r + 1 < rows ? xr + cols : nullptr;
    const auto vmax = hn::Set(d, RowMax<false>(d, xr, cols));  // NaN flows through exp
    auto s0 = hn::Zero(d), s1 = hn::Zero(d);
    size_t i = 0;
    for (; i + 2 * N <= cols; i += 2 * N) {
      if (next) {
        hwy::Prefetch(next + i);
        if (sizeof(T) == 4) hwy::Prefetch(next + i + N);  // 2N floats span two cache lines
      }
      const auto e0 = ExpF(d, hn::Sub(LoadF32(d, xr + i), vmax));
      const auto e1 = ExpF(d, hn::Sub(LoadF32(d, xr + i + N), vmax));
      hn::StoreU(e0, d, e + i);
      hn::StoreU(e1, d, e + i + N);
      s0 = hn::Add(s0, e0);
      s1 = hn::Add(s1, e1);
    }
    for (; i < cols; i += N) {
      const size_t c = cols - i < N ? cols - i : N;
      auto ev = ExpF(d, hn::Sub(LoadNF32(d, xr + i, c), vmax));
      ev = hn::IfThenElseZero(hn::FirstN(d, c), ev);
      hn::StoreU(ev, d, e + i);  // scratch has N spare floats
      s0 = hn::Add(s0, ev);
    }
    const auto inv = hn::Set(d, 1.0f / ReduceSumF(d, hn::Add(s0, s1)));
    MapStore(d, yr, cols, stream, [&]<bool kFull>(size_t j, size_t count) HWY_ATTR {
      return hn::Mul(LoadAt<kFull>(d, e, j, count), inv);
    });
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
#include "kernels/cpu/kernel_util.h"

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
    const bool stream = use_stream(y.nbytes());
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
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
