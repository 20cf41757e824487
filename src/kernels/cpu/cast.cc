// Cast between every pair of dtypes. Float <-> float conversions (f32/bf16/f16, rounding to nearest
// even) are vectorized; the rest go through a 256-element staging block as f32 (from floats) or
// i64 (from integers and bool). Semantics: float -> int truncates toward zero, saturating at the
// target's range (i8 and u8 included), NaN -> 0 (ONNX's Cast leaves out-of-range values
// undefined; saturating is its float8 rule and onnxruntime's); int -> int wraps (two's complement,
// as ONNX's Cast says for fixed point); anything -> bool is (x != 0) (NaN -> true); bool -> numbers
// gives 0 / 1.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/cast.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

template <typename TI, typename TO>
HWY_NOINLINE void ConvertLoop(const TI* HWY_RESTRICT in, TO* HWY_RESTRICT out, size_t n,
                              bool stream) {
  const hn::ScalableTag<float> d;
  MapStore(d, out, n, stream, [&]<bool kFull>(size_t i, size_t count) HWY_ATTR {
    return LoadAt<kFull>(d, in, i, count);
  });
}

template <typename TI>
void ConvertFrom(const void* in, int to, void* out, size_t n, bool stream) {
  const TI* p = static_cast<const TI*>(in);
  switch (to) {
    case 0:
      return ConvertLoop(p, static_cast<float*>(out), n, stream);
    case 1:
      return ConvertLoop(p, static_cast<hwy::bfloat16_t*>(out), n, stream);
    case 2:
      return ConvertLoop(p, static_cast<hwy::float16_t*>(out), n, stream);
    default:
      break;
  }
}

// n values from float code `from` to float code `to` (0 f32, 1 bf16, 2 f16).
void ConvertRun(int from, const void* in, int to, void* out, size_t n, bool stream) {
  switch (from) {
    case 0:
      return ConvertFrom<float>(in, to, out, n, stream);
    case 1:
      return ConvertFrom<hwy::bfloat16_t>(in, to, out, n, stream);
    case 2:
      return ConvertFrom<hwy::float16_t>(in, to, out, n, stream);
    default:
      break;
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>
#include <cstring>
#include <limits>

#include "hwy/cache_control.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(ConvertRun);

namespace cpu {

void convert_floats(DType from, const void* in, DType to, void* out, int64_t n) {
  if (n <= 0) return;
  if (from == to) {
    std::memcpy(out, in, size_t(n) * dtype_size(from));
    return;
  }
  HWY_DYNAMIC_DISPATCH(ConvertRun)(float_code(from), in, float_code(to), out, size_t(n), false);
}

void convert_floats(DType from, const void* in, DType to, void* out, int64_t n, ThreadPool& pool) {
  constexpr int64_t kBlock = 64;
  const bool stream = use_stream(size_t(n) * dtype_size(to));
  const size_t ei = dtype_size(from), eo = dtype_size(to);
  const char* pi = static_cast<const char*>(in);
  char* po = static_cast<char*>(out);
  const int fi = float_code(from), fo = float_code(to);
  pool.parallel_for((n + kBlock - 1) / kBlock, kMinParallelElems / kBlock,
                    [&](int64_t lo, int64_t hi, int) {
                      const int64_t b = lo * kBlock, e = std::min(n, hi * kBlock);
                      if (from == to) {
                        std::memcpy(po + b * int64_t(eo), pi + b * int64_t(ei), size_t(e - b) * eo);
                        return;
                      }
                      HWY_DYNAMIC_DISPATCH(ConvertRun)
                      (fi, pi + b * int64_t(ei), fo, po + b * int64_t(eo), size_t(e - b), stream);
                      if (stream) hwy::FlushStream();
                    });
}

namespace {

constexpr int64_t kStage = 256;

// Reads n values of dtype t at p (element offset i) into f (float dtypes) or v (others).
void read_block(DType t, const void* p, int64_t i, int64_t n, float* f, int64_t* v) {
  switch (t) {
    case DType::f32:
      std::memcpy(f, static_cast<const float*>(p) + i, size_t(n) * 4);
      return;
    case DType::bf16:
    case DType::f16:
      convert_floats(t, static_cast<const uint16_t*>(p) + i, DType::f32, f, n);
      return;
    case DType::i64:
      std::memcpy(v, static_cast<const int64_t*>(p) + i, size_t(n) * 8);
      return;
    case DType::i32:
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<const int32_t*>(p)[i + k];
      return;
    case DType::boolean:
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<const uint8_t*>(p)[i + k] != 0;
      return;
    case DType::i8:
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<const int8_t*>(p)[i + k];
      return;
    case DType::u8:
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<const uint8_t*>(p)[i + k];
      return;
  }
}

template <typename I>
I float_to_int(float x) {
  if (std::isnan(x)) return 0;
  constexpr double lo = double(std::numeric_limits<I>::min());
  constexpr double hi = double(std::numeric_limits<I>::max());
  const double t = std::trunc(double(x));
  if (t <= lo) return std::numeric_limits<I>::min();
  if (t >= hi) return std::numeric_limits<I>::max();
  return I(t);
}

void write_from_floats(DType t, const float* f, void* p, int64_t i, int64_t n) {
  switch (t) {
    case DType::f32:
      std::memcpy(static_cast<float*>(p) + i, f, size_t(n) * 4);
      return;
    case DType::bf16:
    case DType::f16:
      convert_floats(DType::f32, f, t, static_cast<uint16_t*>(p) + i, n);
      return;
    case DType::i64:
      for (int64_t k = 0; k < n; ++k) static_cast<int64_t*>(p)[i + k] = float_to_int<int64_t>(f[k]);
      return;
    case DType::i32:
      for (int64_t k = 0; k < n; ++k) static_cast<int32_t*>(p)[i + k] = float_to_int<int32_t>(f[k]);
      return;
    case DType::boolean:
      for (int64_t k = 0; k < n; ++k) static_cast<uint8_t*>(p)[i + k] = f[k] != 0.0f;
      return;
    case DType::i8:
      for (int64_t k = 0; k < n; ++k) static_cast<int8_t*>(p)[i + k] = float_to_int<int8_t>(f[k]);
      return;
    case DType::u8:
      for (int64_t k = 0; k < n; ++k) static_cast<uint8_t*>(p)[i + k] = float_to_int<uint8_t>(f[k]);
      return;
  }
}

void write_from_ints(DType t, const int64_t* v, void* p, int64_t i, int64_t n) {
  switch (t) {
    case DType::f32:
    case DType::bf16:
    case DType::f16: {
      float f[kStage];
      for (int64_t k = 0; k < n; ++k) f[k] = float(v[k]);
      write_from_floats(t, f, p, i, n);
      return;
    }
    case DType::i64:
      std::memcpy(static_cast<int64_t*>(p) + i, v, size_t(n) * 8);
      return;
    case DType::i32:
      for (int64_t k = 0; k < n; ++k) static_cast<int32_t*>(p)[i + k] = int32_t(uint32_t(v[k]));
      return;
    case DType::boolean:
      for (int64_t k = 0; k < n; ++k) static_cast<uint8_t*>(p)[i + k] = v[k] != 0;
      return;
    case DType::i8:
      for (int64_t k = 0; k < n; ++k) static_cast<int8_t*>(p)[i + k] = int8_t(uint8_t(v[k]));
      return;
    case DType::u8:
      for (int64_t k = 0; k < n; ++k) static_cast<uint8_t*>(p)[i + k] = uint8_t(v[k]);
      return;
  }
}

class CastKernel : public KernelBase {
 public:
  CastKernel(const Node& n, DType to) : KernelBase(n), to_(to) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (y.dtype() != to_ || y.numel() != x.numel()) {
      fail("output must be " + std::string(dtype_name(to_)) + " with the input's size, got " +
           tensors_str({x, y}));
    }
    const int64_t n = x.numel();
    const DType from = x.dtype();
    if (is_float(from) && is_float(to_)) {
      convert_floats(from, x.data(), to_, y.data(), n, pool);
      return;
    }
    if (from == to_) {
      parallel_copy(y.data(), x.data(), x.nbytes(), pool);
      return;
    }
    const bool src_float = is_float(from);
    pool.parallel_for((n + kStage - 1) / kStage, grain_for(kStage),
                      [&](int64_t lo, int64_t hi, int) {
                        float f[kStage];
                        int64_t v[kStage];
                        for (int64_t blk = lo; blk < hi; ++blk) {
                          const int64_t b = blk * kStage, c = std::min(kStage, n - b);
                          read_block(from, x.data(), b, c, f, v);
                          if (src_float) {
                            write_from_floats(to_, f, y.data(), b, c);
                          } else {
                            write_from_ints(to_, v, y.data(), b, c);
                          }
                        }
                      });
  }

 private:
  DType to_;
};

}  // namespace

std::unique_ptr<OpKernel> make_cast_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Cast, "make_cast_kernel: " + n.describe());
  if (!n.has_attr("to")) kernel_fail(n.describe(), "missing attribute 'to'");
  return std::make_unique<CastKernel>(n, parse_dtype(n.attr_str("to", "f32")));
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
