// A compiled model: what compile() returns, and running it.
//
//   auto outs = model.run({{"x", x}, {"residual", r}});
//   model.run_into(inputs, outputs);   // reuses the caller's output tensors
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ubfuse/decision.h"
#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// A kernel the executor launches: one op (eager) or a fused group.
struct KernelInfo {
  std::string name;                     // "Add", "FusedAddLayerNormSilu"
  std::vector<std::string> node_names;  // source nodes inside, in order
  std::vector<std::string> op_types;
  std::vector<std::string> input_values, output_values;
  bool host = false;    // a Host callback rather than a compute kernel
  std::string variant;  // e.g. "codegen", "interpreter", "eager", "two-pass"
};

// Building graph mode's generated kernels: a progress display's numbers (compile() passes them
// to its progress callback) and, when finished, a part of CompileStats.
struct CompileProgress {
  int kernels_done = 0, kernels_total = 0;  // distinct generated kernels
  int kernels_cached = 0;                   // of kernels_done, found in the kernel cache
  int jobs = 0;                             // compiler processes run at once
  double elapsed_ms = 0;
  bool finished = false;
};

struct CompileStats {
  int compilations = 0;  // times the graph was compiled (1 per CompiledModel)
  int plan_builds = 0;   // run-time plans built for new concrete shapes
  int plan_cache_hits = 0;
  // Over those plans' nodes: shape inference reused from an earlier plan whose node saw the same
  // input sizes and values (a decode step re-infers only what sees the past), or run afresh.
  int64_t plan_nodes_reused = 0, plan_nodes_inferred = 0;
  double compile_ms = 0;
  CompileProgress kernels;  // the generated kernels' build (all zero without any)
  std::vector<std::pair<std::string, double>> pass_ms;  // per pass
  std::vector<double> pass_start_ms;  // per pass, its start after start_ns (places trace events)
  int64_t start_ns = 0;               // steady clock when compile() began
};

struct RunStats {
  int64_t bytes_read = 0;     // main-memory bytes the kernels read (inputs of each kernel)
  int64_t bytes_written = 0;  // and wrote
  int kernels_launched = 0;
  // Kernels this call skipped because its plan ran them once when it was built: their inputs
  // are all constants or shape values (a decoder's positions, rotary cos/sin, causal mask).
  int kernels_precomputed = 0;
  // Where the call's time went: binding the inputs' shapes and finding (or building) the plan,
  // the kernels themselves, and the whole call. total - plan - kernels is the run's own overhead
  // (output and workspace setup, operand views, launching).
  double total_us = 0, plan_us = 0, kernels_us = 0;
  bool plan_built = false;  // this call built the plan for a new shape (or shape values)
  // With a KvCache (run_with_cache): rows appended in place over its pairs, and how many times a
  // kernel that cannot read a cache's buffer in place got a dense copy of its rows instead.
  int64_t kv_rows_appended = 0;
  int kv_dense_copies = 0;
};

class KvCache;

class Executor;

// An immutable executable (graph, kernels, decisions) and the executor that runs it (plans per
// shape, workspaces). Cheap to copy; copies share both. run() is safe from many threads.
class CompiledModel {
 public:
  CompiledModel() = default;
  explicit CompiledModel(std::shared_ptr<const Executor> executor)
      : executor_(std::move(executor)) {}

  // Runs on named inputs; returns named outputs (freshly allocated).
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs,
                                    RunStats* stats = nullptr) const;
  // Runs into caller-provided outputs (reused across calls: no allocation, no page faults).
  void run_into(const std::map<std::string, Tensor>& inputs, std::map<std::string, Tensor>& outputs,
                RunStats* stats = nullptr) const;

  // A decoder's self-attention cache kept in place: see KvCache. `dims` gives the symbolic dims
  // of the past inputs other than the sequence axis (e.g. {"batch_size", 1}). Throws Error when
  // the model has no past/present pair a Concat links (the message says why for each input).
  KvCache make_kv_cache(int64_t max_length, const SymbolBindings& dims = {}) const;
  // run_into with the past inputs taken from `cache` (leave them out of `inputs`) and the present
  // outputs appended to it in place (they are not in `outputs`); the cache grows by the rows
  // the call adds.
  void run_with_cache(const std::map<std::string, Tensor>& inputs, KvCache& cache,
                      std::map<std::string, Tensor>& outputs, RunStats* stats = nullptr) const;

  const std::vector<KernelInfo>& kernels() const;
  const std::vector<FusionDecision>& decisions() const;
  CompileStats stats() const;
  const Graph& graph() const;  // the graph after all passes
  bool fusion_enabled() const;
  std::vector<std::string> output_names() const;
  std::vector<std::string> input_names() const;
  int num_threads() const;   // the thread pool the kernels run on
  int64_t ub_bytes() const;  // the unified buffer per thread

  // The runtime behind this model, for ubfuse's own layers (profiler, explain); opaque to users.
  const Executor& executor() const;

 private:
  std::shared_ptr<const Executor> executor_;
};

// A decoder's KV cache in buffers of a maximum length (CompiledModel::make_kv_cache). Each pair is
// a past input and the present output a Concat makes of it and the call's new rows along one
// axis; its buffer has present's sizes with that axis at max_length. run_with_cache passes the
// rows so far as the past and writes only the new rows, so a step never copies the past, and
// the kernels that read present (attention, Transpose, Expand) read the buffer in place (others
// get a dense copy, counted in RunStats::kv_dense_copies). One sequence: not for concurrent runs.
class KvCache {
 public:
  struct Pair {
    std::string past, present;
    int axis = 0;   // the sequence axis, the Concat's
    Tensor buffer;  // present's sizes with `axis` at max_length; rows [0, length()) are valid
  };
  KvCache() = default;
  // One sequence's rows: moved, never copied (two copies would write the same buffers).
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t length() const { return length_; }  // rows held: the next call's past length
  int64_t max_length() const { return max_length_; }
  const std::vector<Pair>& pairs() const { return pairs_; }
  void reset() { length_ = 0; }  // start a new sequence (the buffers are kept)
  // Appends rows computed elsewhere (a prompt run by a decoder without past): `presents` holds,
  // under each pair's present name, its new rows (the buffer's sizes but n along the axis, the
  // same n for every pair); other entries are ignored.
  void append(const std::map<std::string, Tensor>& presents);
  // The rows so far of one present output, as a dense tensor (a copy).
  Tensor rows(const std::string& present) const;

 private:
  friend class Executor;
  friend class CompiledModel;
  std::shared_ptr<const void> owner_;  // the executor it was made for, kept alive by it
  std::vector<Pair> pairs_;
  struct Slot {
    int input = -1, output = -1;  // graph input (past), graph output (present)
    size_t kernel = 0;            // the Concat's kernel
  };
  std::vector<Slot> slots_;
  int64_t length_ = 0, max_length_ = 0;
};

}  // namespace ubfuse
