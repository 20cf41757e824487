// DnnlThreads (dnnl_util.h): the OpenMP thread count of the calling thread around a oneDNN call.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/dnnl_util.h"

namespace ubfuse::cpu {

DnnlThreads::DnnlThreads(int64_t macs, int pool_threads) : saved_(omp_get_max_threads()) {
  const int n = macs < kDnnlOneThreadMacs ? 1 : std::max(1, pool_threads);
  if (n != saved_) omp_set_num_threads(n);
}

DnnlThreads::~DnnlThreads() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

}  // namespace ubfuse::cpu
