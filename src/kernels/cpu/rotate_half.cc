// RotateHalf (RoPE's rotation) over the first r columns of the last axis (r = rotary_dims, else
// the whole axis), the rest 0: halves y = cat(-x[..., h:r], x[..., :h]), h = r / 2, or, with
// `interleaved`, adjacent pairs y[2i] = -x[2i+1], y[2i+1] = x[2i] (GPT-J's rotate_every_two).
// A move and a sign: the sign is the storage's top bit in every float dtype, so the kernel flips
// bits in integer lanes instead of converting (exact for NaN payloads, infinities and signed
// zeros, as a negation is). Like the other eager kernels it streams outputs too large for the
// caches with non-temporal stores (kernel_util.h: use_stream).
#include <algorithm>

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

// dst[0, 2 * pairs) = each adjacent pair of src swapped, the first of each pair's sign flipped: a
// pair is one lane twice as wide, rotated by one element (little-endian: the first element is the
// low half, whose top bit is the sign flipped).
template <typename Bits>
HWY_INLINE void SwapPairs(const Bits* HWY_RESTRICT src, Bits* HWY_RESTRICT dst, size_t pairs,
                          bool stream) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pairs are read as little-endian lanes");
  using Wide = hwy::MakeWide<Bits>;
  constexpr int kBits = 8 * sizeof(Bits);
  constexpr Bits kSign = Bits(Bits(1) << (kBits - 1));
  const hn::ScalableTag<Wide> dw;
  const size_t N = hn::Lanes(dw);
  const auto sign = hn::Set(dw, Wide(kSign));
  const Wide* ws = reinterpret_cast<const Wide*>(src);
  Wide* wd = reinterpret_cast<Wide*>(dst);
  // Non-temporal stores need vector-aligned rows: then every pair's lane is aligned too.
  const bool aligned = stream && reinterpret_cast<uintptr_t>(dst) % (N * sizeof(Wide)) == 0;
  size_t i = 0;
  for (; i + N <= pairs; i += N) {
    const auto v = hn::Xor(hn::RotateRight<kBits>(hn::LoadU(dw, ws + i)), sign);
    if (aligned) {
      hn::Stream(v, dw, wd + i);
    } else {
      hn::StoreU(v, dw, wd + i);
    }
  }
  for (; i < pairs; ++i) {
    dst[2 * i] = Bits(src[2 * i + 1] ^ kSign);
    dst[2 * i + 1] = src[2 * i];
  }
}

template <typename Bits>
HWY_NOINLINE void RotateRows(const Bits* HWY_RESTRICT x, Bits* HWY_RESTRICT y, size_t rows,
                             size_t d, size_t r, bool pairs, bool stream) {
  const size_t h = r / 2;
  for (size_t row = 0; row < rows; ++row) {
    const Bits* xr = x + row * d;
    Bits* yr = y + row * d;
    if (pairs) {
      SwapPairs(xr, yr, h, stream);
    } else {
      MoveRun<true>(xr + h, yr, h, stream);
      MoveRun<false>(xr, yr + h, h, stream);
    }
    std::fill(yr + r, yr + d, Bits(0));  // +0.0 in every float dtype
  }
}

// es: bytes per element (4 or 2); the first r of each row's d columns rotate.
void RotateHalfRun(size_t es, const void* x, void* y, size_t rows, size_t d, size_t r, bool pairs,
                   bool stream) {
  if (es == 4) {
    RotateRows(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), rows, d, r, pairs,
               stream);
  } else {
    RotateRows(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), rows, d, r, pairs,
               stream);
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
  explicit RotateHalfKernel(const Node& n)
      : KernelBase(n),
        rotary_dims_(n.attr_int("rotary_dims", 0)),
        pairs_(n.attr_int("interleaved", 0) != 0) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    const int64_t d = x.rank() == 0 ? 0 : x.dim(-1);
    const int64_t r = rotary_dims_ == 0 ? d : rotary_dims_;
    if (!is_float(x.dtype()) || y.dtype() != x.dtype() || y.sizes() != x.sizes() || x.rank() == 0 ||
        r <= 0 || r % 2 != 0 || r > d) {
      fail("needs a float input whose last dim holds an even number of rotated columns (" +
           std::to_string(r) + ") and a like output, got " + tensors_str({x, y}));
    }
    const int64_t rows = d == 0 ? 0 : x.numel() / d;
    if (rows == 0) return;
    const size_t es = dtype_size(x.dtype());
    const bool stream = use_stream(size_t(y.nbytes()));
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(rows, grain_for(d), [&](int64_t lo, int64_t hi, int) {
      HWY_DYNAMIC_DISPATCH(RotateHalfRun)
      (es, px + size_t(lo * d) * es, py + size_t(lo * d) * es, size_t(hi - lo), size_t(d),
       size_t(r), pairs_, stream);
    });
  }

 private:
  const int64_t rotary_dims_;  // 0: the whole last dim
  const bool pairs_;
};

}  // namespace

std::unique_ptr<OpKernel> make_rotate_half_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::RotateHalf, "make_rotate_half_kernel: " + n.describe());
  return std::make_unique<RotateHalfKernel>(n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
