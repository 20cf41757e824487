// Eager CPU kernels: one kernel per op, reading inputs from and writing outputs to main memory.
// Vectorized with Highway (runtime dispatch), threaded with the ThreadPool.
#pragma once

#include <memory>
#include <vector>

#include "runtime/thread_pool.h"
#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse::cpu {

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // inputs/outputs are contiguous row-major with the concrete sizes of this call; outputs are
  // already allocated. Must be safe to call from several threads at once.
  virtual void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                   ThreadPool& pool) const = 0;
  // Kernel::reads_pitched for an op kernel; run_pitched then gets, per input, empty sizes or
  // those of the dense buffer the input leads (runtime/kernel.h, ExecContext::in_storage).
  virtual bool reads_pitched(size_t i, int axis, int rank) const {
    (void)i, (void)axis, (void)rank;
    return false;
  }
  virtual void run_pitched(const std::vector<Tensor>& inputs, const std::vector<Sizes>& storage,
                           std::vector<Tensor>& outputs, ThreadPool& pool) const {
    (void)storage;
    run(inputs, outputs, pool);
  }
};

// Builds the kernel for node `n` (any op but Constant and Host). Inputs produced by Constant
// nodes can be read at build time (e.g. MatMul prepacks constant weights once).
std::unique_ptr<OpKernel> make_op_kernel(const Node& n);

}  // namespace ubfuse::cpu
