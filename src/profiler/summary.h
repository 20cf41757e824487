// key_averages() for ubfuse: recorded kernel events grouped by kernel name.
#pragma once

#include <vector>

#include "profiler/trace_event.h"
#include "ubfuse/profiler.h"

namespace ubfuse::prof {

// Rows for the kernel and host events, sorted by total time; % of bandwidth when bandwidth > 0.
ProfilerSummary summarize(const std::vector<TraceEvent>& events, double bandwidth_gb_per_s,
                          int steps);

// "12.345 ms", "45.2 us"; "201.3 MB", "512 B".
std::string format_us(double us);
std::string format_bytes(double bytes);

}  // namespace ubfuse::prof
