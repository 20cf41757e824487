// TopK along one axis: for each line (an (outer, inner) position), the k elements that rank first
// and their indices, in rank order. Largest ranks NaN first, then the larger numbers; smallest
// ranks the smaller numbers first and NaN last; equal elements rank by index, lower first (ONNX),
// so the result is one answer whatever sorted says. A line's elements are ranked with
// std::partial_sort (n log k) on their f32 (exact for bf16/f16) or int64 values; the values are
// copied bit for bit. Lines run in parallel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/axis_view.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

class TopKKernel : public KernelBase {
 public:
  explicit TopKKernel(const Node& n)
      : KernelBase(n), axis_(n.attr_int("axis", -1)), largest_(n.attr_int("largest", 1) != 0) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    UBF_CHECK(in.size() == 2 && out.size() == 2, who_ + ": kernel needs 2 inputs and 2 outputs");
    const Tensor &x = in[0], &kt = in[1];
    Tensor &vals = out[0], &idx = out[1];
    const int64_t r = x.rank();
    bool ok = axis_ >= 0 && axis_ < r && vals.dtype() == x.dtype() && idx.dtype() == DType::i64 &&
              vals.sizes() == idx.sizes() && vals.rank() == r;
    for (int64_t d = 0; ok && d < r; d++) ok = d == axis_ || vals.dim(int(d)) == x.dim(int(d));
    if (!ok) {
      fail("outputs " + tensors_str({vals, idx}) + " do not hold the top k of " + tensors_str({x}) +
           " along axis " + std::to_string(axis_));
    }
    const int64_t len = x.dim(int(axis_)), k = vals.dim(int(axis_));
    if (kt.numel() != 1 || (kt.dtype() != DType::i64 && kt.dtype() != DType::i32) ||
        index_at(kt, 0) != k || k > len) {
      fail("k " + (kt.numel() == 1 ? std::to_string(int64_t(kt.get(0))) : tensors_str({kt})) +
               " does not give outputs " + tensors_str({vals, idx}) + " for " + tensors_str({x}),
           "k is one int64 in [0, the axis' length]");
    }
    if (vals.numel() == 0) return;
    const AxisView v(x.sizes(), axis_);
    switch (x.dtype()) {
      case DType::f32: {
        const float* p = x.data_as<float>();
        select<float>(
            v, k, [p](int64_t i) { return p[i]; }, x, vals, idx, pool);
        return;
      }
      case DType::bf16: {
        const uint16_t* p = x.data_as<uint16_t>();
        select<float>(
            v, k, [p](int64_t i) { return bf16_to_f32(p[i]); }, x, vals, idx, pool);
        return;
      }
      case DType::f16: {
        const uint16_t* p = x.data_as<uint16_t>();
        select<float>(
            v, k, [p](int64_t i) { return f16_to_f32(p[i]); }, x, vals, idx, pool);
        return;
      }
      case DType::i64: {
        const int64_t* p = x.data_as<int64_t>();
        select<int64_t>(
            v, k, [p](int64_t i) { return p[i]; }, x, vals, idx, pool);
        return;
      }
      case DType::i32: {
        const int32_t* p = x.data_as<int32_t>();
        select<int64_t>(
            v, k, [p](int64_t i) { return int64_t(p[i]); }, x, vals, idx, pool);
        return;
      }
      case DType::boolean:
      case DType::i8:  // shape inference keeps 8-bit integers out
      case DType::u8:
        break;
    }
    fail("cannot rank " + tensors_str({x}), "Cast the input to an integer or float dtype");
  }

 private:
  template <typename Key, typename Load>
  void select(const AxisView& v, int64_t k, Load load, const Tensor& x, Tensor& vals, Tensor& idx,
              ThreadPool& pool) const {
    const size_t item = dtype_size(x.dtype());
    const char* px = static_cast<const char*>(x.data());
    char* pv = static_cast<char*>(vals.data());
    int64_t* pi = idx.data_as<int64_t>();
    const bool largest = largest_;
    pool.parallel_for(v.outer * v.inner, grain_for(v.len), [&](int64_t lo, int64_t hi, int) {
      std::vector<Key> keys(size_t(v.len));
      std::vector<int64_t> order(size_t(v.len));
      // Whether element a ranks before element b of the line.
      auto before = [&](int64_t a, int64_t b) {
        const Key ka = keys[size_t(a)], kb = keys[size_t(b)];
        if constexpr (std::is_floating_point_v<Key>) {
          const bool na = std::isnan(ka), nb = std::isnan(kb);
          if (na || nb) return na && nb ? a < b : largest ? na : nb;
        }
        if (ka != kb) return largest ? ka > kb : ka < kb;
        return a < b;
      };
      for (int64_t t = lo; t < hi; t++) {
        const int64_t o = t / v.inner, j = t % v.inner;
        for (int64_t e = 0; e < v.len; e++) {
          keys[size_t(e)] = load(v.at(o, e, j));
          order[size_t(e)] = e;
        }
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t r = 0; r < k; r++) {
          const int64_t dst = (o * k + r) * v.inner + j, e = order[size_t(r)];
          std::memcpy(pv + size_t(dst) * item, px + size_t(v.at(o, e, j)) * item, item);
          pi[dst] = e;
        }
      }
    });
  }

  int64_t axis_;
  bool largest_;
};

}  // namespace

std::unique_ptr<OpKernel> make_topk_kernel(const Node& n) {
  return std::make_unique<TopKKernel>(n);
}

}  // namespace ubfuse::cpu
