// The runtime's events for the active trace sink (the profiler), if any: the executor reports
// each launched kernel, and compile() each model it builds. The sink lives above the runtime
// and registers itself here, so neither the runtime nor the compiler depends on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ubfuse/model.h"
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
  // A model compile() just built (its pass times and fusion decisions).
  virtual void on_compile(const CompiledModel& m) = 0;
};

// Process-wide; set by ubfuse::Profiler while it records. Thread-safe to read.
// note_compiled(m) forwards to the active sink's on_compile, if any.
TraceSink* active_trace_sink();
void set_active_trace_sink(TraceSink* s);
void note_compiled(const CompiledModel& m);

// While one lives, this thread's compiles and runs report to no sink (active_trace_sink() is null
// here): the cost model's calibration runs its small models inside a user's compile, which a
// recording profiler must not show as the user's.
class TraceMute {
 public:
  TraceMute();
  ~TraceMute();
  TraceMute(const TraceMute&) = delete;
  TraceMute& operator=(const TraceMute&) = delete;
};
int64_t now_ns();

}  // namespace ubfuse
