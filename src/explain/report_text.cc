// The explain report as text: kernels, boundaries with reasons and hints, traffic.
#include <fmt/format.h>

#include <map>

#include "profiler/summary.h"
#include "ubfuse/explain.h"

namespace ubfuse {

namespace {

using prof::format_bytes;

std::string join(const std::vector<std::string>& xs, const std::string& sep) {
  std::string s;
  for (auto& x : xs) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string plural(size_t n, const char* one) {
  return fmt::format("{} {}{}", n, one, n == 1 ? "" : "s");
}

void kernels_text(std::string& out, const std::vector<KernelTraffic>& ks) {
  size_t w = 0;
  for (auto& k : ks) w = std::max(w, k.name.size());
  for (size_t i = 0; i < ks.size(); i++) {
    const KernelTraffic& k = ks[i];
    std::string chain;
    for (size_t j = 0; j < k.nodes.size(); j++) {
      chain += (j ? " -> " : "") + k.nodes[j] + " (" + (j < k.ops.size() ? k.ops[j] : "?") + ")";
    }
    out += fmt::format("  #{:<2} {:<{}}  reads {:>9}, writes {:>9}{}\n", i, k.name, w,
                       format_bytes(double(k.bytes_read)), format_bytes(double(k.bytes_written)),
                       k.variant.empty() ? "" : "  [" + k.variant + "]");
    out += fmt::format("      {}\n", chain);
    out += fmt::format("      in: {}   out: {}\n", join(k.inputs, ", "), join(k.outputs, ", "));
  }
}

std::string decision_line(const FusionDecision& d) {
  std::string edge = d.producer.empty() && d.consumer.empty()
                         ? ""
                         : " " + d.producer + (d.consumer.empty() ? "" : " -> " + d.consumer);
  return std::string(fusion_reason_name(d.reason)) + edge;
}

}  // namespace

std::string format_explain(const ExplainReport& r) {
  std::string out;
  std::string dims;
  for (auto& [k, v] : r.dims) dims += (dims.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  out += fmt::format("ubfuse explain: {}{}, ub_bytes {}\n\n", r.model_name,
                     dims.empty() ? "" : " (" + dims + ")", r.ub_bytes);

  const CompileProgress& built = r.graph.stats().kernels;
  out += fmt::format("Compile: graph mode {:.0f} ms, eager {:.0f} ms", r.graph.stats().compile_ms,
                     r.eager.stats().compile_ms);
  const int compiled = built.kernels_total - built.kernels_cached;
  if (compiled > 0) {
    out += fmt::format("; {}: {} compiled ({} job{}, {:.0f} ms), {} from the kernel cache",
                       plural(size_t(built.kernels_total), "generated kernel"), compiled,
                       built.jobs, built.jobs == 1 ? "" : "s", built.elapsed_ms,
                       built.kernels_cached);
  } else if (built.kernels_total > 0) {
    out += fmt::format("; {}, all from the kernel cache",
                       plural(size_t(built.kernels_total), "generated kernel"));
  }
  out += "\n\n";
  out += fmt::format("Graph mode: {} (eager: {})\n", plural(r.graph_kernels.size(), "kernel"),
                     plural(r.eager_kernels.size(), "kernel"));
  kernels_text(out, r.graph_kernels);

  out += "\n";
  if (r.boundaries.empty()) {
    out += "Kernel boundaries: none, every edge between ops is fused\n";
  } else {
    out += fmt::format(
        "Kernel boundaries ({}): each value crossing one is written to main memory "
        "and read back\n",
        r.boundaries.size());
    // The tally first: in a big model it says which reason costs the most traffic.
    std::map<std::string, std::pair<int, int64_t>> by_reason;
    for (auto& b : r.boundaries) {
      auto& [edges, bytes] = by_reason[std::string(fusion_reason_name(b.decision.reason))];
      edges++;
      bytes += b.bytes;
    }
    for (auto& [reason, eb] : by_reason) {
      out += fmt::format("  {:<15} {:>4} {:<6} {:>10} crossing\n", reason, eb.first,
                         eb.first == 1 ? "edge," : "edges,", format_bytes(double(eb.second)));
    }
    out += "\n";
    for (auto& b : r.boundaries) {
      out += fmt::format("  {}   {} -> {}, {} ({})\n", decision_line(b.decision), b.producer_kernel,
                         b.consumer_kernel, format_bytes(double(b.bytes)), join(b.values, ", "));
      out += fmt::format("    why:  {}\n", b.decision.message);
      if (!b.decision.hint.empty()) out += fmt::format("    hint: {}\n", b.decision.hint);
    }
  }
  if (!r.notes.empty()) {
    out += "\nNotes:\n";
    for (auto& d : r.notes) {
      out += fmt::format("  {}\n    why:  {}\n", decision_line(d), d.message);
      if (!d.hint.empty()) out += fmt::format("    hint: {}\n", d.hint);
    }
  }

  for (auto& k : r.graph_kernels) {
    if (k.variant.find("two-pass") == std::string::npos) continue;
    out += fmt::format(
        "\n{} runs two-pass: it re-reads its row inputs, so it moves more than the "
        "once-each bytes below (the profiler trace shows what it read)\n",
        k.name);
  }
  out +=
      "\nMain-memory traffic per run (predicted from the plan: inputs read once, outputs "
      "written once per kernel):\n";
  out += fmt::format("  eager  {:<10}  {:>10}\n", plural(r.eager_kernels.size(), "kernel"),
                     format_bytes(double(r.eager_bytes)));
  out += fmt::format("  graph  {:<10}  {:>10}\n", plural(r.graph_kernels.size(), "kernel"),
                     format_bytes(double(r.graph_bytes)));
  out += fmt::format(
      "  speedup bound {:.2f}x (eager bytes / graph bytes: the most fusion can gain "
      "where the kernels are memory-bound)\n",
      r.speedup_bound);
  return out;
}

}  // namespace ubfuse
