// The state behind a CompiledModel: the optimized graph, its kernels in launch order, and the
// run-time plans (concrete sizes, arena offsets) built once per concrete shape and cached.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "compiler/options.h"
#include "runtime/kernel.h"
#include "ubfuse/compile.h"

namespace ubfuse {

// Sizes and arena placement of every value for one binding of the symbols.
struct Plan {
  SymbolBindings symbols;
  std::unordered_map<const Value*, Sizes> sizes;
  std::unordered_map<const Value*, int64_t> offset;  // arena byte offset of intermediates
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;  // what the intermediates would take without reuse
};

struct Workspace {
  Tensor arena;                     // raw bytes, grown on demand and reused across runs
  std::vector<Tensor> ubs;          // one per worker
  std::vector<char> block_scratch;  // ExecContext::block_scratch
};

class CompiledModelImpl {
 public:
  Graph graph;
  CompileConfig config;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<KernelInfo> kernel_infos;
  std::vector<FusionDecision> decisions;
  CompileStats compile_stats;
  ThreadPool* pool = nullptr;
  std::vector<SymbolBindings> gears;  // pre-planned shapes (ge.dynamic_dims)
  // Values that are views of another value's bytes (Reshapes without a kernel: views.h).
  std::unordered_map<const Value*, const Value*> view_of;

  // The value whose buffer holds v's bytes: v itself unless v is a view (of a view...).
  const Value* storage_of(const Value* v) const {
    for (auto it = view_of.find(v); it != view_of.end(); it = view_of.find(v)) v = it->second;
    return v;
  }

  void run(const std::map<std::string, Tensor>& inputs, std::map<std::string, Tensor>& outputs,
           bool allocate_outputs, RunStats* stats) const;
  // Binds the symbols of the graph inputs from the given tensors, checking rank, dims and dtype.
  SymbolBindings bind_inputs(const std::map<std::string, Tensor>& inputs) const;
  std::shared_ptr<const Plan> plan_for(const SymbolBindings& b) const;
  std::shared_ptr<const Plan> build_plan(const SymbolBindings& b) const;
  CompileStats stats() const;

 private:
  std::unique_ptr<Workspace> acquire_workspace() const;
  void release_workspace(std::unique_ptr<Workspace> ws) const;

  mutable std::mutex mu_;
  mutable std::map<SymbolBindings, std::shared_ptr<const Plan>> plans_;
  mutable std::vector<std::unique_ptr<Workspace>> free_workspaces_;
  mutable std::atomic<int> plan_builds_{0};
  mutable std::atomic<int> plan_hits_{0};
};

}  // namespace ubfuse
