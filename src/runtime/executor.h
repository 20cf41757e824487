// Running an Executable: bind the symbols from the input sizes, fetch (or build) the plan for
// that binding, take a workspace (arena + per-thread UBs) from the pool, launch the kernels in
// order on the buffers the plan names. Plans and workspaces are cached here, so the Executable
// stays immutable; every method is safe from many threads.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "plan/plan.h"
#include "runtime/executable.h"

namespace ubfuse {

struct Workspace {
  Tensor arena;                     // raw bytes, grown on demand and reused across runs
  std::vector<Tensor> ubs;          // one per worker
  std::vector<char> block_scratch;  // ExecContext::block_scratch
  std::vector<Tensor> in, out;      // the operands of the kernel running, rebound per kernel
  std::vector<Sizes> in_storage;    // ExecContext::in_storage of the kernel running
  std::vector<Tensor> kv_dense;     // per KvCache pair: its rows, for kernels that need them dense
};

class Executor {
 public:
  explicit Executor(std::shared_ptr<const Executable> exe);

  const Executable& executable() const { return *exe_; }

  // With `kv`, the past inputs come from the cache and the presents are appended to it in place
  // (kv_cache.cc).
  void run(const std::map<std::string, Tensor>& inputs, std::map<std::string, Tensor>& outputs,
           bool allocate_outputs, RunStats* stats, KvCache* kv = nullptr) const;
  KvCache make_kv_cache(int64_t max_length, const SymbolBindings& dims) const;
  // Binds the symbols of the graph inputs from the given tensors, checking rank, dims and dtype.
  SymbolBindings bind_inputs(const std::map<std::string, Tensor>& inputs) const;
  // The plan for a binding and the contents of the value inputs (graph inputs that shapes
  // depend on), built on first use and cached under both; `*built` says whether this call
  // built it.
  std::shared_ptr<const Plan> plan_for(const SymbolBindings& b,
                                       const std::map<std::string, Tensor>& inputs = {},
                                       bool* built = nullptr) const;
  const PlanSpec& plan_spec() const { return spec_; }
  // A plan built afresh (not cached): for reports about shapes the model may never run.
  std::shared_ptr<const Plan> build_plan(const SymbolBindings& b,
                                         const std::map<std::string, Tensor>& inputs = {}) const;
  CompileStats stats() const;

 private:
  std::unique_ptr<Workspace> acquire_workspace() const;
  void release_workspace(std::unique_ptr<Workspace> ws) const;
  ExecContext context(Workspace& ws) const;  // a kernel call's context on ws's buffers

  // A plan's key: the symbols bound from input sizes, and the contents of the value inputs.
  struct PlanKey {
    SymbolBindings symbols;
    std::vector<std::string> values;  // raw bytes, in value_inputs order
    auto operator<=>(const PlanKey&) const = default;
  };
  PlanKey key_of(const SymbolBindings& b, const std::map<std::string, Tensor>& inputs) const;

  std::shared_ptr<const Executable> exe_;
  PlanSpec spec_;
  mutable PlanMemo memo_;  // what earlier plans inferred, per node (plan/plan.h)
  mutable std::mutex mu_;
  // At most kMaxPlans, the least recently used evicted first: a decoding loop makes a plan per
  // past length, and a model fed ever new shape values would otherwise grow without bound.
  static constexpr size_t kMaxPlans = 256;
  struct Cached {
    std::shared_ptr<const Plan> plan;
    uint64_t last_used = 0;
  };
  mutable std::map<PlanKey, Cached> plans_;
  mutable uint64_t use_clock_ = 0;
  mutable std::vector<std::unique_ptr<Workspace>> free_workspaces_;
  mutable std::atomic<int> plan_builds_{0};
  mutable std::atomic<int> plan_hits_{0};
};

}  // namespace ubfuse
