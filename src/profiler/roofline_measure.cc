// Bridges the roofline cache to the STREAM add measurement in profiler/bandwidth.h: 256 MiB arrays
// (DRAM-bound here), non-temporal stores, on the global pool that models run on by default.
#include "profiler/bandwidth.h"
#include "profiler/roofline.h"
#include "runtime/thread_pool.h"
#include "ubfuse/error.h"

namespace ubfuse::prof {

int threads_for_measurement() { return ThreadPool::global().size(); }

double measure_add_bandwidth(int* threads) {
  *threads = threads_for_measurement();
  try {
    return measure_stream_add_gbps(ThreadPool::global());
  } catch (const Error&) {
    return 0;  // e.g. the arrays cannot be allocated: the % column reads 0, nothing else breaks
  }
}

}  // namespace ubfuse::prof
