// Fork-join pool: size()-1 worker threads plus the calling thread. A job is a shared object
// published under a mutex with a generation counter; workers spin briefly on the counter, then
// sleep on a condition variable. Chunks are claimed through the job's atomic counter, so a chunk's
// `worker` id is the id of the thread that runs it (0 = the caller), unique among the job's
// concurrent chunks. The caller runs chunks too and then waits only for chunks that other threads
// have claimed: a worker that wakes late (descheduled on a busy machine) finds nothing left and
// never holds the caller up; the shared job object keeps what it reads alive.
//
// Contract of parallel_for (also documented in tests/thread_pool_test.cc):
//  * fn is called on disjoint chunks covering [0, n) exactly once each (n <= 0: not called).
//  * Only one job runs on the pool's workers at a time. A caller that finds the pool busy (another
//    thread's job, or a nested call from inside fn) runs the whole range inline as worker 0.
//  * If a chunk throws, chunks not yet started are skipped, the running ones finish, and the first
//    exception is rethrown to the caller of parallel_for once no thread runs the job's chunks.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
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
// How long a worker polls for the next job (and the caller for the last chunk) before sleeping:
// kernels a short gap apart then start without a futex wake-up. Wall time, not PAUSE counts
// (PAUSE takes 11 ns on one Xeon, a few on other cores). UBFUSE_POOL_SPIN_US overrides.
int64_t spin_ns_from_env() {
  const char* e = std::getenv("UBFUSE_POOL_SPIN_US");
  if (!e) return int64_t(200) * 1000;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  if (end == e || *end != '\0' || v < 0 || v > 10 * 1000 * 1000) {
    throw Error("UBFUSE_POOL_SPIN_US='" + std::string(e) +
                "' is not a number of microseconds; hint: an integer from 0 to 10000000 (default "
                "200), or unset it");
  }
  return int64_t(v) * 1000;
}

// Polls done() with PAUSE for up to ns nanoseconds; true once it holds.
template <class F>
bool spin_until(int64_t ns, const F& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  for (int i = 1;; ++i) {
    if (done()) return true;
    UBF_CPU_RELAX();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}
}  // namespace

struct ThreadPool::State {
  struct Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0;
    int64_t num_chunks = 0;
    std::atomic<int64_t> next{0};  // next chunk to claim
    std::atomic<int64_t> done{0};  // chunks finished (or skipped)
    std::atomic<bool> failed{false};
    std::exception_ptr error;  // guarded by State::mu
  };

  int size = 1;
  int64_t spin_ns = 0;
  std::vector<std::thread> threads;

  std::mutex mu;
  std::condition_variable work_cv;  // workers wait for a new generation or stop
  std::condition_variable done_cv;  // the caller waits for done == num_chunks
  bool stop = false;                // guarded by mu
  std::shared_ptr<Job> current;     // guarded by mu
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> busy{false};  // a caller owns the workers

  // Runs chunks of `job` until none are left to claim.
  void run_chunks(Job& job, int worker) {
    for (;;) {
      const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
      if (c >= job.num_chunks) return;
      if (!job.failed.load(std::memory_order_relaxed)) {
        const int64_t b = job.n * c / job.num_chunks, e = job.n * (c + 1) / job.num_chunks;
        try {
          (*job.fn)(b, e, worker);
        } catch (...) {
          std::lock_guard<std::mutex> l(mu);
          if (!job.error) job.error = std::current_exception();
          job.failed.store(true, std::memory_order_relaxed);
        }
      }
      if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.num_chunks) {
        std::lock_guard<std::mutex> l(mu);  // pairs with the caller's predicate check
        done_cv.notify_all();
      }
    }
  }

  void worker_loop(int worker) {
    uint64_t seen = 0;
    for (;;) {
      spin_until(spin_ns, [&] { return generation.load(std::memory_order_acquire) != seen; });
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> l(mu);
        work_cv.wait(l, [&] { return stop || generation.load(std::memory_order_relaxed) != seen; });
        if (stop) return;
        seen = generation.load(std::memory_order_relaxed);
        job = current;
      }
      if (job) run_chunks(*job, worker);
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : s_(new State) {
  try {
    s_->spin_ns = spin_ns_from_env();
  } catch (...) {
    delete s_;
    throw;
  }
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
  if (chunks <= 1 || !s_->busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    fn(0, n, 0);  // small, nested, or another caller holds the workers: run inline
    return;
  }
  State& s = *s_;
  auto job = std::make_shared<State::Job>();
  job->fn = &fn;
  job->n = n;
  job->num_chunks = chunks;
  {
    std::lock_guard<std::mutex> l(s.mu);
    s.current = job;
    s.generation.fetch_add(1, std::memory_order_release);
  }
  s.work_cv.notify_all();
  s.run_chunks(*job, 0);
  spin_until(s.spin_ns, [&] { return job->done.load(std::memory_order_acquire) == chunks; });
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> l(s.mu);
    s.done_cv.wait(l, [&] { return job->done.load(std::memory_order_acquire) == chunks; });
    err = job->error;
    s.current.reset();
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
