// STREAM add (see bandwidth.h). The loop is Highway-dispatched like the eager kernels, so the
// yardstick uses the same vector width and store instructions as the kernels it judges.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "profiler/bandwidth.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// c[i] = a[i] + b[i] for i in [0, n); n a multiple of 2 * Lanes, pointers vector-aligned.
void StreamAddLoop(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, float* HWY_RESTRICT c,
                   size_t n, bool nt) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (nt) {
    for (; i + 2 * N <= n; i += 2 * N) {
      hn::Stream(hn::Add(hn::Load(d, a + i), hn::Load(d, b + i)), d, c + i);
      hn::Stream(hn::Add(hn::Load(d, a + i + N), hn::Load(d, b + i + N)), d, c + i + N);
    }
  } else {
    for (; i + 2 * N <= n; i += 2 * N) {
      hn::Store(hn::Add(hn::Load(d, a + i), hn::Load(d, b + i)), d, c + i);
      hn::Store(hn::Add(hn::Load(d, a + i + N), hn::Load(d, b + i + N)), d, c + i + N);
    }
  }
  for (; i < n; ++i) c[i] = a[i] + b[i];
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "hwy/cache_control.h"
#include "profiler/bandwidth.h"
#include "runtime/thread_pool.h"
#include "ubfuse/error.h"

namespace ubfuse {
HWY_EXPORT(StreamAddLoop);

namespace {
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buf = std::unique_ptr<float, FreeDeleter>;
Buf alloc_floats(size_t n) {
  void* p = std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
  if (!p) throw Error("STREAM add: cannot allocate " + std::to_string(n * 4) + " bytes");
  return Buf(static_cast<float*>(p));
}
constexpr int64_t kBlock = 1024;  // floats; chunk boundaries stay vector-aligned
}  // namespace

struct StreamAdd::Impl {
  ThreadPool& pool;
  int64_t n;
  Buf a, b, c;
};

StreamAdd::StreamAdd(ThreadPool& pool, size_t bytes_per_array) {
  const int64_t n =
      std::max<int64_t>(kBlock, int64_t(bytes_per_array / sizeof(float)) / kBlock * kBlock);
  impl_.reset(
      new Impl{pool, n, alloc_floats(size_t(n)), alloc_floats(size_t(n)), alloc_floats(size_t(n))});
  float* pa = impl_->a.get();
  float* pb = impl_->b.get();
  float* pc = impl_->c.get();
  // First touch by the same threads and chunks as the timed loop.
  pool.parallel_for(n / kBlock, 1, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo * kBlock; i < hi * kBlock; ++i) {
      pa[i] = 1.0f;
      pb[i] = 2.0f;
      pc[i] = 0.0f;
    }
  });
}

StreamAdd::~StreamAdd() = default;

double StreamAdd::bytes_moved() const { return 3.0 * double(impl_->n) * sizeof(float); }

double StreamAdd::pass_seconds(bool nontemporal) {
  float* pa = impl_->a.get();
  float* pb = impl_->b.get();
  float* pc = impl_->c.get();
  const auto t0 = std::chrono::steady_clock::now();
  impl_->pool.parallel_for(impl_->n / kBlock, 1, [&](int64_t lo, int64_t hi, int) {
    HWY_DYNAMIC_DISPATCH(StreamAddLoop)
    (pa + lo * kBlock, pb + lo * kBlock, pc + lo * kBlock, size_t((hi - lo) * kBlock), nontemporal);
    if (nontemporal) hwy::FlushStream();
  });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (pc[impl_->n - 1] != 3.0f) throw Error("STREAM add: wrong sum (internal error)");
  return dt;
}

double measure_stream_add_gbps(ThreadPool& pool, size_t bytes_per_array, bool nontemporal) {
  StreamAdd s(pool, bytes_per_array);
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) best = std::min(best, s.pass_seconds(nontemporal));
  return s.bytes_moved() / best / 1e9;
}

}  // namespace ubfuse
#endif  // HWY_ONCE
