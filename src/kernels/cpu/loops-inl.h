// Per-target loop skeletons shared by the eager kernels (a Highway per-target header like
// vecmath.h): MapStore walks one contiguous output run with full vectors, a partial tail, and
// optional non-temporal stores (after peeling to the store alignment); RowSum / RowMax reduce one
// contiguous row in f32 with 4 independent accumulators.
#if defined(UBFUSE_KERNELS_CPU_LOOPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef UBFUSE_KERNELS_CPU_LOOPS_INL_H_
#undef UBFUSE_KERNELS_CPU_LOOPS_INL_H_
#else
#define UBFUSE_KERNELS_CPU_LOOPS_INL_H_
#endif

#include <stdint.h>

#include <algorithm>
#include <limits>

#include "hwy/highway.h"
#include "kernels/cpu/store_policy.h"
#include "kernels/cpu/vecmath.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

// Calls f(Storage<T>{}) with T the storage type of a float dtype code (kernels/cpu/kernel_util.h:
// 0 f32, 1 bf16, 2 f16), so each kernel's entry point is written once for all three.
template <typename T>
struct Storage {
  using type = T;
};
template <class F>
HWY_INLINE void WithStorage(int code, const F& f) {
  switch (code) {
    case 0:
      return f(Storage<float>{});
    case 1:
      return f(Storage<hwy::bfloat16_t>{});
    case 2:
      return f(Storage<hwy::float16_t>{});
    default:
      HWY_ABORT("float dtype code %d is not 0 (f32), 1 (bf16) or 2 (f16)", code);
  }
}

// Writes out[0, n) from f: f.template operator()<kFull>(i, count) returns the vector of results
// for elements [i, i + count), where count == Lanes(d) when kFull (f may then use full loads) and
// count < Lanes(d) otherwise (f must use LoadNF32). With `stream`, the body uses non-temporal
// stores once out + i is aligned to a pair of stored vectors (at most 64 bytes).
template <class D, typename TO, class F>
HWY_INLINE void MapStore(D d, TO* HWY_RESTRICT out, size_t n, bool stream, const F& f) {
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (stream && n >= 4 * N) {
    // Pairs of vectors are streamed (StorePairF32: one 64-byte store for two bf16 vectors).
    const size_t align = std::min<size_t>(2 * N * sizeof(TO), 64);
    const size_t mis = reinterpret_cast<uintptr_t>(out) % align;
    if (mis % sizeof(TO) == 0) {
      const size_t head = mis == 0 ? 0 : (align - mis) / sizeof(TO);
      for (; i + N <= head; i += N) StoreF32(f.template operator()<true>(i, N), d, out + i);
      if (i < head) {
        StoreNF32(f.template operator()<false>(i, head - i), d, out + i, head - i);
        i = head;
      }
      for (; i + 2 * N <= n; i += 2 * N) {
        const auto v0 = f.template operator()<true>(i, N);
        const auto v1 = f.template operator()<true>(i + N, N);
        StorePairF32(v0, v1, d, out + i, true);
      }
    }
  }
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto v0 = f.template operator()<true>(i, N);
    const auto v1 = f.template operator()<true>(i + N, N);
    StorePairF32(v0, v1, d, out + i, false);
  }
  for (; i + N <= n; i += N) StoreF32(f.template operator()<true>(i, N), d, out + i);
  if (i < n) StoreNF32(f.template operator()<false>(i, n - i), d, out + i, n - i);
}

// How far ahead a loop that streams a row from memory prefetches it: a loop doing arithmetic
// leaves the hardware prefetcher behind. Past a row's end this reaches the next row, which is
// contiguous; a prefetch past the buffer's end never faults. The hint is the CPU's
// (cpu::prefetch_locality: non-temporal on AMD, into every level elsewhere).
template <typename T>
constexpr size_t kAheadElems = 4096 / sizeof(T);

HWY_INLINE bool PrefetchNonTemporal() {
  static const bool nta = cpu::prefetch_locality() == 0;
  return nta;
}

// Prefetches the 2 * Lanes(d) elements kAheadElems<T> past p (one or two cache lines).
template <class D, typename T>
HWY_INLINE void PrefetchAhead(D d, const T* p) {
  const bool two = 2 * hn::Lanes(d) * sizeof(T) > 64;
  if (PrefetchNonTemporal()) {
    __builtin_prefetch(p + kAheadElems<T>, 0, 0);
    if (two) __builtin_prefetch(p + kAheadElems<T> + hn::Lanes(d), 0, 0);
  } else {
    __builtin_prefetch(p + kAheadElems<T>, 0, 3);
    if (two) __builtin_prefetch(p + kAheadElems<T> + hn::Lanes(d), 0, 3);
  }
}

// Loads elements [i, i + count) of p as f32 (full vector when kFull).
template <bool kFull, class D, typename T>
HWY_INLINE hn::VFromD<D> LoadAt(D d, const T* HWY_RESTRICT p, size_t i, size_t count) {
  if constexpr (kFull) {
    (void)count;
    return LoadF32(d, p + i);
  } else {
    return LoadNF32(d, p + i, count);
  }
}

// Sum of x[0, n) in f32.
template <class D, typename T>
HWY_INLINE float RowSum(D d, const T* HWY_RESTRICT x, size_t n) {
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, LoadF32(d, x + i));
    s1 = hn::Add(s1, LoadF32(d, x + i + N));
    s2 = hn::Add(s2, LoadF32(d, x + i + 2 * N));
    s3 = hn::Add(s3, LoadF32(d, x + i + 3 * N));
  }
  for (; i + N <= n; i += N) s0 = hn::Add(s0, LoadF32(d, x + i));
  if (i < n) s1 = hn::Add(s1, LoadNF32(d, x + i, n - i));
  return ReduceSumF(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

// Max of x[0, n) (n >= 1) in f32; NaN if any element is NaN. kPropagateNaN = false drops NaN
// (x86 max returns an operand) at a third of the work, for callers whose later math propagates
// it anyway (softmax: exp(NaN - max) is NaN).
template <bool kPropagateNaN = true, class D, typename T>
HWY_INLINE float RowMax(D d, const T* HWY_RESTRICT x, size_t n) {
  const auto mx = [d](auto a, auto b) HWY_ATTR {
    if constexpr (kPropagateNaN) {
      return MaxF(d, a, b);
    } else {
      (void)d;  // used only by the NaN-aware form
      return hn::Max(a, b);
    }
  };
  const size_t N = hn::Lanes(d);
  const auto ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  auto m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    m0 = mx(m0, LoadF32(d, x + i));
    m1 = mx(m1, LoadF32(d, x + i + N));
    m2 = mx(m2, LoadF32(d, x + i + 2 * N));
    m3 = mx(m3, LoadF32(d, x + i + 3 * N));
  }
  for (; i + N <= n; i += N) m0 = mx(m0, LoadF32(d, x + i));
  if (i < n) m1 = mx(m1, hn::IfThenElse(hn::FirstN(d, n - i), LoadNF32(d, x + i, n - i), ninf));
  return ReduceMaxF(d, mx(mx(m0, m1), mx(m2, m3)));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#endif  // UBFUSE_KERNELS_CPU_LOOPS_INL_H_
