// The machine's measured memory bandwidth: the yardstick every eager and fused kernel is compared
// with (roofline, "% of bandwidth" in traces, bench ratios).
#pragma once

#include <cstddef>
#include <memory>

namespace ubfuse {

class ThreadPool;

// Pre-faulted buffers for repeated STREAM add passes, for benchmarks that interleave the
// yardstick with the kernels they judge (robust on a machine shared with other work).
class StreamAdd {
 public:
  StreamAdd(ThreadPool& pool, size_t bytes_per_array);
  ~StreamAdd();
  StreamAdd(const StreamAdd&) = delete;
  StreamAdd& operator=(const StreamAdd&) = delete;
  // Wall seconds of one c = a + b pass over the pool's threads.
  double pass_seconds(bool nontemporal = true);
  // Bytes one pass moves: 2 reads + 1 write.
  double bytes_moved() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// STREAM-style c = a + b over f32 arrays of bytes_per_array each, split over the pool's threads,
// counting 2 reads + 1 write (3 * bytes_per_array) per pass. The buffers are allocated and
// first-touched (pre-faulted) by the threads that later use them; the result is the best of a few
// passes in GB/s (1e9 bytes/s). With `nontemporal` the stores bypass the caches, as the eager
// kernels do for outputs this large (no read-for-ownership): this is the bandwidth a streaming
// kernel can reach, and what eager/fused kernels are measured against.
double measure_stream_add_gbps(ThreadPool& pool, size_t bytes_per_array = size_t(256) << 20,
                               bool nontemporal = true);

}  // namespace ubfuse
