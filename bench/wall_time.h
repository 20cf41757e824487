// Wall-clock timing shared by the benchmarks that print their own ratios.
#pragma once

#include <algorithm>
#include <chrono>

namespace ubfuse::bench {

// Seconds one call of `f` takes.
template <typename F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best wall time of `reps` calls (after one warm-up), in seconds.
template <typename F>
double best_seconds(F&& f, int reps) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; i++) best = std::min(best, seconds(f));
  return best;
}

}  // namespace ubfuse::bench
