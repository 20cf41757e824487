// What the executor launches: a Kernel reads tensors and writes tensors. Eager op kernels, fused
// group kernels (generated or interpreted) and Host callbacks all implement it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/thread_pool.h"
#include "ubfuse/model.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// Per-call scratch: one unified buffer (UB) per worker thread of the pool, and a block buffer.
struct ExecContext {
  ThreadPool* pool = nullptr;
  std::vector<float*> ub;  // ub[worker], each ub_bytes long
  int64_t ub_bytes = 0;
  // The call's workspace buffer for a kernel's own blocks (the MatMul epilogue's product blocks):
  // grown on demand, reused by later runs.
  std::vector<char>* block_scratch = nullptr;
  int64_t matmul_block_bytes = 0;  // option matmul_block_bytes; 0: chosen per MatMul
  int64_t extra_bytes_read = 0;    // kernels that re-read inputs (two-pass variants) add here
  std::string variant_used;        // set by kernels that pick a variant at run time
  // Per input of the kernel running (null: all dense): empty, or the sizes of the dense buffer
  // the input is the leading part of along one axis (a KV cache's rows so far). Only inputs the
  // kernel said it reads_pitched() arrive so.
  const std::vector<Sizes>* in_storage = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  KernelInfo info;
  std::vector<const Value*> inputs;  // in the order run() receives them
  std::vector<const Value*> outputs;
  // Outputs arrive allocated with this call's concrete sizes.
  virtual void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
                   ExecContext& ctx) const = 0;
  // Whether input `i` (of rank `rank`) can be read in place when it is the leading part along
  // `axis` of a larger dense buffer (ExecContext::in_storage), instead of a dense copy.
  virtual bool reads_pitched(size_t i, int axis, int rank) const {
    (void)i, (void)axis, (void)rank;
    return false;
  }
};

}  // namespace ubfuse
