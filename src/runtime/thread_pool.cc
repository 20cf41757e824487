// Fork-join pool: size()-1 worker threads plus the calling thread. A job is published under a
// mutex with a generation counter; workers spin briefly on the counter and then sleep on a
// condition variable. Every worker checks in to every job; chunks are handed out through an atomic
// counter, so a chunk's `worker` id is the id of the thread that runs it (0 = the caller), unique
// among the job's concurrent chunks.
//
// Contract of parallel_for (also documented in tests/thread_pool_test.cc):
//  * fn is called on disjoint chunks covering [0, n) exactly once each (n <= 0: not called).
//  * Only one job runs on the pool's workers at a time. A caller that finds the pool busy (another
//    thread's job, or a nested call from inside fn) runs the whole range inline as worker 0.
//  * If a chunk throws, chunks not yet started are skipped, the running ones finish, and the first
//    exception is rethrown to the caller of parallel_for once no thread touches the job anymore.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define UBF_CPU_RELAX() _mm_pause()
#else
#define UBF_CPU_RELAX() \
  do {                  \
  } while (0)
#endif

#include "ubfuse/error.h"

namespace ubfuse {

namespace {
// Spin iterations (with pause) a worker polls for the next job before sleeping. About 20-50 us:
// back-to-back eager kernels then start without a futex wake-up.
constexpr int kSpinIters = 4000;
}  // namespace

struct ThreadPool::State {
  int size = 1;
  std::vector<std::thread> threads;

  std::mutex mu;
  std::condition_variable work_cv;  // workers wait for a new generation or stop
  std::condition_variable done_cv;  // the caller waits for pending == 0
  bool stop = false;                // guarded by mu
  std::atomic<uint64_t> generation{0};

  // The current job; written by the caller under mu before generation is bumped, and not
  // rewritten before every worker has finished with it (pending == 0).
  const RangeFn* fn = nullptr;
  int64_t n = 0;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;       // guarded by mu
  std::atomic<int> pending{0};    // workers that have not finished the current job

  std::atomic<bool> busy{false};  // a caller owns the workers

  // Runs chunks of the current job until none are left.
  void run_chunks(int worker) {
    for (;;) {
      int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) return;
      if (failed.load(std::memory_order_relaxed)) continue;  // skip: drain the counter
      int64_t b = n * c / num_chunks, e = n * (c + 1) / num_chunks;
      try {
        (*fn)(b, e, worker);
      } catch (...) {
        std::lock_guard<std::mutex> l(mu);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  }

  void worker_loop(int worker) {
    uint64_t seen = 0;
    for (;;) {
      // Spin for a new generation, then sleep.
      for (int i = 0; i < kSpinIters; ++i) {
        if (generation.load(std::memory_order_acquire) != seen) break;
        UBF_CPU_RELAX();
      }
      {
        std::unique_lock<std::mutex> l(mu);
        work_cv.wait(l, [&] { return stop || generation.load(std::memory_order_relaxed) != seen; });
        if (stop) return;
        seen = generation.load(std::memory_order_relaxed);
      }
      run_chunks(worker);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> l(mu);  // pairs with the caller's predicate check
        done_cv.notify_all();
      }
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : s_(new State) {
  s_->size = std::max(1, num_threads);
  s_->threads.reserve(size_t(s_->size - 1));
  for (int t = 1; t < s_->size; ++t) s_->threads.emplace_back([this, t] { s_->worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(s_->mu);
    s_->stop = true;
  }
  s_->work_cv.notify_all();
  for (auto& t : s_->threads) t.join();
  delete s_;
}

int ThreadPool::size() const { return s_->size; }

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = std::min<int64_t>(s_->size, (n + grain - 1) / grain);
  chunks = std::max<int64_t>(1, std::min(chunks, n / grain));  // each chunk >= grain items
  bool expected = false;
  if (chunks <= 1 ||
      !s_->busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    fn(0, n, 0);  // small, nested, or another caller holds the workers: run inline
    return;
  }
  State& s = *s_;
  {
    std::lock_guard<std::mutex> l(s.mu);
    s.fn = &fn;
    s.n = n;
    s.num_chunks = chunks;
    s.next_chunk.store(0, std::memory_order_relaxed);
    s.failed.store(false, std::memory_order_relaxed);
    s.error = nullptr;
    s.pending.store(s.size - 1, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.work_cv.notify_all();
  s.run_chunks(0);
  // Every worker takes part in every job (it may find no chunk left), so no worker can still be
  // reading this job's fields once pending reaches 0.
  for (int i = 0; i < kSpinIters && s.pending.load(std::memory_order_acquire) != 0; ++i) {
    UBF_CPU_RELAX();
  }
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> l(s.mu);
    s.done_cv.wait(l, [&] { return s.pending.load(std::memory_order_acquire) == 0; });
    err = s.error;
    s.error = nullptr;
  }
  s.busy.store(false, std::memory_order_release);
  if (err) std::rethrow_exception(err);
}

namespace {
int env_threads() {
  if (const char* e = std::getenv("UBFUSE_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (end != e && *end == '\0' && v >= 1 && v <= 4096) return int(v);
    throw Error("UBFUSE_NUM_THREADS='" + std::string(e) +
                "' is not a thread count; hint: set it to an integer >= 1 or unset it");
  }
  unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : int(h);
}
}  // namespace

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(env_threads());
  return pool;
}

ThreadPool& ThreadPool::with_threads(int n) {
  if (n <= 0) return global();
  if (n == global().size()) return global();
  static std::mutex mu;
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> l(mu);
  auto& p = pools[n];
  if (!p) p = std::make_unique<ThreadPool>(n);
  return *p;
}

}  // namespace ubfuse
