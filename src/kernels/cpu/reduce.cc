// ReduceSum / ReduceMean / ReduceMax over the last axis (keepdims only changes the output's
// sizes, not its memory). f32 accumulation; rows are split over the pool.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

// Sums (op 0) or means (op 1) of f32 rows of kCols values (a complex value's two parts, a
// pixel's channels): a vector of rows at a time, the loads de-interleaving the columns, where a
// row at a time spends a masked load, a horizontal sum and a one-lane store on each. Returns the
// rows done.
template <size_t kCols>
size_t NarrowRowSums(int op, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, size_t rows) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto inv = hn::Set(d, 1.0f / float(kCols));
  size_t r = 0;
  for (; r + N <= rows; r += N) {
    const float* p = x + r * kCols;
    hn::Vec<decltype(d)> a, b, c, e, v;
    if constexpr (kCols == 2) {
      hn::LoadInterleaved2(d, p, a, b);
      v = hn::Add(a, b);
    } else if constexpr (kCols == 3) {
      hn::LoadInterleaved3(d, p, a, b, c);
      v = hn::Add(hn::Add(a, b), c);
    } else {
      hn::LoadInterleaved4(d, p, a, b, c, e);
      v = hn::Add(hn::Add(a, b), hn::Add(c, e));
    }
    hn::StoreU(op == 1 ? hn::Mul(v, inv) : v, d, y + r);
  }
  return r;
}

// op: 0 sum, 1 mean, 2 max.
template <typename T>
HWY_NOINLINE void ReduceRows(int op, const T* HWY_RESTRICT x, T* HWY_RESTRICT y, size_t rows,
                             size_t cols) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const float inv = 1.0f / float(cols);
  size_t done = 0;
  if constexpr (hwy::IsSame<T, float>()) {
    if (op != 2) {
      if (cols == 2) done = NarrowRowSums<2>(op, x, y, rows);
      if (cols == 3) done = NarrowRowSums<3>(op, x, y, rows);
      if (cols == 4) done = NarrowRowSums<4>(op, x, y, rows);
    }
  }
  for (size_t r = done; r < rows; ++r) {
    const T* xr = x + r * cols;
    float v;
    if (op == 2) {
      v = RowMax(d, xr, cols);
    } else {
      v = RowSum(d, xr, cols);
      if (op == 1) v *= inv;
    }
    StoreNF32(hn::Set(d1, v), d1, y + r, 1);
  }
}

void ReduceRun(int op, int code, const void* x, void* y, size_t rows, size_t cols) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    using T = typename decltype(s)::type;
    ReduceRows(op, static_cast<const T*>(x), static_cast<T*>(y), rows, cols);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(ReduceRun);

namespace cpu {
namespace {

class ReduceKernel : public KernelBase {
 public:
  ReduceKernel(const Node& n, int op) : KernelBase(n), rop_(op) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (!is_float(x.dtype()) || y.dtype() != x.dtype() || x.rank() == 0) {
      fail("needs a float input of rank >= 1 and a like output, got " + tensors_str({x, y}));
    }
    const int64_t cols = x.dim(-1);
    int64_t rows = 1;
    for (int i = 0; i + 1 < x.rank(); ++i) rows *= x.dim(i);
    if (y.numel() != rows) {
      fail("output " + sizes_str(y.sizes()) + " does not match the rows of " +
           sizes_str(x.sizes()));
    }
    if (rows == 0) return;
    if (cols == 0) {  // empty rows (numpy): sum 0, mean NaN, max -inf
      const double v = rop_ == 0 ? 0.0 : rop_ == 1 ? std::nan("") : -HUGE_VAL;
      Tensor yv = y;  // shares the buffer
      for (int64_t i = 0; i < rows; ++i) yv.set(i, v);
      return;
    }
    const int fc = float_code(x.dtype());
    const size_t es = dtype_size(x.dtype());
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(rows, grain_for(cols), [&](int64_t lo, int64_t hi, int) {
      HWY_DYNAMIC_DISPATCH(ReduceRun)
      (rop_, fc, px + lo * cols * es, py + lo * es, size_t(hi - lo), size_t(cols));
    });
  }

 private:
  int rop_;
};

}  // namespace

std::unique_ptr<OpKernel> make_reduce_kernel(const Node& n) {
  const int op = n.op == OpKind::ReduceSum    ? 0
                 : n.op == OpKind::ReduceMean ? 1
                 : n.op == OpKind::ReduceMax  ? 2
                                              : -1;
  UBF_CHECK(op >= 0, "make_reduce_kernel: " + n.describe());
  return std::make_unique<ReduceKernel>(n, op);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
