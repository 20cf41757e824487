// Binary arithmetic eager kernels (Add, Sub, Mul, Div, Max, Min, Mod, Fmod, PowTensor) with numpy
// broadcasting. The
// output is walked as runs (broadcast_plan.h); each run is one vector loop with every operand
// either contiguous or a broadcast scalar, so bias / per-row-scalar / scalar operands run at the
// speed of the same-shape case. Float storage computes in f32; i64/i32/i8/u8 use plain loops
// (8-bit arithmetic wraps modulo 2^8, as numpy's and ONNX's reference do).
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

// The binary arithmetic of ubfuse/ops.def (UBF_MATH rows of arity 2 and Types Number), as
// UBF_ARITH(Name, VecFn, Form); the other rows expand to nothing.
#define UBF_ARITH_Number2(...) UBF_ARITH(__VA_ARGS__)
#define UBF_ARITH_Number1(...)
#define UBF_ARITH_Float1(...)
#define UBF_ARITH_Bool1(...)
#define UBF_ARITH_Test1(...)
#define UBF_ARITH_Compare2(...)
#define UBF_ARITH_Select3(...)

#ifndef UBFUSE_KERNELS_CPU_BROADCAST_CODES_
#define UBFUSE_KERNELS_CPU_BROADCAST_CODES_
namespace ubfuse::cpu {
enum BinaryCode : int {
#define UBF_ARITH(name, fn, form) k##name,
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_ARITH_##types##arity(name, fn, form)
#include "ubfuse/ops.def"
#undef UBF_ARITH
};
}  // namespace ubfuse::cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/broadcast.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

#define UBF_CALL_Vec(fn) fn(d, a, b)
#define UBF_CALL_Hwy(fn) hn::fn(a, b)
#define UBF_ARITH(name, fn, form)                  \
  struct B##name {                                 \
    template <class D, class V>                    \
    HWY_INLINE V operator()(D d, V a, V b) const { \
      (void)d;                                     \
      return UBF_CALL_##form(fn);                  \
    }                                              \
  };
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_ARITH_##types##arity(name, fn, form)
#include "ubfuse/ops.def"
#undef UBF_ARITH
#undef UBF_CALL_Vec
#undef UBF_CALL_Hwy

template <typename T>
HWY_INLINE float ScalarF32(const T* p) {
  if constexpr (hwy::IsSame<T, float>()) {
    return *p;
  } else if constexpr (hwy::IsSame<T, hwy::bfloat16_t>()) {
    return hwy::F32FromBF16(*p);
  } else {
    uint16_t bits;
    memcpy(&bits, p, 2);
    return F32FromF16Bits(bits);
  }
}

// out[i] = op(a[i or 0], b[i or 0]) for a run of n elements; kAS/kBS: operand is a scalar.
template <class Op, bool kAS, bool kBS, typename T>
HWY_NOINLINE void BinaryLoop(const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* HWY_RESTRICT out,
                             size_t n, bool stream) {
  const hn::ScalableTag<float> d;
  const Op op;
  const auto as = hn::Set(d, kAS ? ScalarF32(a) : 0.0f);
  const auto bs = hn::Set(d, kBS ? ScalarF32(b) : 0.0f);
  MapStore(d, out, n, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
    const auto va = kAS ? as : LoadAt<kFull>(d, a, i, count);
    const auto vb = kBS ? bs : LoadAt<kFull>(d, b, i, count);
    return op(d, va, vb);
  });
}

template <class Op, typename T>
void BinaryModes(const void* a, bool as, const void* b, bool bs, void* out, size_t n, bool stream) {
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  T* po = static_cast<T*>(out);
  if (as) return BinaryLoop<Op, true, false>(pa, pb, po, n, stream);
  if (bs) return BinaryLoop<Op, false, true>(pa, pb, po, n, stream);
  return BinaryLoop<Op, false, false>(pa, pb, po, n, stream);
}

template <typename T>
void BinaryTyped(int op, const void* a, bool as, const void* b, bool bs, void* out, size_t n,
                 bool stream) {
  switch (cpu::BinaryCode(op)) {
#define UBF_ARITH(name, fn, form) \
  case cpu::k##name:              \
    return BinaryModes<B##name, T>(a, as, b, bs, out, n, stream);
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_ARITH_##types##arity(name, fn, form)
#include "ubfuse/ops.def"
#undef UBF_ARITH
  }
}

// One run: n output elements; a/b point at the run's first element (or the scalar). Both scalar
// only happens for n == 1 and is handled as contiguous.
void BinaryRun(int op, int code, const void* a, bool as, const void* b, bool bs, void* out,
               size_t n, bool stream) {
  if (as && bs) as = bs = false;  // n == 1
  WithStorage(code, [&](auto s) HWY_ATTR {
    BinaryTyped<typename decltype(s)::type>(op, a, as, b, bs, out, n, stream);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <optional>
#include <type_traits>

#include "hwy/cache_control.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(BinaryRun);

namespace cpu {
namespace {

constexpr int64_t kBlock = 64;  // chunk boundaries fall on whole cache lines

// Whether v < 0; always false for an unsigned T (no comparison for the compiler to warn about).
template <typename T>
constexpr bool is_neg(T v) {
  if constexpr (std::is_signed_v<T>) {
    return v < 0;
  } else {
    (void)v;
    return false;
  }
}

// x^y for integers, wrapping like the other integer arithmetic (numpy's power); nullopt for 0 to
// a negative power. Other negative powers are 1 / x^-y truncated: 1, -1 or 0.
template <typename T>
std::optional<T> int_pow(T x, T y) {
  using U = std::make_unsigned_t<T>;
  if (is_neg(y)) {
    if (x == 0) return std::nullopt;
    if (x == 1) return T(1);
    if (is_neg(x) && x == T(-1)) return T((y & 1) ? -1 : 1);
    return T(0);
  }
  U r = 1, base = U(x);
  for (U e = U(y); e != 0; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return T(r);
}

// out[i] = f(a[i], b[i]) over a run, with a broadcast scalar operand read once: loops the
// compiler vectorizes (a [L] - [L, 1] position grid of a causal mask, 262144 i64 at 512 tokens).
template <typename T, typename F>
void int_run(const T* a, bool as, const T* b, bool bs, T* out, int64_t n, F f) {
  if (as && bs) {
    std::fill(out, out + n, f(a[0], b[0]));
  } else if (as) {
    const T x = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(x, b[i]);
  } else if (bs) {
    const T y = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], y);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  }
}

// Runs op over a run of integers: sums, differences and products wrap modulo 2^bits, i8's
// -128 / -1 gives -128, a quotient truncates toward zero. Returns why the op fails for a pair of
// operands (a division by zero), nullptr when it does not.
template <typename T>
const char* int_binary(int op, const T* a, bool as, const T* b, bool bs, T* out, int64_t n) {
  // A 16-bit U would promote to int in U * U and overflow it.
  static_assert(sizeof(T) != 2, "int_binary: no 16-bit integer dtype");
  constexpr const char* kDivByZero = "integer division by zero";
  // The ops that cannot fail, in unsigned arithmetic: it wraps where signed overflow would be
  // undefined (i32, i64), and gives 8-bit operands' sums and products modulo 2^8 all the same.
  using U = std::make_unsigned_t<T>;
  switch (BinaryCode(op)) {
    case kAdd:
      int_run(a, as, b, bs, out, n, [](T x, T y) { return T(U(U(x) + U(y))); });
      return nullptr;
    case kSub:
      int_run(a, as, b, bs, out, n, [](T x, T y) { return T(U(U(x) - U(y))); });
      return nullptr;
    case kMul:
      int_run(a, as, b, bs, out, n, [](T x, T y) { return T(U(U(x) * U(y))); });
      return nullptr;
    case kMax:
      int_run(a, as, b, bs, out, n, [](T x, T y) { return x > y ? x : y; });
      return nullptr;
    case kMin:
      int_run(a, as, b, bs, out, n, [](T x, T y) { return x < y ? x : y; });
      return nullptr;
    case kDiv:  // these check each pair, below
    case kMod:
    case kFmod:
    case kPowTensor:
      break;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T x = a[as ? 0 : i], y = b[bs ? 0 : i];
    T r{};
    switch (BinaryCode(op)) {
      case kAdd:
      case kSub:
      case kMul:
      case kMax:
      case kMin:
        UBF_CHECK(false, "int_binary: the ops that cannot fail ran above");
        break;
      case kDiv:
        if (y == 0) return kDivByZero;
        r = T(x / y);
        break;
      case kMod:   // the sign of y (Python's %)
      case kFmod:  // the sign of x (C's %)
        if (y == 0) return kDivByZero;
        r = is_neg(y) && y == T(-1) ? T(0) : T(x % y);  // x % -1 overflows for the least x
        if (BinaryCode(op) == kMod && r != 0 && is_neg(r) != is_neg(y)) r = T(r + y);
        break;
      case kPowTensor: {
        const std::optional<T> p = int_pow(x, y);
        if (!p) return "integer 0 to a negative power (a division by zero)";
        r = *p;
        break;
      }
    }
    out[i] = r;
  }
  return nullptr;
}

class BinaryKernel : public KernelBase {
 public:
  BinaryKernel(const Node& n, int code) : KernelBase(n), code_(code) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 2, out);
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    const Tensor& y = out[0];
    const DType dt = y.dtype();
    if (a.dtype() != dt || b.dtype() != dt) {
      fail("operand and output dtypes differ: " + tensors_str({a, b, y}),
           "insert a Cast so both operands have the same dtype");
    }
    const bool is_int = dt == DType::i32 || dt == DType::i64 || is_int8(dt);
    if (!is_float(dt) && !is_int) {
      fail("is not defined for " + std::string(dtype_name(dt)), "Cast to a numeric dtype first");
    }
    const int64_t n = y.numel();
    if (n == 0) return;
    const BroadcastPlan plan = plan_broadcast({a.sizes(), b.sizes()}, y.sizes(), who_);
    const size_t es = dtype_size(dt);
    const char* pa = static_cast<const char*>(a.data());
    const char* pb = static_cast<const char*>(b.data());
    char* po = static_cast<char*>(y.data());
    const bool stream = use_stream(y.nbytes());
    const int fc = is_int ? -1 : float_code(dt);
    const int64_t nblocks = (n + kBlock - 1) / kBlock;
    pool.parallel_for(nblocks, kMinParallelElems / kBlock, [&](int64_t lo, int64_t hi, int) {
      for_each_run(plan, lo * kBlock, std::min(n, hi * kBlock),
                   [&](int64_t pos, const int64_t* offs, int64_t len) {
                     const void* ra = pa + offs[0] * int64_t(es);
                     const void* rb = pb + offs[1] * int64_t(es);
                     void* ro = po + pos * int64_t(es);
                     const bool as = plan.inner_scalar[0], bs = plan.inner_scalar[1];
                     if (fc >= 0) {
                       HWY_DYNAMIC_DISPATCH(BinaryRun)
                       (code_, fc, ra, as, rb, bs, ro, size_t(len), stream);
                       return;
                     }
                     auto typed = [&](auto zero) {
                       using T = decltype(zero);
                       return int_binary(code_, static_cast<const T*>(ra), as,
                                         static_cast<const T*>(rb), bs, static_cast<T*>(ro), len);
                     };
                     const char* why = dt == DType::i32   ? typed(int32_t{})
                                       : dt == DType::i64 ? typed(int64_t{})
                                       : dt == DType::i8  ? typed(int8_t{})
                                                          : typed(uint8_t{});
                     if (why) fail(why, "guard the divisor or Cast to f32");
                   });
      if (stream) hwy::FlushStream();
    });
  }

 private:
  int code_;
};

}  // namespace

std::unique_ptr<OpKernel> make_binary_kernel(const Node& n) {
  int code = -1;
#define UBF_ARITH(name, fn, form) \
  if (n.op == OpKind::name) code = k##name;
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_ARITH_##types##arity(name, fn, form)
#include "ubfuse/ops.def"
#undef UBF_ARITH
  UBF_CHECK(code >= 0, "make_binary_kernel: not a binary arithmetic op: " + n.describe());
  return std::make_unique<BinaryKernel>(n, code);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
