// Ops that compute or follow indices along one axis: GatherElements (each output element reads
// data at its own position with the axis coordinate replaced by its index) and ArgMax/ArgMin
// (the first extreme along the axis, or the last with select_last_index; ordered comparisons,
// so a NaN is the extreme only where it comes first).
#include <cstring>

#include "kernels/cpu/axis_view.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

class GatherElementsKernel : public KernelBase {
 public:
  explicit GatherElementsKernel(const Node& n) : KernelBase(n), axis_(n.attr_int("axis", 0)) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 2, out);
    const Tensor &data = in[0], &idx = in[1];
    Tensor& y = out[0];
    const int64_t r = data.rank();
    if (idx.rank() != r || y.sizes() != idx.sizes() || y.dtype() != data.dtype() || axis_ < 0 ||
        axis_ >= r) {
      fail("output " + tensors_str({y}) + " does not match GatherElements of " +
           tensors_str({data, idx}));
    }
    for (int64_t d = 0; d < r; d++) {
      if (d != axis_ && idx.dim(int(d)) > data.dim(int(d))) {
        fail("indices " + tensors_str({idx}) + " exceed data " + tensors_str({data}) + " in dim " +
             std::to_string(d));
      }
    }
    const int64_t dim = data.dim(int(axis_));
    auto index_of = [&](int64_t i) { return index_at(idx, i); };
    for (int64_t i = 0; i < idx.numel(); i++) {
      const int64_t v = index_of(i);
      if (v < -dim || v >= dim) {
        fail("index " + std::to_string(v) + " (at position " + std::to_string(i) +
                 ") is out of range for axis " + std::to_string(axis_) + " of size " +
                 std::to_string(dim),
             "indices must lie in [-" + std::to_string(dim) + ", " + std::to_string(dim) + ")");
      }
    }
    if (y.numel() == 0) return;
    // Strides of data and of indices (= output), row-major.
    std::vector<int64_t> ds(size_t(r), 1), is(size_t(r), 1);
    for (int64_t d = r - 2; d >= 0; d--) {
      ds[size_t(d)] = ds[size_t(d) + 1] * data.dim(int(d) + 1);
      is[size_t(d)] = is[size_t(d) + 1] * idx.dim(int(d) + 1);
    }
    const size_t item = dtype_size(data.dtype());
    const char* pd = static_cast<const char*>(data.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(y.numel(), 4096, [&](int64_t lo, int64_t hi, int) {
      for (int64_t i = lo; i < hi; i++) {
        int64_t rest = i, off = 0;
        for (int64_t d = 0; d < r; d++) {
          const int64_t c = rest / is[size_t(d)];
          rest %= is[size_t(d)];
          if (d == axis_) {
            const int64_t v = index_of(i);
            off += (v < 0 ? v + dim : v) * ds[size_t(d)];
          } else {
            off += c * ds[size_t(d)];
          }
        }
        std::memcpy(py + size_t(i) * item, pd + size_t(off) * item, item);
      }
    });
  }

 private:
  int64_t axis_;
};

class ArgKernel : public KernelBase {
 public:
  explicit ArgKernel(const Node& n)
      : KernelBase(n),
        axis_(n.attr_int("axis", 0)),
        max_(n.op == OpKind::ArgMax),
        last_(n.attr_int("select_last_index", 0) != 0) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    Tensor& y = out[0];
    if (axis_ < 0 || axis_ >= x.rank() || y.dtype() != DType::i64) {
      fail("output " + tensors_str({y}) + " does not hold the indices of " + tensors_str({x}));
    }
    const AxisView v(x.sizes(), axis_);
    if (y.numel() != v.outer * v.inner) {
      fail("output " + tensors_str({y}) + " does not hold the indices of " + tensors_str({x}));
    }
    if (y.numel() == 0) return;
    if (v.len == 0) fail("the axis of " + tensors_str({x}) + " is empty: no index to return");
    // int64 compared as itself: past 2^53 its values do not all fit a double.
    if (x.dtype() == DType::i64) {
      const int64_t* px = x.data_as<int64_t>();
      scan<int64_t>(v, y, pool, [px](int64_t i) { return px[i]; });
    } else {
      scan<double>(v, y, pool, [&x](int64_t i) { return x.get(i); });
    }
  }

 private:
  template <typename T, typename Get>
  void scan(const AxisView& v, Tensor& y, ThreadPool& pool, const Get& get) const {
    int64_t* py = y.data_as<int64_t>();
    pool.parallel_for(
        v.outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, v.len * v.inner)),
        [&](int64_t lo, int64_t hi, int) {
          std::vector<T> best(size_t(v.inner));
          for (int64_t o = lo; o < hi; o++) {
            const int64_t base = o * v.len * v.inner;
            int64_t* yo = py + o * v.inner;
            for (int64_t j = 0; j < v.inner; j++) {
              best[size_t(j)] = get(base + j);
              yo[j] = 0;
            }
            for (int64_t k = 1; k < v.len; k++) {
              for (int64_t j = 0; j < v.inner; j++) {
                const T a = get(base + k * v.inner + j), b = best[size_t(j)];
                if (max_ ? (a > b || (last_ && a == b)) : (a < b || (last_ && a == b))) {
                  best[size_t(j)] = a;
                  yo[j] = k;
                }
              }
            }
          }
        });
  }

  int64_t axis_;
  bool max_, last_;
};

}  // namespace

std::unique_ptr<OpKernel> make_index_kernel(const Node& n) {
  if (n.op == OpKind::GatherElements) return std::make_unique<GatherElementsKernel>(n);
  UBF_CHECK(n.op == OpKind::ArgMax || n.op == OpKind::ArgMin, "make_index_kernel: " + n.describe());
  return std::make_unique<ArgKernel>(n);
}

}  // namespace ubfuse::cpu
