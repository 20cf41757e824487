// Profiler: records every kernel the runtime launches and writes a Chrome trace event file that
// chrome://tracing and Perfetto open, in the spirit of torch_npu.profiler:
//
//   ubfuse::Profiler prof({.trace_dir = "./log", .record_shapes = true, .name = "block"});
//   for (int i = 0; i < 10; i++) {
//     model.run(inputs);
//     prof.step();
//   }
//   prof.stop();                                   // writes ./log/block.trace.json
//   std::puts(prof.summary().table().c_str());     // like torch.profiler key_averages()
//
// Each kernel is one complete ("X") event on the thread that ran the model, carrying the source
// nodes inside it, shapes, dtypes, bytes moved, GB/s and % of the machine's measured memory
// bandwidth. Models compiled while recording add one "compile" event per pass; record_compile()
// adds those of a model compiled before. One Profiler records at a time; any number of threads may
// run models while it does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ubfuse/model.h"

namespace ubfuse {

struct ProfilerOptions {
  std::string trace_dir = "./log";  // <trace_dir>/<name>.trace.json; created when missing
  bool record_shapes = true;        // input/output shapes and dtypes in each event's args
  std::string name = "ubfuse";      // file stem and the process name shown in the viewer
  // The % of bandwidth column divides by the STREAM add bandwidth, measured once per machine and
  // cached (docs/profiling.md). Off: no measurement, the column reads 0.
  bool with_bandwidth = true;
  bool remeasure_bandwidth = false;  // ignore the cached value (also UBFUSE_REMEASURE_BANDWIDTH=1)
};

// One row of the summary: every call of one kernel name.
struct KernelSummaryRow {
  std::string name;              // "FusedAddLayerNormSilu", "Add"
  std::string cat;               // "kernel" or "host"
  std::vector<std::string> ops;  // op types inside
  int64_t calls = 0;
  double total_us = 0, mean_us = 0, min_us = 0, max_us = 0;
  double pct_of_time = 0;       // of all kernel time
  int64_t bytes = 0;            // read + written over all calls
  double gb_per_s = 0;          // bytes / total time
  double pct_of_bandwidth = 0;  // gb_per_s / measured bandwidth; 0 when unknown
};

struct ProfilerSummary {
  std::vector<KernelSummaryRow> rows;  // sorted by total time, longest first
  double bandwidth_gb_per_s = 0;       // the roofline the % column divides by; 0 when unknown
  int steps = 0;
  // A fixed-width table like torch.profiler's key_averages().table().
  std::string table() const;
};

class Profiler {
 public:
  // Starts recording. Throws Error when another Profiler is recording.
  explicit Profiler(ProfilerOptions options = {});
  // Stops and writes the trace if stop() was not called; errors go to stderr.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Ends the current step (torch's prof.step()); steps show as "ProfilerStep#N" on their own row.
  void step();
  // Adds compile events for a model compiled before recording started (one per pass), and lets
  // kernel events name the fusion boundaries around them. Models compiled while recording are
  // recorded automatically; recording one twice only updates its label.
  void record_compile(const CompiledModel& model, const std::string& label = "");
  // Stops recording and writes the trace. Idempotent; throws Error when the file cannot be written.
  void stop();

  bool recording() const;
  std::string trace_path() const;
  std::string trace_json() const;  // the trace as stop() writes it
  ProfilerSummary summary() const;
  double bandwidth_gb_per_s() const;  // 0 when not measured

  struct State;

 private:
  std::shared_ptr<State> s_;
};

// Which compute-bound loops stream their outputs past the caches on this CPU: the name of the
// store profile in effect ("zen5", "avx512", ...; UBFUSE_STORE_PROFILE overrides it).
std::string store_profile_name();

}  // namespace ubfuse
