// The recording half of the Profiler: a TraceSink that copies each kernel event, gives every
// calling thread its own trace row, places compile passes on rows where they do not overlap, and
// remembers recorded models so kernel events can name the fusion boundaries around them.
#pragma once

#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profiler/trace_event.h"
#include "runtime/trace_hook.h"

namespace ubfuse::prof {

class Recorder : public TraceSink {
 public:
  explicit Recorder(bool record_shapes);

  void on_kernel(const KernelEvent& e) override;
  void on_compile(const CompiledModel& m) override { add_compile(m, ""); }
  // Compile events of a model, once per model; a second call only relabels it.
  void add_compile(const CompiledModel& m, const std::string& label);
  // Ends the current step at now; returns the number of completed steps.
  int step();
  void stop();  // later events are dropped; recorded models are released

  // Snapshot of everything recorded so far, with thread names by tid.
  std::vector<TraceEvent> events() const;
  std::map<int, std::string> thread_names() const;
  int64_t start_ns() const { return start_ns_; }
  int steps() const;

 private:
  int tid_of_caller();  // under mu_
  std::string default_label(const CompiledModel& m) const;

  struct ModelRef {
    std::string label;
    std::vector<std::vector<std::string>> boundaries;  // per kernel
  };
  struct KernelRef {
    size_t model = 0, kernel = 0;
  };

  const bool record_shapes_;
  const int64_t start_ns_;
  mutable std::mutex mu_;
  bool stopped_ = false;
  int step_ = 0;
  int64_t step_start_ns_ = 0;
  std::vector<TraceEvent> events_;
  std::unordered_map<std::thread::id, int> tids_;
  std::vector<int64_t> compile_row_end_;  // per compile row, end of its last pass
  std::vector<CompiledModel> models_;     // kept alive so KernelInfo pointers stay valid
  std::unordered_map<const Executor*, size_t> model_index_;
  std::unordered_map<const KernelInfo*, KernelRef> kernel_ref_;
  std::vector<ModelRef> refs_;
};

}  // namespace ubfuse::prof
