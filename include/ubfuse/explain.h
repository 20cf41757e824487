// Fusion explainer: what graph mode fused, what it did not and why, and what that means for
// main-memory traffic -- before running anything.
//
//   ubfuse::ExplainReport r = ubfuse::explain(graph, {.options = {{"ub_bytes", "65536"}}});
//   std::puts(ubfuse::format_explain(r).c_str());
//   ubfuse::write_dot_files(r, "out");  // out/before.dot, out/after.dot (+ .svg with Graphviz)
//
// The graph is compiled twice, fusion off (eager: one kernel per op) and on (graph mode). Bytes
// are predicted from the run-time plan: each kernel reads its inputs once and writes its outputs
// once, so symbolic dims need values (ExplainOptions::dims). The speedup bound is the ratio of
// eager to graph bytes: what a memory-bound block can gain at most from fusion alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ubfuse/compile.h"

namespace ubfuse {

struct ExplainOptions {
  Options options{};      // compile options; the fusion switch is set by explain itself
  SymbolBindings dims{};  // values for the model's symbolic dims
  std::string model_name = "model";
  CompileProgressFn on_progress{};  // passed to both compiles (see compile())
};

// One kernel and the main-memory bytes it moves per run.
struct KernelTraffic {
  std::string name;
  std::vector<std::string> nodes, ops;
  std::vector<std::string> inputs, outputs;  // value names
  int64_t bytes_read = 0, bytes_written = 0;
  bool host = false;
  std::string variant;
};

// A producer -> consumer edge that crosses from one graph-mode kernel to another.
struct ExplainBoundary {
  FusionDecision decision;  // reason, producer, consumer, message, hint
  std::string producer_kernel, consumer_kernel;
  std::vector<std::string> values;  // the values crossing
  int64_t bytes = 0;                // their size: each is written to main memory and read back
};

struct ExplainReport {
  std::string model_name;
  SymbolBindings dims;
  int64_t ub_bytes = 0;
  CompiledModel eager, graph;
  std::vector<KernelTraffic> eager_kernels, graph_kernels;  // launch order
  std::vector<ExplainBoundary> boundaries;  // graph-mode kernel boundaries, each with its reason
  std::vector<FusionDecision> fused;        // edges that ended inside one kernel
  std::vector<FusionDecision> notes;        // about a whole group or pass (two-pass, rules)
  int64_t eager_bytes = 0, graph_bytes = 0;
  double speedup_bound = 1;  // eager_bytes / graph_bytes
};

// Throws Error naming unbound symbols (hint: --dim NAME=V) and bad options.
ExplainReport explain(const Graph& g, const ExplainOptions& o = {});

// Per-kernel traffic of a compiled model for concrete symbol values.
std::vector<KernelTraffic> predicted_traffic(const CompiledModel& m, const SymbolBindings& dims);

std::string format_explain(const ExplainReport& r);  // the text report
std::string explain_json(const ExplainReport& r);    // the same as one JSON object

// Graphviz pictures. before: one node per op, edges labeled with bytes. after: graph-mode kernels
// as clusters named after the fused kernel; edges between kernels labeled with bytes, and with
// the reason where a fusion did not happen.
std::string before_dot(const ExplainReport& r);
std::string after_dot(const ExplainReport& r);

struct DotFiles {
  std::vector<std::string> written;  // paths, .dot and (with Graphviz) .svg
  std::string note;                  // why no SVG was written, if none was
};
// Writes dir/before.dot and dir/after.dot, and .svg beside them when Graphviz `dot` is on PATH.
DotFiles write_dot_files(const ExplainReport& r, const std::string& dir);

}  // namespace ubfuse
