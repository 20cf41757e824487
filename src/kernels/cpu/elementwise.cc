// Unary elementwise eager kernels: f32/bf16/f16 storage computed in f32 with vecmath.h, threaded
// over 64-element blocks; integer (i64, i32, i8, u8) Neg/Abs/Relu/Sign and bool Not as plain
// loops (8-bit Neg and Abs wrap: -(-128) is -128 in i8, as in numpy); the float tests
// (IsNaN, IsInf) store bools.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include <type_traits>

// The float unary math of ubfuse/ops.def (UBF_MATH rows of arity 1 and Types Float or Number),
// as UBF_FLOAT_UNARY(Name, VecFn, Form, Cost), and its tests (Types Test: float -> bool) as
// UBF_TEST_UNARY(Name, VecFn, Form, Cost); the other rows expand to nothing.
#define UBF_FLOAT_UNARY_Float1(...) UBF_FLOAT_UNARY(__VA_ARGS__)
#define UBF_FLOAT_UNARY_Number1(...) UBF_FLOAT_UNARY(__VA_ARGS__)
#define UBF_FLOAT_UNARY_Test1(...) UBF_TEST_UNARY(__VA_ARGS__)
#define UBF_FLOAT_UNARY_Bool1(...)
#define UBF_FLOAT_UNARY_Number2(...)
#define UBF_FLOAT_UNARY_Compare2(...)
#define UBF_FLOAT_UNARY_Select3(...)

#ifndef UBFUSE_KERNELS_CPU_ELEMENTWISE_CODES_
#define UBFUSE_KERNELS_CPU_ELEMENTWISE_CODES_
namespace ubfuse::cpu {
// The ops of the eager unary kernel: the float unary math of ops.def, then the forms of ops with
// attributes.
enum UnaryCode : int {
#define UBF_FLOAT_UNARY(name, fn, form, cost) k##name,
#define UBF_TEST_UNARY(...)
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
  kGeluErf,
  kGeluTanh,
  kPow,
};
// The float tests of ops.def (float in, bool out).
enum TestCode : int {
#define UBF_FLOAT_UNARY(...)
#define UBF_TEST_UNARY(name, fn, form, cost) k##name,
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
};
// Ops whose loop is compute-bound on a core (a transcendental's polynomial: Cost Poly in
// ops.def): whether they stream their output past kStreamMinBytes depends on the core
// (store_policy.h).
inline bool unary_is_compute_bound(int op, float p) {
  switch (UnaryCode(op)) {
#define UBF_POLY_Poly true
#define UBF_POLY_Divide false
#define UBF_POLY_Cheap false
#define UBF_FLOAT_UNARY(name, fn, form, cost) \
  case k##name:                               \
    return UBF_POLY_##cost;
#define UBF_TEST_UNARY(...)
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
#undef UBF_POLY_Poly
#undef UBF_POLY_Divide
#undef UBF_POLY_Cheap
    case kGeluErf:
    case kGeluTanh:
      return true;
    case kPow:  // PowF's exact fast paths are a multiply or a square root
      return !(p == 0.0f || p == 1.0f || p == 2.0f || p == 3.0f || p == 0.5f || p == -1.0f);
  }
  return false;
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
#define UBF_CALL_Vec(fn) fn(d, x)
#define UBF_CALL_Hwy(fn) hn::fn(x)
#define UBF_FLOAT_UNARY(name, fn, form, cost) UBF_UNARY_FUNCTOR(U##name, UBF_CALL_##form(fn))
#define UBF_TEST_UNARY(name, fn, form, cost) UBF_UNARY_FUNCTOR(U##name, UBF_CALL_##form(fn))
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
#undef UBF_CALL_Vec
#undef UBF_CALL_Hwy
UBF_UNARY_FUNCTOR(UGeluErf, GeluErfF(d, x))
UBF_UNARY_FUNCTOR(UGeluTanh, GeluTanhF(d, x))
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
  // bf16 keeps 8 significant bits: the bf16-grade forms (half the work) round the same.
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    if (op == cpu::kSigmoid) return UnaryLoop<USigmoidLowp>(x, y, n, stream, p);
    if (op == cpu::kSilu) return UnaryLoop<USiluLowp>(x, y, n, stream, p);
    if (op == cpu::kGeluTanh) return UnaryLoop<UGeluTanhLowp>(x, y, n, stream, p);
  }
  switch (cpu::UnaryCode(op)) {
#define UBF_FLOAT_UNARY(name, fn, form, cost) \
  case cpu::k##name:                          \
    return UnaryLoop<U##name>(x, y, n, stream, p);
#define UBF_TEST_UNARY(...)
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
    case cpu::kGeluErf:
      return UnaryLoop<UGeluErf>(x, y, n, stream, p);
    case cpu::kGeluTanh:
      return UnaryLoop<UGeluTanh>(x, y, n, stream, p);
    case cpu::kPow:
      return UnaryLoop<UPow>(x, y, n, stream, p);
  }
}

// One contiguous run of n elements of float dtype `code` (0 f32, 1 bf16, 2 f16).
void UnaryRun(int op, int code, const void* in, void* out, size_t n, bool stream, float p) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    UnaryTyped<typename decltype(s)::type>(op, in, out, n, stream, p);
  });
}

// A float test (cpu::TestCode) over n elements of float dtype `code` into bools: the 0/1 floats
// of its vector function, stored as bytes.
template <class Op, typename T>
HWY_NOINLINE void TestLoop(const T* HWY_RESTRICT in, uint8_t* HWY_RESTRICT out, size_t n) {
  const hn::ScalableTag<float> d;
  const Op op{0.0f};
  MapStore(d, out, n, false, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
    return op(d, LoadAt<kFull>(d, in, i, count));
  });
}

void TestRun(int op, int code, const void* in, void* out, size_t n) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    using T = typename decltype(s)::type;
    const T* x = static_cast<const T*>(in);
    uint8_t* y = static_cast<uint8_t*>(out);
    switch (cpu::TestCode(op)) {
#define UBF_FLOAT_UNARY(...)
#define UBF_TEST_UNARY(name, fn, form, cost) \
  case cpu::k##name:                         \
    return TestLoop<U##name>(x, y, n);
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
    }
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
HWY_EXPORT(TestRun);

namespace cpu {
namespace {

constexpr int64_t kBlock = 64;  // chunk boundaries fall on whole cache lines

template <typename T>
void int_unary(int op, const T* x, T* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    T v = x[i];
    bool neg = false;
    if constexpr (std::is_signed_v<T>) neg = v < 0;
    if (op == kNeg) {
      y[i] = T(-v);
    } else if (op == kAbs) {
      y[i] = neg ? T(-v) : v;
    } else if (op == kSign) {
      y[i] = T(int(v != 0 && !neg) - int(neg));
    } else {
      y[i] = neg ? T(0) : v;  // kRelu
    }
  }
}

// How a unary kernel maps its input to its output: a float op (the same dtype, integers for a
// few), Not (bool to bool) or a float test (float to bool).
enum class UnaryMode { kSame, kNot, kTest };

class UnaryKernel : public KernelBase {
 public:
  UnaryKernel(const Node& n, int code, float p, UnaryMode mode = UnaryMode::kSame)
      : KernelBase(n), code_(code), p_(p), mode_(mode) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (x.numel() != y.numel() || (mode_ == UnaryMode::kSame && x.dtype() != y.dtype())) {
      fail("input and output differ: " + tensors_str({x, y}));
    }
    const int64_t n = x.numel();
    const int64_t nblocks = (n + kBlock - 1) / kBlock;
    const int64_t grain = kMinParallelElems / kBlock;
    if (mode_ == UnaryMode::kTest) {
      if (!is_float(x.dtype()) || y.dtype() != DType::boolean) {
        fail("needs a float input and a bool output, got " + tensors_str({x, y}),
             "Cast the input to f32 first");
      }
      const int fc = float_code(x.dtype());
      const size_t es = dtype_size(x.dtype());
      const char* xp = static_cast<const char*>(x.data());
      uint8_t* yp = y.data_as<uint8_t>();
      pool.parallel_for(nblocks, grain, [&](int64_t b, int64_t e, int) {
        const int64_t lo = b * kBlock, hi = std::min(n, e * kBlock);
        HWY_DYNAMIC_DISPATCH(TestRun)(code_, fc, xp + lo * es, yp + lo, size_t(hi - lo));
      });
      return;
    }
    if (mode_ == UnaryMode::kNot) {
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
      const bool int_ok = code_ == kNeg || code_ == kAbs || code_ == kRelu || code_ == kSign;
      const DType dt = x.dtype();
      if (!int_ok || (dt != DType::i32 && dt != DType::i64 && !is_int8(dt))) {
        fail("is not defined for " + std::string(dtype_name(dt)) + " input",
             "Cast the input to f32 first");
      }
      pool.parallel_for(nblocks, grain, [&](int64_t b, int64_t e, int) {
        const int64_t lo = b * kBlock, hi = std::min(n, e * kBlock);
        if (dt == DType::i32) {
          int_unary(code_, x.data_as<int32_t>(), y.data_as<int32_t>(), lo, hi);
        } else if (dt == DType::i64) {
          int_unary(code_, x.data_as<int64_t>(), y.data_as<int64_t>(), lo, hi);
        } else if (dt == DType::i8) {
          int_unary(code_, x.data_as<int8_t>(), y.data_as<int8_t>(), lo, hi);
        } else {
          int_unary(code_, x.data_as<uint8_t>(), y.data_as<uint8_t>(), lo, hi);
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
  UnaryMode mode_;
};

}  // namespace

std::unique_ptr<OpKernel> make_unary_kernel(const Node& n) {
  if (n.op == OpKind::Not) return std::make_unique<UnaryKernel>(n, kNeg, 0.f, UnaryMode::kNot);
#define UBF_FLOAT_UNARY(...)
#define UBF_TEST_UNARY(name, fn, form, cost) \
  if (n.op == OpKind::name) return std::make_unique<UnaryKernel>(n, k##name, 0.f, UnaryMode::kTest);
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
  if (n.op == OpKind::Pow) {
    return std::make_unique<UnaryKernel>(n, kPow, float(n.attr_float("exponent", 1.0)));
  }
  if (n.op == OpKind::Gelu) {
    const std::string a = n.attr_str("approximate", "none");
    if (a != "none" && a != "tanh") {
      kernel_fail(n.describe(),
                  "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + a + "\"");
    }
    return std::make_unique<UnaryKernel>(n, a == "tanh" ? kGeluTanh : kGeluErf, 0.f);
  }
  int code = -1;
#define UBF_FLOAT_UNARY(name, fn, form, cost) \
  if (n.op == OpKind::name) code = k##name;
#define UBF_TEST_UNARY(...)
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_FLOAT_UNARY_##types##arity(name, fn, form, cost)
#include "ubfuse/ops.def"
#undef UBF_FLOAT_UNARY
#undef UBF_TEST_UNARY
  UBF_CHECK(code >= 0, "make_unary_kernel: not a unary op: " + n.describe());
  return std::make_unique<UnaryKernel>(n, code, 0.f);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
