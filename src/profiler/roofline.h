// The roofline the profiler's "% of bandwidth" divides by: the STREAM-style add bandwidth
// (2 reads + 1 write) measured once per process and cached in a small JSON file keyed by machine,
//   bandwidth.json in user_cache_dir() (util/cache_dir.h: $UBFUSE_CACHE_DIR, else
//   $XDG_CACHE_HOME/ubfuse, else ~/.cache/ubfuse)
//   {"machines": {"<cpu model> | <cpus> cpus | <mem> GiB | <threads> threads":
//                 {"add_gb_per_s": 27.1, "threads": 2, "measured_unix": 1764430000}}}
// so later runs on the same machine do not pay for the measurement; entries older than a week
// are measured again. Overrides:
//   UBFUSE_BANDWIDTH_GBPS=27.1     use this value (no measurement, no cache)
//   UBFUSE_REMEASURE_BANDWIDTH=1   measure again and replace the cached value
#pragma once

#include <string>

namespace ubfuse::prof {

struct Roofline {
  double gb_per_s = 0;     // 0: unavailable
  int threads = 0;         // threads the measurement used
  std::string machine;     // the cache key
  std::string source;      // "cache", "measured", "UBFUSE_BANDWIDTH_GBPS", "unavailable"
  std::string cache_path;  // "" when no cache file was used
};

// Thread-safe; measures at most once per process and cache file (a remeasure request measures
// once more).
Roofline machine_roofline(bool remeasure = false);

std::string bandwidth_cache_path();

// The measurement itself (profiler/roofline_measure.cc, over helper kernels in bandwidth.h):
// GB/s of a STREAM add on the global thread pool; 0 when it cannot run.
double measure_add_bandwidth(int* threads);
// The threads that measurement uses (part of the cache key: bandwidth scales with cores).
int threads_for_measurement();

}  // namespace ubfuse::prof
