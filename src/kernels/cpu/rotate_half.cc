// RotateHalf (RoPE's rotate_half) over the last axis: y = cat(-x[..., h:], x[..., :h]), h = d / 2.
// A move and a sign: the sign is the storage's top bit in every float dtype, so the kernel flips
// bits instead of converting (exact for NaN, infinities and signed zeros, as a negation is). The
// plain loops vectorize under -O3.
#include <cstring>

#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

template <typename Bits>
void rotate_rows(const Bits* x, Bits* y, int64_t rows, int64_t d) {
  constexpr Bits kSign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  const int64_t h = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const Bits* xr = x + r * d;
    Bits* yr = y + r * d;
    for (int64_t j = 0; j < h; ++j) yr[j] = Bits(xr[h + j] ^ kSign);
    std::memcpy(yr + h, xr, size_t(h) * sizeof(Bits));
  }
}

class RotateHalfKernel : public KernelBase {
 public:
  explicit RotateHalfKernel(const Node& n) : KernelBase(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (!is_float(x.dtype()) || y.dtype() != x.dtype() || y.sizes() != x.sizes() || x.rank() == 0 ||
        x.dim(-1) % 2 != 0) {
      fail("needs a float input with an even last dim and a like output, got " +
           tensors_str({x, y}));
    }
    const int64_t d = x.dim(-1);
    const int64_t rows = d == 0 ? 0 : x.numel() / d;
    if (rows == 0) return;
    const size_t es = dtype_size(x.dtype());
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(rows, grain_for(d), [&](int64_t lo, int64_t hi, int) {
      const char* xs = px + size_t(lo * d) * es;
      char* ys = py + size_t(lo * d) * es;
      if (es == 4) {
        rotate_rows(reinterpret_cast<const uint32_t*>(xs), reinterpret_cast<uint32_t*>(ys), hi - lo,
                    d);
      } else {
        rotate_rows(reinterpret_cast<const uint16_t*>(xs), reinterpret_cast<uint16_t*>(ys), hi - lo,
                    d);
      }
    });
  }
};

}  // namespace

std::unique_ptr<OpKernel> make_rotate_half_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::RotateHalf, "make_rotate_half_kernel: " + n.describe());
  return std::make_unique<RotateHalfKernel>(n);
}

}  // namespace ubfuse::cpu
