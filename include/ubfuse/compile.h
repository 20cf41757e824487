// compile(graph, options) -> CompiledModel, and running it.
//
//   ubfuse::CompiledModel m = ubfuse::compile(g, {{"ge.exec.enableOperatorFusion", "1"}});
//   auto outs = m.run({{"x", x}, {"residual", r}});
//
// Eager mode is the same runtime with fusion switched off: one kernel per op.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// Options as a string map; keys use the GE names users already write plus native names.
// See docs/options.md. Unknown keys and bad values throw Error listing the valid ones.
using Options = std::map<std::string, std::string>;

enum class FusionReason : uint8_t {
  Fused,           // the edge is inside one kernel
  HostSync,        // a Host node forces a sync
  DynamicShape,    // a shape prevents fusion
  BufferCapacity,  // the unified buffer cannot hold what the group keeps
  NotFusible,      // an op class that does not fuse here
  DisabledByRule,  // switched off by options or the rules file
  ShapeMismatch,   // the two sides iterate over different domains
  Cycle,           // fusing would create a cycle through another kernel
  GroupLimit,      // the group reached kMaxGroupOps / kMaxGroupInputs
};
std::string_view fusion_reason_name(FusionReason r);

// One decision for a producer -> consumer edge (or for a node, where consumer is empty).
struct FusionDecision {
  FusionReason reason = FusionReason::Fused;
  std::string producer;  // node names
  std::string consumer;
  std::string message;  // says why, naming the nodes
  std::string hint;     // what a user can do about it
};

// A kernel the executor launches: one op (eager) or a fused group.
struct KernelInfo {
  std::string name;                     // "Add", "FusedAddLayerNormSilu"
  std::vector<std::string> node_names;  // source nodes inside, in order
  std::vector<std::string> op_types;
  std::vector<std::string> input_values, output_values;
  bool host = false;    // a Host callback rather than a compute kernel
  std::string variant;  // e.g. "codegen", "interpreter", "eager", "two-pass"
};

struct CompileStats {
  int compilations = 0;  // times the graph was compiled (1 per CompiledModel)
  int plan_builds = 0;   // run-time plans built for new concrete shapes
  int plan_cache_hits = 0;
  double compile_ms = 0;
  std::vector<std::pair<std::string, double>> pass_ms;  // per pass
  std::vector<double> pass_start_ms;  // per pass, its start after start_ns (places trace events)
  int64_t start_ns = 0;               // steady clock when compile() began
};

struct RunStats {
  int64_t bytes_read = 0;     // main-memory bytes the kernels read (inputs of each kernel)
  int64_t bytes_written = 0;  // and wrote
  int kernels_launched = 0;
};

class CompiledModelImpl;

class CompiledModel {
 public:
  CompiledModel() = default;
  explicit CompiledModel(std::shared_ptr<CompiledModelImpl> impl) : impl_(std::move(impl)) {}

  // Runs on named inputs; returns named outputs (freshly allocated).
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs,
                                    RunStats* stats = nullptr) const;
  // Runs into caller-provided outputs (reused across calls: no allocation, no page faults).
  void run_into(const std::map<std::string, Tensor>& inputs, std::map<std::string, Tensor>& outputs,
                RunStats* stats = nullptr) const;

  const std::vector<KernelInfo>& kernels() const;
  const std::vector<FusionDecision>& decisions() const;
  CompileStats stats() const;
  const Graph& graph() const;  // the graph after all passes
  bool fusion_enabled() const;
  // Output names and, after binding symbols, their sizes.
  std::vector<std::string> output_names() const;
  std::vector<std::string> input_names() const;

  CompiledModelImpl& impl() const { return *impl_; }

 private:
  std::shared_ptr<CompiledModelImpl> impl_;
};

// Compiles a copy of `g`; `g` itself is not changed.
CompiledModel compile(const Graph& g, const Options& options = {});

// Convenience: compile with fusion off and run once.
std::map<std::string, Tensor> run_eager(const Graph& g,
                                        const std::map<std::string, Tensor>& inputs);

}  // namespace ubfuse
