// RotateHalf (RoPE's rotate_half) over the last axis: y = cat(-x[..., h:], x[..., :h]), h = d / 2.
// A move and a sign: the sign is the storage's top bit in every float dtype, so the kernel flips
// bits in integer lanes instead of converting (exact for NaN payloads, infinities and signed
// zeros, as a negation is). Like the other eager kernels it streams outputs too large for the
// caches with non-temporal stores (kernel_util.h: use_stream).
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/rotate_half.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[0, n) = src[0, n), the sign bit flipped when kFlip; with `stream`, non-temporal stores from
// the first vector-aligned element of dst on.
template <bool kFlip, typename Bits>
HWY_INLINE void MoveRun(const Bits* HWY_RESTRICT src, Bits* HWY_RESTRICT dst, size_t n,
                        bool stream) {
  const hn::ScalableTag<Bits> du;
  const size_t N = hn::Lanes(du);
  constexpr Bits kSign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  const auto sign = hn::Set(du, kSign);
  size_t i = 0;
  if (stream) {
    const size_t mis = reinterpret_cast<uintptr_t>(dst) % (N * sizeof(Bits)) / sizeof(Bits);
    for (; mis != 0 && i < N - mis && i < n; ++i) dst[i] = kFlip ? Bits(src[i] ^ kSign) : src[i];
    for (; i + N <= n; i += N) {
      const auto v = hn::LoadU(du, src + i);
      hn::Stream(kFlip ? hn::Xor(v, sign) : v, du, dst + i);
    }
  }
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(du, src + i);
    hn::StoreU(kFlip ? hn::Xor(v, sign) : v, du, dst + i);
  }
  for (; i < n; ++i) dst[i] = kFlip ? Bits(src[i] ^ kSign) : src[i];
}

template <typename Bits>
HWY_NOINLINE void RotateRows(const Bits* HWY_RESTRICT x, Bits* HWY_RESTRICT y, size_t rows,
                             size_t d, bool stream) {
  const size_t h = d / 2;
  for (size_t r = 0; r < rows; ++r) {
    MoveRun<true>(x + r * d + h, y + r * d, h, stream);
    MoveRun<false>(x + r * d, y + r * d + h, h, stream);
  }
}

// es: bytes per element (4 or 2).
void RotateHalfRun(size_t es, const void* x, void* y, size_t rows, size_t d, bool stream) {
  if (es == 4) {
    RotateRows(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), rows, d, stream);
  } else {
    RotateRows(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), rows, d, stream);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(RotateHalfRun);

namespace cpu {
namespace {

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
    const bool stream = use_stream(size_t(y.nbytes()));
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(rows, grain_for(d), [&](int64_t lo, int64_t hi, int) {
      HWY_DYNAMIC_DISPATCH(RotateHalfRun)
      (es, px + size_t(lo * d) * es, py + size_t(lo * d) * es, size_t(hi - lo), size_t(d), stream);
    });
  }
};

}  // namespace

std::unique_ptr<OpKernel> make_rotate_half_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::RotateHalf, "make_rotate_half_kernel: " + n.describe());
  return std::make_unique<RotateHalfKernel>(n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
