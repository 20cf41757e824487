// Comparison (Equal, Less, Greater -> bool) and selection (Where) eager kernels with numpy
// broadcasting, walked as runs like broadcast.cc. Float operands compare in f32 (vectorized);
// integer and bool operands use plain loops. bool is one byte, 0 or 1.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#ifndef UBFUSE_KERNELS_CPU_COMPARE_CODES_
#define UBFUSE_KERNELS_CPU_COMPARE_CODES_
namespace ubfuse::cpu {
enum CompareCode : int { kEqual, kLess, kGreater };
}  // namespace ubfuse::cpu
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/compare.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

template <typename T>
HWY_INLINE float ScalarToF32(const T* p) {
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

template <int kOp, class D, class V>
HWY_INLINE auto CompareV(D, V a, V b) {
  if constexpr (kOp == cpu::kEqual) {
    return hn::Eq(a, b);
  } else if constexpr (kOp == cpu::kLess) {
    return hn::Lt(a, b);
  } else {
    return hn::Gt(a, b);
  }
}

// out[i] = a[i] OP b[i] as 0/1 bytes; kAS/kBS: operand is a scalar.
template <int kOp, bool kAS, bool kBS, typename T>
HWY_NOINLINE void CompareLoop(const T* HWY_RESTRICT a, const T* HWY_RESTRICT b,
                              uint8_t* HWY_RESTRICT out, size_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const size_t N = hn::Lanes(d);
  const auto as = hn::Set(d, kAS ? ScalarToF32(a) : 0.0f);
  const auto bs = hn::Set(d, kBS ? ScalarToF32(b) : 0.0f);
  const auto one = hn::Set(di, 1);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto va = kAS ? as : LoadF32(d, a + i);
    const auto vb = kBS ? bs : LoadF32(d, b + i);
    const auto m = hn::RebindMask(di, CompareV<kOp>(d, va, vb));
    hn::StoreU(hn::DemoteTo(du8, hn::IfThenElseZero(m, one)), du8, out + i);
  }
  if (i < n) {
    const size_t c = n - i;
    const auto va = kAS ? as : LoadNF32(d, a + i, c);
    const auto vb = kBS ? bs : LoadNF32(d, b + i, c);
    const auto m = hn::RebindMask(di, CompareV<kOp>(d, va, vb));
    HWY_ALIGN uint8_t tmp[hn::MaxLanes(du8)];
    hn::Store(hn::DemoteTo(du8, hn::IfThenElseZero(m, one)), du8, tmp);
    memcpy(out + i, tmp, c);
  }
}

template <int kOp, typename T>
void CompareModes(const void* a, bool as, const void* b, bool bs, uint8_t* out, size_t n) {
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  if (as) return CompareLoop<kOp, true, false>(pa, pb, out, n);
  if (bs) return CompareLoop<kOp, false, true>(pa, pb, out, n);
  return CompareLoop<kOp, false, false>(pa, pb, out, n);
}

template <typename T>
void CompareTyped(int op, const void* a, bool as, const void* b, bool bs, uint8_t* out, size_t n) {
  switch (cpu::CompareCode(op)) {
    case cpu::kEqual:
      return CompareModes<cpu::kEqual, T>(a, as, b, bs, out, n);
    case cpu::kLess:
      return CompareModes<cpu::kLess, T>(a, as, b, bs, out, n);
    case cpu::kGreater:
      return CompareModes<cpu::kGreater, T>(a, as, b, bs, out, n);
  }
}

// One run of n elements, float code 0 f32 / 1 bf16 / 2 f16.
void CompareRun(int op, int code, const void* a, bool as, const void* b, bool bs, void* out,
                size_t n) {
  if (as && bs) as = bs = false;  // n == 1
  uint8_t* o = static_cast<uint8_t*>(out);
  WithStorage(code, [&](auto s) HWY_ATTR {
    CompareTyped<typename decltype(s)::type>(op, a, as, b, bs, o, n);
  });
}

// out[i] = c[i] ? a[i] : b[i]; float storage is selected without conversion (bit copy).
template <bool kCS, bool kAS, bool kBS, typename T>
HWY_NOINLINE void WhereLoop(const uint8_t* HWY_RESTRICT c, const T* HWY_RESTRICT a,
                            const T* HWY_RESTRICT b, T* HWY_RESTRICT out, size_t n, bool stream) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const auto as = hn::Set(d, kAS ? ScalarToF32(a) : 0.0f);
  const auto bs = hn::Set(d, kBS ? ScalarToF32(b) : 0.0f);
  const auto cs = hn::Set(di, kCS ? int32_t(c[0]) : 0);
  MapStore(d, out, n, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
    const auto va = kAS ? as : LoadAt<kFull>(d, a, i, count);
    const auto vb = kBS ? bs : LoadAt<kFull>(d, b, i, count);
    hn::Vec<decltype(di)> vc;
    if constexpr (kCS) {
      vc = cs;
    } else if constexpr (kFull) {
      vc = hn::PromoteTo(di, hn::LoadU(du8, c + i));
    } else {
      HWY_ALIGN uint8_t tmp[hn::MaxLanes(du8)] = {};
      memcpy(tmp, c + i, count);
      vc = hn::PromoteTo(di, hn::Load(du8, tmp));
    }
    const auto m = hn::RebindMask(d, hn::Ne(vc, hn::Zero(di)));
    return hn::IfThenElse(m, va, vb);
  });
}

template <typename T>
void WhereTyped(const void* c, bool cs, const void* a, bool as, const void* b, bool bs, void* out,
                size_t n, bool stream) {
  const uint8_t* pc = static_cast<const uint8_t*>(c);
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  T* po = static_cast<T*>(out);
  const int mode = (cs ? 4 : 0) | (as ? 2 : 0) | (bs ? 1 : 0);
  switch (mode) {
    case 0:
      return WhereLoop<false, false, false>(pc, pa, pb, po, n, stream);
    case 1:
      return WhereLoop<false, false, true>(pc, pa, pb, po, n, stream);
    case 2:
      return WhereLoop<false, true, false>(pc, pa, pb, po, n, stream);
    case 3:
      return WhereLoop<false, true, true>(pc, pa, pb, po, n, stream);
    case 4:
      return WhereLoop<true, false, false>(pc, pa, pb, po, n, stream);
    case 5:
      return WhereLoop<true, false, true>(pc, pa, pb, po, n, stream);
    case 6:
      return WhereLoop<true, true, false>(pc, pa, pb, po, n, stream);
    default:
      return WhereLoop<false, false, false>(pc, pa, pb, po, n, stream);  // n == 1
  }
}

void WhereRun(int code, const void* c, bool cs, const void* a, bool as, const void* b, bool bs,
              void* out, size_t n, bool stream) {
  WithStorage(code, [&](auto s) HWY_ATTR {
    WhereTyped<typename decltype(s)::type>(c, cs, a, as, b, bs, out, n, stream);
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy/cache_control.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(CompareRun);
HWY_EXPORT(WhereRun);

namespace cpu {
namespace {

constexpr int64_t kBlock = 64;

template <typename T>
void int_compare(int op, const T* a, bool as, const T* b, bool bs, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T x = a[as ? 0 : i], y = b[bs ? 0 : i];
    out[i] = op == kEqual ? x == y : op == kLess ? x < y : x > y;
  }
}

template <typename T>
void plain_where(const uint8_t* c, bool cs, const T* a, bool as, const T* b, bool bs, T* out,
                 int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = c[cs ? 0 : i] ? a[as ? 0 : i] : b[bs ? 0 : i];
}

class CompareKernel : public KernelBase {
 public:
  CompareKernel(const Node& n, int code) : KernelBase(n), code_(code) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 2, out);
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    const Tensor& y = out[0];
    const DType dt = a.dtype();
    if (b.dtype() != dt || y.dtype() != DType::boolean) {
      fail("needs operands of one dtype and a bool output, got " + tensors_str({a, b, y}),
           "insert a Cast so both operands have the same dtype");
    }
    const int64_t n = y.numel();
    if (n == 0) return;
    const BroadcastPlan plan = plan_broadcast({a.sizes(), b.sizes()}, y.sizes(), who_);
    const int64_t es = int64_t(dtype_size(dt));
    const char* pa = static_cast<const char*>(a.data());
    const char* pb = static_cast<const char*>(b.data());
    uint8_t* po = y.data_as<uint8_t>();
    const int fc = is_float(dt) ? float_code(dt) : -1;
    const int64_t nblocks = (n + kBlock - 1) / kBlock;
    pool.parallel_for(nblocks, kMinParallelElems / kBlock, [&](int64_t lo, int64_t hi, int) {
      for_each_run(
          plan, lo * kBlock, std::min(n, hi * kBlock),
          [&](int64_t pos, const int64_t* offs, int64_t len) {
            const char* ra = pa + offs[0] * es;
            const char* rb = pb + offs[1] * es;
            const bool as = plan.inner_scalar[0], bs = plan.inner_scalar[1];
            switch (dt) {
              case DType::i64:
                return int_compare(code_, reinterpret_cast<const int64_t*>(ra), as,
                                   reinterpret_cast<const int64_t*>(rb), bs, po + pos, len);
              case DType::i32:
                return int_compare(code_, reinterpret_cast<const int32_t*>(ra), as,
                                   reinterpret_cast<const int32_t*>(rb), bs, po + pos, len);
              case DType::i8:
                return int_compare(code_, reinterpret_cast<const int8_t*>(ra), as,
                                   reinterpret_cast<const int8_t*>(rb), bs, po + pos, len);
              case DType::boolean:
              case DType::u8:
                return int_compare(code_, reinterpret_cast<const uint8_t*>(ra), as,
                                   reinterpret_cast<const uint8_t*>(rb), bs, po + pos, len);
              default:
                HWY_DYNAMIC_DISPATCH(CompareRun)(code_, fc, ra, as, rb, bs, po + pos, size_t(len));
            }
          });
    });
  }

 private:
  int code_;
};

class WhereKernel : public KernelBase {
 public:
  explicit WhereKernel(const Node& n) : KernelBase(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 3, 3, out);
    const Tensor& c = in[0];
    const Tensor& a = in[1];
    const Tensor& b = in[2];
    const Tensor& y = out[0];
    const DType dt = y.dtype();
    if (c.dtype() != DType::boolean || a.dtype() != dt || b.dtype() != dt) {
      fail("needs (bool, T, T) -> T, got " + tensors_str({c, a, b, y}));
    }
    const int64_t n = y.numel();
    if (n == 0) return;
    const BroadcastPlan plan = plan_broadcast({c.sizes(), a.sizes(), b.sizes()}, y.sizes(), who_);
    const int64_t es = int64_t(dtype_size(dt));
    const uint8_t* pc = c.data_as<uint8_t>();
    const char* pa = static_cast<const char*>(a.data());
    const char* pb = static_cast<const char*>(b.data());
    char* po = static_cast<char*>(y.data());
    const bool stream = use_stream(y.nbytes());
    const int fc = is_float(dt) ? float_code(dt) : -1;
    const int64_t nblocks = (n + kBlock - 1) / kBlock;
    pool.parallel_for(nblocks, kMinParallelElems / kBlock, [&](int64_t lo, int64_t hi, int) {
      for_each_run(plan, lo * kBlock, std::min(n, hi * kBlock),
                   [&](int64_t pos, const int64_t* offs, int64_t len) {
                     const uint8_t* rc = pc + offs[0];
                     const char* ra = pa + offs[1] * es;
                     const char* rb = pb + offs[2] * es;
                     char* ro = po + pos * es;
                     const bool* sc = plan.inner_scalar;
                     switch (dt) {
                       case DType::i64:
                         return plain_where(rc, sc[0], reinterpret_cast<const int64_t*>(ra), sc[1],
                                            reinterpret_cast<const int64_t*>(rb), sc[2],
                                            reinterpret_cast<int64_t*>(ro), len);
                       case DType::i32:
                         return plain_where(rc, sc[0], reinterpret_cast<const int32_t*>(ra), sc[1],
                                            reinterpret_cast<const int32_t*>(rb), sc[2],
                                            reinterpret_cast<int32_t*>(ro), len);
                       case DType::boolean:
                       case DType::i8:  // one byte: selected as bytes
                       case DType::u8:
                         return plain_where(rc, sc[0], reinterpret_cast<const uint8_t*>(ra), sc[1],
                                            reinterpret_cast<const uint8_t*>(rb), sc[2],
                                            reinterpret_cast<uint8_t*>(ro), len);
                       default:
                         HWY_DYNAMIC_DISPATCH(WhereRun)
                         (fc, rc, sc[0], ra, sc[1], rb, sc[2], ro, size_t(len), stream);
                     }
                   });
      if (stream) hwy::FlushStream();
    });
  }
};

}  // namespace

std::unique_ptr<OpKernel> make_compare_kernel(const Node& n) {
  if (n.op == OpKind::Equal) return std::make_unique<CompareKernel>(n, kEqual);
  if (n.op == OpKind::Less) return std::make_unique<CompareKernel>(n, kLess);
  if (n.op == OpKind::Greater) return std::make_unique<CompareKernel>(n, kGreater);
  if (n.op == OpKind::Where) return std::make_unique<WhereKernel>(n);
  UBF_CHECK(false, "make_compare_kernel: not a comparison: " + n.describe());
  return nullptr;
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
