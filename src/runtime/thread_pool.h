// A small fork-join thread pool for the kernels. The calling thread takes part in every job.
// Concurrent callers never wait on each other: when the workers are busy with another caller's
// job, parallel_for runs the whole range inline on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace ubfuse {

class ThreadPool {
 public:
  // fn(begin, end, worker): worker is in [0, size()) and unique among concurrent chunks of one
  // job, so it can index per-worker scratch (the unified buffers).
  using RangeFn = std::function<void(int64_t begin, int64_t end, int worker)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  // Splits [0, n) into at most size() contiguous chunks of at least `grain` items.
  void parallel_for(int64_t n, int64_t grain, const RangeFn& fn);

  // Process-wide pool; its size comes from UBFUSE_NUM_THREADS or the hardware.
  static ThreadPool& global();
  // A pool of n threads shared by every model compiled with num_threads=n.
  static ThreadPool& with_threads(int n);

 private:
  struct State;
  State* s_;
};

}  // namespace ubfuse
