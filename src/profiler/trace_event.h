// What the profiler records: one TraceEvent per kernel launch, pass or step, kept as plain data
// (copied out of the executor's KernelEvent) so models may die before the trace is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ubfuse/dtype.h"
#include "ubfuse/shape.h"

namespace ubfuse::prof {

// Rows ("threads") of the trace. Real threads get kFirstThreadTid, +1, ...; pseudo rows sort
// above them.
inline constexpr int kStepTid = 1;
inline constexpr int kFirstCompileTid = 100;
inline constexpr int kFirstThreadTid = 1000;

struct KernelFields {
  std::vector<std::string> nodes, ops;  // source nodes inside, and their op types
  std::vector<std::string> input_values, output_values;
  std::vector<Sizes> in_sizes, out_sizes;  // empty unless record_shapes
  std::vector<DType> in_dtypes, out_dtypes;
  int64_t bytes_read = 0, bytes_written = 0;
  std::string variant;
  int model = -1;                       // recorded model (index), -1 unknown
  std::string model_label;              // filled by Recorder::events()
  std::vector<std::string> boundaries;  // fusion decisions that touch this kernel
  int step = 0;
};

struct CompileFields {
  int model = -1;
  std::string model_label;  // filled by Recorder::events()
  bool fusion = false;
  std::vector<std::string> decisions;  // non-fused decisions, on the lowering pass only
};

struct TraceEvent {
  std::string name;
  std::string cat;  // kernel | host | compile | step
  int tid = 0;
  int64_t t0_ns = 0, t1_ns = 0;  // steady clock
  KernelFields kernel;           // cat kernel/host
  CompileFields compile;         // cat compile
};

}  // namespace ubfuse::prof
