// explain(): compiles the graph with fusion off and on, predicts each kernel's traffic from the
// plan, and sorts graph mode's fusion decisions into kernel boundaries (edges between two
// kernels, each with its reason), fused edges, and notes about whole groups or passes.
#include <map>

#include "explain/traffic.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

Options with_fusion(Options o, bool on) {
  o.erase("fusion");  // the native alias of the switch below
  o["ge.exec.enableOperatorFusion"] = on ? "1" : "0";
  return o;
}

int64_t total_bytes(const std::vector<KernelTraffic>& ks) {
  int64_t b = 0;
  for (auto& k : ks) b += k.bytes_read + k.bytes_written;
  return b;
}

}  // namespace

ExplainReport explain(const Graph& g, const ExplainOptions& o) {
  ExplainReport r;
  r.model_name = o.model_name;
  r.eager = compile(g, with_fusion(o.options, false), o.on_progress);
  r.graph = compile(g, with_fusion(o.options, true), o.on_progress);
  r.dims = explain_detail::bind_dims(r.graph.graph(), o.dims);
  r.ub_bytes = r.graph.ub_bytes();
  r.eager_kernels = predicted_traffic(r.eager, r.dims);
  r.graph_kernels = predicted_traffic(r.graph, r.dims);
  r.eager_bytes = total_bytes(r.eager_kernels);
  r.graph_bytes = total_bytes(r.graph_kernels);
  r.speedup_bound = r.graph_bytes > 0 ? double(r.eager_bytes) / double(r.graph_bytes) : 1;

  const Executor& ex = r.graph.executor();
  const Executable& exe = ex.executable();
  std::map<std::string, size_t> kernel_of;  // node name -> graph-mode kernel
  for (size_t k = 0; k < exe.kernels.size(); k++) {
    for (auto& n : exe.kernels[k]->info.node_names) kernel_of[n] = k;
  }
  auto plan = ex.build_plan(r.dims);
  for (const FusionDecision& d : exe.decisions) {
    auto pk = kernel_of.find(d.producer), ck = kernel_of.find(d.consumer);
    if (pk == kernel_of.end() || ck == kernel_of.end()) {
      r.notes.push_back(d);  // a pass or rule, or a node a later pass removed
      continue;
    }
    if (pk->second == ck->second) {
      (d.reason == FusionReason::Fused ? r.fused : r.notes).push_back(d);
      continue;
    }
    ExplainBoundary b;
    b.decision = d;
    b.producer_kernel = exe.kernels[pk->second]->info.name;
    b.consumer_kernel = exe.kernels[ck->second]->info.name;
    const Node* p = exe.graph.node_by_name(d.producer);
    const Node* c = exe.graph.node_by_name(d.consumer);
    if (p && c) {
      for (auto* v : p->outputs) {
        for (auto* in : c->inputs) {
          if (in != v) continue;
          b.values.push_back(v->name);
          b.bytes += explain_detail::value_bytes(v, *plan);
          break;
        }
      }
    }
    r.boundaries.push_back(std::move(b));
  }
  return r;
}

}  // namespace ubfuse
