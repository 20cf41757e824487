#include "profiler/chrome_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ubfuse::prof {

namespace {

using nlohmann::json;

json dtype_names(const std::vector<DType>& ds) {
  json a = json::array();
  for (auto d : ds) a.push_back(std::string(dtype_name(d)));
  return a;
}

json kernel_args(const TraceEvent& e, const TraceMeta& meta) {
  const KernelFields& k = e.kernel;
  json a;
  a["nodes"] = k.nodes;
  a["ops"] = k.ops;
  a["inputs"] = k.input_values;
  a["outputs"] = k.output_values;
  if (!k.in_sizes.empty() || !k.out_sizes.empty()) {
    a["input_shapes"] = k.in_sizes;
    a["input_dtypes"] = dtype_names(k.in_dtypes);
    a["output_shapes"] = k.out_sizes;
    a["output_dtypes"] = dtype_names(k.out_dtypes);
  }
  a["bytes_read"] = k.bytes_read;
  a["bytes_written"] = k.bytes_written;
  double gbs = gb_per_s(k.bytes_read + k.bytes_written, e.t1_ns - e.t0_ns);
  a["gb_per_s"] = gbs;
  if (meta.bandwidth_gb_per_s > 0) a["pct_of_bandwidth"] = 100 * gbs / meta.bandwidth_gb_per_s;
  a["variant"] = k.variant;
  a["step"] = k.step;
  if (!k.model_label.empty()) a["model"] = k.model_label;
  if (!k.boundaries.empty()) a["fusion_boundaries"] = k.boundaries;
  return a;
}

json compile_args(const TraceEvent& e) {
  json a;
  a["model"] = e.compile.model_label;
  a["mode"] = e.compile.fusion ? "graph" : "eager";
  a["ms"] = double(e.t1_ns - e.t0_ns) / 1e6;
  if (!e.compile.decisions.empty()) a["not_fused"] = e.compile.decisions;
  return a;
}

// Microseconds with nanosecond resolution.
double us(int64_t ns) { return double(ns) / 1000.0; }

}  // namespace

std::string chrome_trace_json(std::vector<TraceEvent> events,
                              const std::map<int, std::string>& thread_names,
                              const TraceMeta& meta) {
  std::stable_sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.tid != b.tid ? a.tid < b.tid : a.t0_ns < b.t0_ns;
  });
  int64_t origin = 0;
  if (!events.empty()) {
    origin = std::min_element(events.begin(), events.end(), [](auto& a, auto& b) {
               return a.t0_ns < b.t0_ns;
             })->t0_ns;
  }
  json evs = json::array();
  evs.push_back({{"name", "process_name"},
                 {"ph", "M"},
                 {"pid", meta.pid},
                 {"tid", 0},
                 {"args", {{"name", meta.process_name}}}});
  for (auto& [tid, name] : thread_names) {
    evs.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", meta.pid},
                   {"tid", tid},
                   {"args", {{"name", name}}}});
    evs.push_back({{"name", "thread_sort_index"},
                   {"ph", "M"},
                   {"pid", meta.pid},
                   {"tid", tid},
                   {"args", {{"sort_index", tid}}}});
  }
  for (size_t i = 0; i < events.size(); i++) {
    const TraceEvent& e = events[i];
    int64_t t1 = e.t1_ns;
    // Rows never overlap: a clock read after a kernel can equal the next kernel's start.
    if (i + 1 < events.size() && events[i + 1].tid == e.tid) t1 = std::min(t1, events[i + 1].t0_ns);
    json j = {{"name", e.name},
              {"cat", e.cat},
              {"ph", "X"},
              {"ts", us(e.t0_ns - origin)},
              {"dur", us(std::max<int64_t>(t1 - e.t0_ns, 0))},
              {"pid", meta.pid},
              {"tid", e.tid}};
    if (e.cat == "kernel" || e.cat == "host") {
      j["args"] = kernel_args(e, meta);
    } else if (e.cat == "compile") {
      j["args"] = compile_args(e);
    } else {
      j["args"] = {{"step", e.kernel.step}};
    }
    evs.push_back(std::move(j));
  }
  json other = {{"producer", "ubfuse profiler"},
                {"bandwidth_gb_per_s", meta.bandwidth_gb_per_s},
                {"bandwidth_source", meta.bandwidth_source},
                {"machine", meta.machine},
                {"steps", meta.steps}};
  // One event per line: small enough to diff and grep, still one JSON document.
  std::string out =
      "{\"displayTimeUnit\": \"ms\",\n\"otherData\": " + other.dump() + ",\n\"traceEvents\": [\n";
  for (size_t i = 0; i < evs.size(); i++) {
    out += evs[i].dump();
    out += i + 1 < evs.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  return out;
}

}  // namespace ubfuse::prof
