// The executor reports each launched kernel to the active trace sink (the profiler), if any.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ubfuse/compile.h"
#include "ubfuse/shape.h"

namespace ubfuse {

struct KernelEvent {
  const KernelInfo* info = nullptr;
  int64_t t0_ns = 0, t1_ns = 0;  // steady clock
  int64_t bytes_read = 0, bytes_written = 0;
  std::vector<Sizes> in_sizes, out_sizes;
  std::vector<DType> in_dtypes, out_dtypes;
  std::string variant;  // the variant the kernel ran ("", "two-pass", ...)
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_kernel(const KernelEvent& e) = 0;
};

// Process-wide; set by ubfuse::Profiler while it records. Thread-safe to read.
TraceSink* active_trace_sink();
void set_active_trace_sink(TraceSink* s);
int64_t now_ns();

}  // namespace ubfuse
