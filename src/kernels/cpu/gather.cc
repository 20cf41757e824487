// Gather(data, indices, axis): out[o, i..., k] = data[o, idx[i...], k] where o runs over the
// dims before `axis` and k over the dims after it (one contiguous block per index). Indices are
// i64 or i32; negative ones wrap once (ONNX); any index outside [-dim, dim) is a user error naming
// the node and the index, checked before anything is written.
#include <cstring>
#include <type_traits>

#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

class GatherKernel : public KernelBase {
 public:
  GatherKernel(const Node& n, int64_t axis) : KernelBase(n), axis_(axis) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 2, out);
    const Tensor& data = in[0];
    const Tensor& idx = in[1];
    const Tensor& y = out[0];
    const int64_t r = data.rank();
    const int64_t ax = axis_ < 0 ? axis_ + r : axis_;
    if (r == 0 || ax < 0 || ax >= r) {
      fail("axis " + std::to_string(axis_) + " is out of range for data " + tensors_str({data}));
    }
    if (idx.dtype() != DType::i64 && idx.dtype() != DType::i32) {
      fail("indices must be i64 or i32, got " + tensors_str({idx}));
    }
    Sizes want(data.sizes().begin(), data.sizes().begin() + ax);
    want.insert(want.end(), idx.sizes().begin(), idx.sizes().end());
    want.insert(want.end(), data.sizes().begin() + ax + 1, data.sizes().end());
    if (want != y.sizes() || y.dtype() != data.dtype()) {
      fail("output " + tensors_str({y}) + " does not match gather of " + tensors_str({data, idx}));
    }
    const int64_t dim = data.dim(int(ax));
    const int64_t nidx = idx.numel();
    // Normalize and check every index first.
    std::vector<int64_t> ix(static_cast<size_t>(nidx));
    for (int64_t i = 0; i < nidx; ++i) {
      const int64_t v = idx.dtype() == DType::i64 ? idx.data_as<int64_t>()[i]
                                                  : int64_t(idx.data_as<int32_t>()[i]);
      if (v < -dim || v >= dim) {
        fail("index " + std::to_string(v) + " (at position " + std::to_string(i) +
                 " of the indices) is out of range for axis " + std::to_string(ax) + " of size " +
                 std::to_string(dim) + " (data " + tensors_str({data}) + ")",
             "indices must lie in [-" + std::to_string(dim) + ", " + std::to_string(dim) + ")");
      }
      ix[size_t(i)] = v < 0 ? v + dim : v;
    }
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= data.dim(int(i));
    for (int64_t i = ax + 1; i < r; ++i) inner *= data.dim(int(i));
    const size_t block = size_t(inner) * dtype_size(data.dtype());
    const char* pd = static_cast<const char*>(data.data());
    char* py = static_cast<char*>(y.data());
    if (y.numel() == 0) return;
    // Blocks of one element (a framing Gather: a signal's samples) copy by their fixed size.
    auto copy_items = [&](auto fixed, int64_t lo, int64_t hi) {
      constexpr size_t kFixed = decltype(fixed)::value;
      const size_t b = kFixed ? kFixed : block;
      int64_t o = lo / nidx, i = lo % nidx;
      for (int64_t item = lo; item < hi; ++item) {
        std::memcpy(py + size_t(item) * b,
                    pd + (size_t(o) * size_t(dim) + size_t(ix[size_t(i)])) * b, b);
        if (++i == nidx) i = 0, ++o;
      }
    };
    pool.parallel_for(outer * nidx, grain_for(inner), [&](int64_t lo, int64_t hi, int) {
      switch (block) {
        case 2:
          return copy_items(std::integral_constant<size_t, 2>(), lo, hi);
        case 4:
          return copy_items(std::integral_constant<size_t, 4>(), lo, hi);
        case 8:
          return copy_items(std::integral_constant<size_t, 8>(), lo, hi);
        default:
          return copy_items(std::integral_constant<size_t, 0>(), lo, hi);
      }
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

std::unique_ptr<OpKernel> make_gather_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Gather, "make_gather_kernel: " + n.describe());
  return std::make_unique<GatherKernel>(n, n.attr_int("axis", 0));
}

}  // namespace ubfuse::cpu
