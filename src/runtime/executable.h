// What compile() produces: the optimized graph, its kernels in launch order, the fusion
// decisions and the settings the kernels run with. Immutable once compile() returns; the
// Executor (executor.h) owns everything that changes while running.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/thread_pool.h"
#include "ubfuse/decision.h"
#include "ubfuse/graph.h"
#include "ubfuse/model.h"

namespace ubfuse {

// The options the runtime reads (the compiler parses them: compiler/options.h).
struct RunConfig {
  int64_t ub_bytes = 0;              // per worker thread
  int64_t matmul_block_bytes = 0;    // MatMul epilogue block; 0: chosen per MatMul
  int64_t memory_limit = 0;          // bytes of intermediates + outputs per run; 0: none
  bool dynamic_dims_strict = false;  // only the gears' shapes are accepted
  ThreadPool* pool = nullptr;
};

struct Executable {
  Graph graph;
  std::vector<std::unique_ptr<Kernel>> kernels;  // launch order
  std::vector<KernelInfo> kernel_infos;          // one per kernel
  std::vector<FusionDecision> decisions;
  // Values that are views of another value's bytes (Reshapes without a kernel: ir/views.h).
  std::unordered_map<const Value*, const Value*> view_of;
  std::vector<SymbolBindings> gears;  // pre-planned shapes (ge.dynamic_dims)
  // Shape nodes (plan/plan.h), each with its kernel: the plan runs them while it is built.
  std::vector<std::pair<const Node*, std::unique_ptr<Kernel>>> shape_kernels;
  // Graph inputs whose contents shape nodes read: part of the plan's key.
  std::vector<const Value*> value_inputs;
  RunConfig run;
  bool fusion = true;
  CompileStats compile_stats;
};

}  // namespace ubfuse
