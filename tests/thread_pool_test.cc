// ThreadPool contract (see src/runtime/thread_pool.cc):
//  * parallel_for(n, grain, fn) calls fn on disjoint [begin, end) chunks covering [0, n) exactly
//    once, at most size() chunks, each of >= grain items (a single chunk when n < 2 * grain).
//  * fn's worker id is in [0, size()) and unique among the chunks running at the same time.
//  * Concurrent callers never deadlock: a caller finding the workers busy (or a nested call)
//    runs its whole range inline.
//  * If chunks throw, parallel_for rethrows the first exception to its caller after every thread
//    has left the job; chunks not yet started are skipped; the pool stays usable.
//  * Workers poll for the next job for UBFUSE_POOL_SPIN_US microseconds (200) before sleeping; a
//    bad value is an error naming the variable when a pool is made, and any value stays correct.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ubfuse/error.h"

namespace ubfuse {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnceWithGrain) {
  for (int threads : {1, 2, 3, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 5, 63, 64, 1000, 100003}) {
      for (int64_t grain : {1, 4, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> chunks{0};
        std::atomic<bool> small_chunk{false};
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int w) {
          ASSERT_GE(w, 0);
          ASSERT_LT(w, threads);
          ASSERT_LE(0, b);
          ASSERT_LE(b, e);
          ASSERT_LE(e, n);
          chunks++;
          if (e - b < grain && e - b != n) small_chunk = true;
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "item " << i;
        EXPECT_LE(chunks.load(), threads);
        EXPECT_FALSE(small_chunk) << "n=" << n << " grain=" << grain;
        if (n == 0) {
          EXPECT_EQ(chunks.load(), 0);
        }
        if (n > 0 && n < 2 * grain) {
          EXPECT_EQ(chunks.load(), 1);
        }
      }
    }
  }
}

TEST(ThreadPool, UsesSeveralWorkersForLargeJobs) {
  ThreadPool pool(2);
  std::atomic<int> chunks{0};
  pool.parallel_for(1 << 20, 1, [&](int64_t, int64_t, int) { chunks++; });
  EXPECT_EQ(chunks.load(), 2);
}

TEST(ThreadPool, WorkerIdsUniqueAmongConcurrentChunks) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> busy(4);
  std::atomic<bool> clash{false};
  for (int rep = 0; rep < 200; ++rep) {
    pool.parallel_for(4, 1, [&](int64_t, int64_t, int w) {
      if (busy[size_t(w)].fetch_add(1) != 0) clash = true;
      std::this_thread::yield();
      busy[size_t(w)].fetch_sub(1);
    });
  }
  EXPECT_FALSE(clash);
}

TEST(ThreadPool, ConcurrentCallersFromSeveralThreads) {
  ThreadPool pool(3);
  constexpr int kCallers = 4, kReps = 100;
  constexpr int64_t kN = 10000;
  std::vector<int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kReps; ++r) {
        std::atomic<int64_t> s{0};
        pool.parallel_for(kN, 100, [&](int64_t b, int64_t e, int) {
          int64_t local = 0;
          for (int64_t i = b; i < e; ++i) local += i;
          s += local;
        });
        sums[size_t(c)] += s.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(sums[size_t(c)], kReps * (kN * (kN - 1) / 2));
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(100, 1, [&](int64_t b2, int64_t e2, int w2) {
        EXPECT_EQ(w2, 0);  // inline: one chunk, worker 0
        total += e2 - b2;
      });
    }
  });
  EXPECT_EQ(total.load(), 800);
}

TEST(ThreadPool, ExceptionReachesCallerAndPoolStaysUsable) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 20; ++rep) {
    EXPECT_THROW(pool.parallel_for(1000, 1,
                                   [&](int64_t b, int64_t, int) {
                                     if (b == 0) throw std::runtime_error("chunk 0 failed");
                                   }),
                 std::runtime_error);
    // Every chunk throws: exactly one exception comes out.
    try {
      pool.parallel_for(1000, 1, [&](int64_t, int64_t, int) { throw std::logic_error("all"); });
      ADD_FAILURE() << "no exception";
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "all");
    }
    // The inline path (one chunk) propagates too.
    EXPECT_THROW(pool.parallel_for(1, 1, [&](int64_t, int64_t, int) { throw 42; }), int);
    std::atomic<int64_t> n{0};
    pool.parallel_for(1000, 1, [&](int64_t b, int64_t e, int) { n += e - b; });
    EXPECT_EQ(n.load(), 1000);
  }
}

TEST(ThreadPool, SharedPools) {
  EXPECT_GE(ThreadPool::global().size(), 1);
  ThreadPool& p3 = ThreadPool::with_threads(3);
  EXPECT_EQ(p3.size(), 3);
  EXPECT_EQ(&p3, &ThreadPool::with_threads(3));
  EXPECT_EQ(&ThreadPool::with_threads(0), &ThreadPool::global());
}

TEST(ThreadPool, ManyShortJobs) {
  ThreadPool pool(2);
  int64_t total = 0;
  for (int r = 0; r < 5000; ++r) {
    std::atomic<int64_t> s{0};
    pool.parallel_for(2, 1, [&](int64_t b, int64_t e, int) { s += e - b; });
    total += s.load();
  }
  EXPECT_EQ(total, 10000);
}

TEST(ThreadPool, SpinTimeFromTheEnvironment) {
  for (const char* bad : {"abc", "-1", "12us", "99999999999"}) {
    ::setenv("UBFUSE_POOL_SPIN_US", bad, 1);
    try {
      ThreadPool p(2);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("UBFUSE_POOL_SPIN_US='" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
  for (const char* ok : {"0", "5000"}) {  // no spin, and a long one: the same sums
    ::setenv("UBFUSE_POOL_SPIN_US", ok, 1);
    ThreadPool p(2);
    for (int rep = 0; rep < 50; rep++) {
      std::atomic<int64_t> sum{0};
      p.parallel_for(1000, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; i++) sum += i;
      });
      ASSERT_EQ(sum.load(), 999 * 1000 / 2) << ok;
    }
  }
  ::unsetenv("UBFUSE_POOL_SPIN_US");
}

}  // namespace
}  // namespace ubfuse
