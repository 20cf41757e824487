// The explain report as one JSON object (ubfuse explain --json).
#include "explain/report_json.h"

#include <nlohmann/json.hpp>

#include "ubfuse/explain.h"

namespace ubfuse {

namespace {

using nlohmann::json;

json kernels_json(const std::vector<KernelTraffic>& ks) {
  json a = json::array();
  for (auto& k : ks) {
    a.push_back({{"name", k.name},
                 {"nodes", k.nodes},
                 {"ops", k.ops},
                 {"inputs", k.inputs},
                 {"outputs", k.outputs},
                 {"bytes_read", k.bytes_read},
                 {"bytes_written", k.bytes_written},
                 {"host", k.host},
                 {"variant", k.variant}});
  }
  return a;
}

json decision_json(const FusionDecision& d) {
  return {{"reason", std::string(fusion_reason_name(d.reason))},
          {"producer", d.producer},
          {"consumer", d.consumer},
          {"message", d.message},
          {"hint", d.hint}};
}

}  // namespace

json compile_stats_json(const CompileStats& s) {
  const CompileProgress& k = s.kernels;
  return {{"compile_ms", s.compile_ms},
          {"generated_kernels", k.kernels_total},
          {"kernels_compiled", k.kernels_total - k.kernels_cached},
          {"kernel_cache_hits", k.kernels_cached},
          {"compile_jobs", k.jobs},
          {"kernel_build_ms", k.elapsed_ms}};
}

std::string explain_json(const ExplainReport& r) {
  json j;
  j["model"] = r.model_name;
  j["dims"] = r.dims;
  j["ub_bytes"] = r.ub_bytes;
  j["eager"] = {{"kernels", kernels_json(r.eager_kernels)},
                {"bytes", r.eager_bytes},
                {"compile", compile_stats_json(r.eager.stats())}};
  j["graph"] = {{"kernels", kernels_json(r.graph_kernels)},
                {"bytes", r.graph_bytes},
                {"compile", compile_stats_json(r.graph.stats())}};
  j["speedup_bound"] = r.speedup_bound;
  j["boundaries"] = json::array();
  for (auto& b : r.boundaries) {
    json e = decision_json(b.decision);
    e["producer_kernel"] = b.producer_kernel;
    e["consumer_kernel"] = b.consumer_kernel;
    e["values"] = b.values;
    e["bytes"] = b.bytes;
    j["boundaries"].push_back(std::move(e));
  }
  j["fused"] = json::array();
  for (auto& d : r.fused) j["fused"].push_back(decision_json(d));
  j["notes"] = json::array();
  for (auto& d : r.notes) j["notes"].push_back(decision_json(d));
  return j.dump(2);
}

}  // namespace ubfuse
