// ubfuse::Profiler: registers a Recorder as the process's trace sink while it records, and writes
// the Chrome trace when it stops. The executor reads the sink once per run and may call it after
// the Profiler is gone, so the sink it sees is an immortal dispatcher that forwards to whichever
// Recorder is current, under a lock.
#include "ubfuse/profiler.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "profiler/chrome_trace.h"
#include "profiler/recorder.h"
#include "profiler/roofline.h"
#include "profiler/summary.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace fs = std::filesystem;

namespace {

std::mutex g_mu;
std::shared_ptr<prof::Recorder> g_current;  // under g_mu
std::string g_current_name;

std::shared_ptr<prof::Recorder> current() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_current;
}

class Dispatcher : public TraceSink {
 public:
  void on_kernel(const KernelEvent& e) override {
    if (auto r = current()) r->on_kernel(e);
  }
  void on_compile(const CompiledModel& m) override {
    if (auto r = current()) r->add_compile(m, "");
  }
};

TraceSink* dispatcher() {
  static Dispatcher* d = new Dispatcher;  // never destroyed: runs in flight may still call it
  return d;
}

}  // namespace

struct Profiler::State {
  ProfilerOptions options;
  std::shared_ptr<prof::Recorder> recorder;
  prof::Roofline roofline;
  bool stopped = false;
  std::mutex mu;  // stop() against itself
};

Profiler::Profiler(ProfilerOptions options) : s_(std::make_shared<State>()) {
  if (options.trace_dir.empty()) {
    throw Error("ProfilerOptions.trace_dir is empty; hint: e.g. \"./log\"");
  }
  if (options.name.empty() || options.name.find('/') != std::string::npos) {
    throw Error("ProfilerOptions.name '" + options.name +
                "' must be a non-empty file name without '/'; the trace is <trace_dir>/<name>"
                ".trace.json");
  }
  s_->options = std::move(options);
  // Measured (or read from the cache) before recording, so it never lands in the trace.
  if (s_->options.with_bandwidth)
    s_->roofline = prof::machine_roofline(s_->options.remeasure_bandwidth);
  s_->recorder = std::make_shared<prof::Recorder>(s_->options.record_shapes);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_current) {
    throw Error("a Profiler ('" + g_current_name + "') is already recording; hint: stop() it " +
                "before starting another");
  }
  g_current = s_->recorder;
  g_current_name = s_->options.name;
  set_active_trace_sink(dispatcher());
}

Profiler::~Profiler() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ubfuse profiler: %s\n", e.what());
  }
}

void Profiler::step() { s_->recorder->step(); }

void Profiler::record_compile(const CompiledModel& model, const std::string& label) {
  s_->recorder->add_compile(model, label);
}

bool Profiler::recording() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return !s_->stopped;
}

std::string Profiler::trace_path() const {
  return (fs::path(s_->options.trace_dir) / (s_->options.name + ".trace.json")).string();
}

double Profiler::bandwidth_gb_per_s() const { return s_->roofline.gb_per_s; }

std::string Profiler::trace_json() const {
  prof::TraceMeta meta;
  meta.process_name = "ubfuse: " + s_->options.name;
  meta.pid = int(::getpid());
  meta.bandwidth_gb_per_s = s_->roofline.gb_per_s;
  meta.bandwidth_source = s_->roofline.source;
  meta.machine = s_->roofline.machine;
  meta.steps = s_->recorder->steps();
  return prof::chrome_trace_json(s_->recorder->events(), s_->recorder->thread_names(), meta);
}

ProfilerSummary Profiler::summary() const {
  return prof::summarize(s_->recorder->events(), s_->roofline.gb_per_s, s_->recorder->steps());
}

void Profiler::stop() {
  std::lock_guard<std::mutex> lock(s_->mu);
  if (s_->stopped) return;
  s_->stopped = true;
  {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_current == s_->recorder) {
      g_current.reset();
      g_current_name.clear();
      set_active_trace_sink(nullptr);
    }
  }
  s_->recorder->stop();
  const std::string path = trace_path();
  std::error_code ec;
  fs::create_directories(s_->options.trace_dir, ec);
  if (ec) {
    throw Error("cannot create trace directory '" + s_->options.trace_dir + "': " + ec.message() +
                "; hint: choose a writable trace_dir");
  }
  std::ofstream f(path);
  f << trace_json();
  if (!f) {
    throw Error("cannot write trace file '" + path + "'; hint: choose a writable trace_dir");
  }
}

}  // namespace ubfuse
