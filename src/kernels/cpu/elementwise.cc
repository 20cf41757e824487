// Unary elementwise eager kernels: f32/bf16/f16 storage computed in f32 with vecmath.h, threaded
// over 64-element blocks; integer Neg/Abs/Relu and bool Not as plain loops.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include <type_traits>

#ifndef UBFUSE_KERNELS_CPU_ELEMENTWISE_CODES_
#define UBFUSE_KERNELS_CPU_ELEMENTWISE_CODES_
namespace ubfuse::cpu {
enum UnaryCode : int {
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kRecip,
  kTanh,
  kSigmoid,
  kRelu,
  kSilu,
  kGeluErf,
  kGeluTanh,
  kErf,
  kPow,
};
// Ops whose loop is compute-bound on a core (a transcendental's polynomial, a divide chain):
// whether they stream their output past kStreamMinBytes depends on the core (store_policy.h).
inline bool unary_is_compute_bound(int op, float p) {
  switch (op) {
    case kExp:
    case kLog:
    case kTanh:
    case kSigmoid:
    case kSilu:
    case kGeluErf:
    case kGeluTanh:
    case kErf:
      return true;
    case kPow:  // PowF's exact fast paths are a multiply or a square root
      return !(p == 0.0f || p == 1.0f || p == 2.0f || p == 3.0f || p == 0.5f || p == -1.0f);
    default:
      return false;
  }
}
}  // namespace ubfuse::cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

#define UBF_UNARY_FUNCTOR(Name, expr)         \
  struct Name {                               \
    float p;                                  \
    template <class D, class V>               \
    HWY_INLINE V operator()(D d, V x) const { \
      (void)d;                                \
      return expr;                            \
    }                                         \
  };
UBF_UNARY_FUNCTOR(UNeg, NegF(d, x))
UBF_UNARY_FUNCTOR(UAbs, AbsF(d, x))
UBF_UNARY_FUNCTOR(UExp, ExpF(d, x))
UBF_UNARY_FUNCTOR(ULog, LogF(d, x))
UBF_UNARY_FUNCTOR(USqrt, SqrtF(d, x))
UBF_UNARY_FUNCTOR(URsqrt, RsqrtF(d, x))
UBF_UNARY_FUNCTOR(URecip, ReciprocalF(d, x))
UBF_UNARY_FUNCTOR(UTanh, TanhF(d, x))
UBF_UNARY_FUNCTOR(USigmoid, SigmoidF(d, x))
UBF_UNARY_FUNCTOR(URelu, ReluF(d, x))
UBF_UNARY_FUNCTOR(USilu, SiluF(d, x))
UBF_UNARY_FUNCTOR(UGeluErf, GeluErfF(d, x))
UBF_UNARY_FUNCTOR(UGeluTanh, GeluTanhF(d, x))
UBF_UNARY_FUNCTOR(UErf, ErfF(d, x))
UBF_UNARY_FUNCTOR(UPow, PowF(d, x, p))
UBF_UNARY_FUNCTOR(USigmoidLowp, SigmoidLowpF(d, x))
UBF_UNARY_FUNCTOR(USiluLowp, SiluLowpF(d, x))
UBF_UNARY_FUNCTOR(UGeluTanhLowp, GeluTanhLowpF(d, x))
#undef UBF_UNARY_FUNCTOR

template <class Op, typename T>
HWY_NOINLINE void UnaryLoop(const T* HWY_RESTRICT in, T* HWY_RESTRICT out, size_t n, bool stream,
                            float p) {
  const hn::ScalableTag<float> d;
  const Op op{p};
  size_t i0 = 0;
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
  // bf16 without AVX-512 (whose dispatched code narrows pairs with VCVTNE2PS2BF16 instead):
  // each element is computed alone, so the loop may take them in even/odd lanes, which saves the
  // widening loads and the narrowing. Plain stores only (the compute-bound ops); streamed
  // outputs take MapStore's aligned path.
  if constexpr (hwy::IsSame<T, hwy::bfloat16_t>()) {
    const size_t N = hn::Lanes(d);
    if (!stream) {
      for (; i0 + 2 * N <= n; i0 += 2 * N) {
        hn::VFromD<decltype(d)> even, odd;
        LoadEvenOddBf16(d, in + i0, even, odd);
        StoreEvenOddBf16(op(d, even), op(d, odd), d, out + i0, false);
      }
    }
  }
#endif
  MapStore(d, out + i0, n - i0, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
    return op(d, LoadAt<kFull>(d, in + i0, i, count));
  });
}

template <typename T>
void UnaryTyped(int op, const void* in, void* out, size_t n, bool stream, float p) {
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  switch (op) {
    case cpu::kNeg:
      return UnaryLoop<UNeg>(x, y, n, stream, p);
    case cpu::kAbs:
      return UnaryLoop<UAbs>(x, y, n, stream, p);
    case cpu::kExp:
      return UnaryLoop<UExp>(x, y, n, stream, p);
    case cpu::kLog:
      return UnaryLoop<ULog>(x, y, n, stream, p);
    case cpu::kSqrt:
      return UnaryLoop<USqrt>(x, y, n, stream, p);
    case cpu::kRsqrt:
      return UnaryLoop<URsqrt>(x, y, n, stream, p);
    case cpu::kRecip:
      return UnaryLoop<URecip>(x, y, n, stream, p);
    case cpu::kTanh:
      return UnaryLoop<UTanh>(x, y, n, stream, p);
    // bf16 keeps 8 significant bits: the bf16-grade forms (half the work) round the same.
    case cpu::kSigmoid:
      if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
        return UnaryLoop<USigmoidLowp>(x, y, n, stream, p);
      }
      return UnaryLoop<USigmoid>(x, y, n, stream, p);
    case cpu::kRelu:
      return UnaryLoop<URelu>(x, y, n, stream, p);
    case cpu::kSilu:
      if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
        return UnaryLoop<USiluLowp>(x, y, n, stream, p);
      }
      return UnaryLoop<USilu>(x, y, n, stream, p);
    case cpu::kGeluErf:
      return UnaryLoop<UGeluErf>(x, y, n, stream, p);
    case cpu::kGeluTanh:
      if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
        return UnaryLoop<UGeluTanhLowp>(x, y, n, stream, p);
      }
      return UnaryLoop<UGeluTanh>(x, y, n, stream, p);
    case cpu::kErf:
      return UnaryLoop<UErf>(x, y, n, stream, p);
    case cpu::kPow:
      return UnaryLoop<UPow>(x, y, n, stream, p);
    default:
      break;
  }
}

// One contiguous run of n elements of float dtype `code` (0 f32, 1 bf16, 2 f16).
void UnaryRun(int op, int code, const void* in, void* out, size_t n, bool stream, float p) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    UnaryTyped<typename decltype(s)::type>(op, in, out, n, stream, p);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>
#include <cstring>

#include "hwy/cache_control.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/store_policy.h"

namespace ubfuse {
HWY_EXPORT(UnaryRun);

namespace cpu {
namespace {

constexpr int64_t kBlock = 64;  // chunk boundaries fall on whole cache lines

template <typename T>
void int_unary(int op, const T* x, T* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    T v = x[i];
    if (op == kNeg) {
      y[i] = T(-v);
    } else if (op == kAbs) {
      y[i] = v < 0 ? T(-v) : v;
    } else {
      y[i] = v < 0 ? T(0) : v;  // kRelu
    }
  }
}

class UnaryKernel : public KernelBase {
 public:
  UnaryKernel(const Node& n, int code, float p, bool is_not)
      : KernelBase(n), code_(code), p_(p), not_(is_not) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (x.numel() != y.numel() || (!not_ && x.dtype() != y.dtype())) {
      fail("input and output differ: " + tensors_str({x, y}));
    }
    const int64_t n = x.numel();
    const int64_t nblocks = (n + kBlock - 1) / kBlock;
    const int64_t grain = kMinParallelElems / kBlock;
    if (not_) {
      if (x.dtype() != DType::boolean || y.dtype() != DType::boolean) {
        fail("needs bool input and output, got " + tensors_str({x, y}));
      }
      const uint8_t* xp = x.data_as<uint8_t>();
      uint8_t* yp = y.data_as<uint8_t>();
      pool.parallel_for(nblocks, grain, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b * kBlock; i < std::min(n, e * kBlock); ++i) yp[i] = xp[i] ? 0 : 1;
      });
      return;
    }
    if (!is_float(x.dtype())) {
      const bool int_ok = code_ == kNeg || code_ == kAbs || code_ == kRelu;
      if (!int_ok || (x.dtype() != DType::i32 && x.dtype() != DType::i64)) {
        fail("is not defined for " + std::string(dtype_name(x.dtype())) + " input",
             "Cast the input to f32 first");
      }
      pool.parallel_for(nblocks, grain, [&](int64_t b, int64_t e, int) {
        const int64_t lo = b * kBlock, hi = std::min(n, e * kBlock);
        if (x.dtype() == DType::i32) {
          int_unary(code_, x.data_as<int32_t>(), y.data_as<int32_t>(), lo, hi);
        } else {
          int_unary(code_, x.data_as<int64_t>(), y.data_as<int64_t>(), lo, hi);
        }
      });
      return;
    }
    const int fc = float_code(x.dtype());
    const size_t es = dtype_size(x.dtype());
    const bool stream = stream_output(y.nbytes(), ComputeLoop::kUnary,
                                      unary_is_compute_bound(code_, p_), y.dtype());
    const char* xp = static_cast<const char*>(x.data());
    char* yp = static_cast<char*>(y.data());
    pool.parallel_for(nblocks, grain, [&](int64_t b, int64_t e, int) {
      const int64_t lo = b * kBlock, hi = std::min(n, e * kBlock);
      HWY_DYNAMIC_DISPATCH(UnaryRun)
      (code_, fc, xp + lo * es, yp + lo * es, size_t(hi - lo), stream, p_);
      if (stream) hwy::FlushStream();
    });
  }

 private:
  int code_;
  float p_;
  bool not_;
};

}  // namespace

std::unique_ptr<OpKernel> make_unary_kernel(const Node& n) {
  float p = 0;
  int code = kNeg;
  switch (n.op) {
    case OpKind::Neg:
      code = kNeg;
      break;
    case OpKind::Abs:
      code = kAbs;
      break;
    case OpKind::Exp:
      code = kExp;
      break;
    case OpKind::Log:
      code = kLog;
      break;
    case OpKind::Sqrt:
      code = kSqrt;
      break;
    case OpKind::Rsqrt:
      code = kRsqrt;
      break;
    case OpKind::Reciprocal:
      code = kRecip;
      break;
    case OpKind::Tanh:
      code = kTanh;
      break;
    case OpKind::Sigmoid:
      code = kSigmoid;
      break;
    case OpKind::Relu:
      code = kRelu;
      break;
    case OpKind::Silu:
      code = kSilu;
      break;
    case OpKind::Erf:
      code = kErf;
      break;
    case OpKind::Gelu: {
      const std::string a = n.attr_str("approximate", "none");
      if (a == "none") {
        code = kGeluErf;
      } else if (a == "tanh") {
        code = kGeluTanh;
      } else {
        kernel_fail(n.describe(),
                    "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + a + "\"");
      }
      break;
    }
    case OpKind::Pow:
      code = kPow;
      p = float(n.attr_float("exponent", 1.0));
      break;
    case OpKind::Not:
      return std::make_unique<UnaryKernel>(n, kNeg, 0.f, true);
    default:
      UBF_CHECK(false, "make_unary_kernel: not a unary op: " + n.describe());
  }
  return std::make_unique<UnaryKernel>(n, code, p, false);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
