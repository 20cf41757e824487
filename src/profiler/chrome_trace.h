// Chrome trace event format (the JSON chrome://tracing and Perfetto open):
//   {"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid", "tid", "args"}, ...]}
// ts and dur in microseconds from the earliest event; "M" events name the process and rows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "profiler/trace_event.h"

namespace ubfuse::prof {

struct TraceMeta {
  std::string process_name;
  int pid = 0;
  double bandwidth_gb_per_s = 0;  // 0: unknown, pct_of_bandwidth is then omitted
  std::string bandwidth_source;
  std::string machine;
  int steps = 0;
};

// GB/s of `bytes` moved in `ns` nanoseconds (0 when ns is 0).
inline double gb_per_s(int64_t bytes, int64_t ns) {
  return ns > 0 ? double(bytes) / double(ns) : 0;
}

std::string chrome_trace_json(std::vector<TraceEvent> events,
                              const std::map<int, std::string>& thread_names,
                              const TraceMeta& meta);

}  // namespace ubfuse::prof
