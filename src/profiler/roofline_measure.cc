// Bridges the roofline cache to the STREAM add measurement in profiler/bandwidth.h.
#include "profiler/roofline.h"
#include "runtime/thread_pool.h"

namespace ubfuse::prof {

int threads_for_measurement() { return ThreadPool::global().size(); }

double measure_add_bandwidth(int* threads) {
  *threads = threads_for_measurement();
  return 0;  // TODO(profiler): call the STREAM add in profiler/bandwidth.h once it lands
}

}  // namespace ubfuse::prof
