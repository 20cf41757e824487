// CumSum along one axis (ONNX): out[k] = x[0] + ... + x[k], or up to x[k-1] (exclusive), or from
// the far end (reverse). Floats are summed in double and rounded once per output, so a long axis
// keeps its precision and the result is the double reference's; integers wrap (two's complement)
// as ONNX Runtime's do. The (outer, column block) pairs run in parallel, each block's columns side
// by side so the loads stream along memory.
#include <algorithm>

#include "kernels/cpu/axis_view.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

// Columns (positions after the axis) one task scans side by side.
constexpr int64_t kBlock = 256;

class CumSumKernel : public KernelBase {
 public:
  explicit CumSumKernel(const Node& n)
      : KernelBase(n),
        axis_(n.attr_int("axis", 0)),
        exclusive_(n.attr_int("exclusive", 0) != 0),
        reverse_(n.attr_int("reverse", 0) != 0) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 2, out);
    const Tensor& x = in[0];
    Tensor& y = out[0];
    int64_t axis = axis_;
    if (in.size() == 2) {  // (x, axis): the axis a one-element value operand
      const Tensor& a = in[1];
      if (a.numel() != 1 || (a.dtype() != DType::i64 && a.dtype() != DType::i32)) {
        fail("axis must be one i64 or i32 value, got " + tensors_str({a}));
      }
      const int64_t v = a.dtype() == DType::i64 ? a.data_as<int64_t>()[0] : a.data_as<int32_t>()[0];
      if (v < -x.rank() || v >= x.rank()) {
        fail("axis " + std::to_string(v) + " is out of range for the input " + tensors_str({x}),
             "an axis lies in [-rank, rank); a negative one counts from the end");
      }
      axis = v < 0 ? v + x.rank() : v;
    }
    if (axis < 0 || axis >= x.rank() || y.sizes() != x.sizes() || y.dtype() != x.dtype()) {
      fail("output " + tensors_str({y}) + " does not hold the running sums of " + tensors_str({x}) +
           " along axis " + std::to_string(axis));
    }
    if (x.numel() == 0) return;
    const AxisView v(x.sizes(), axis);
    switch (x.dtype()) {
      case DType::f32: {
        const float* px = x.data_as<float>();
        float* py = y.data_as<float>();
        scan<double>(
            v, [&](int64_t i) { return double(px[i]); },
            [&](int64_t i, double s) { py[i] = float(s); }, pool);
        return;
      }
      case DType::bf16: {
        const uint16_t* px = x.data_as<uint16_t>();
        uint16_t* py = y.data_as<uint16_t>();
        scan<double>(
            v, [&](int64_t i) { return double(bf16_to_f32(px[i])); },
            [&](int64_t i, double s) { py[i] = f32_to_bf16(float(s)); }, pool);
        return;
      }
      case DType::f16: {
        const uint16_t* px = x.data_as<uint16_t>();
        uint16_t* py = y.data_as<uint16_t>();
        scan<double>(
            v, [&](int64_t i) { return double(f16_to_f32(px[i])); },
            [&](int64_t i, double s) { py[i] = f32_to_f16(float(s)); }, pool);
        return;
      }
      case DType::i64: {  // unsigned arithmetic: overflow wraps instead of being undefined
        const int64_t* px = x.data_as<int64_t>();
        int64_t* py = y.data_as<int64_t>();
        scan<uint64_t>(
            v, [&](int64_t i) { return uint64_t(px[i]); },
            [&](int64_t i, uint64_t s) { py[i] = int64_t(s); }, pool);
        return;
      }
      case DType::i32: {
        const int32_t* px = x.data_as<int32_t>();
        int32_t* py = y.data_as<int32_t>();
        scan<uint32_t>(
            v, [&](int64_t i) { return uint32_t(px[i]); },
            [&](int64_t i, uint32_t s) { py[i] = int32_t(s); }, pool);
        return;
      }
      case DType::boolean:
      case DType::i8:  // shape inference keeps 8-bit integers out
      case DType::u8:
        break;
    }
    fail("cannot sum " + tensors_str({x}), "Cast the input to an integer or float dtype");
  }

 private:
  template <typename Acc, typename Load, typename Store>
  void scan(const AxisView& v, Load load, Store store, ThreadPool& pool) const {
    const int64_t blocks = (v.inner + kBlock - 1) / kBlock;
    pool.parallel_for(v.outer * blocks, grain_for(v.len * std::min(v.inner, kBlock)),
                      [&](int64_t lo, int64_t hi, int) {
                        Acc acc[kBlock];
                        for (int64_t t = lo; t < hi; t++) {
                          const int64_t o = t / blocks, j0 = (t % blocks) * kBlock;
                          const int64_t w = std::min(kBlock, v.inner - j0);
                          std::fill(acc, acc + w, Acc(0));
                          for (int64_t s = 0; s < v.len; s++) {
                            const int64_t row = v.at(o, reverse_ ? v.len - 1 - s : s, j0);
                            for (int64_t j = 0; j < w; j++) {
                              const Acc a =
                                  load(row + j);  // read before the write: safe in place too
                              if (exclusive_) {
                                store(row + j, acc[j]);
                                acc[j] += a;
                              } else {
                                acc[j] += a;
                                store(row + j, acc[j]);
                              }
                            }
                          }
                        }
                      });
  }

  int64_t axis_;
  bool exclusive_, reverse_;
};

}  // namespace

std::unique_ptr<OpKernel> make_cumsum_kernel(const Node& n) {
  return std::make_unique<CumSumKernel>(n);
}

}  // namespace ubfuse::cpu
