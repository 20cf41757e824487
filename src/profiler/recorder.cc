#include "profiler/recorder.h"

#include <algorithm>

#include "runtime/executor.h"

namespace ubfuse::prof {

namespace {

// "HostSync: layer_norm -> print: the Host node 'print' forces a sync ..."
std::string describe(const FusionDecision& d) {
  std::string s(fusion_reason_name(d.reason));
  if (!d.producer.empty() || !d.consumer.empty()) s += ": " + d.producer + " -> " + d.consumer;
  if (!d.message.empty()) s += ": " + d.message;
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return !x.empty() && std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

Recorder::Recorder(bool record_shapes)
    : record_shapes_(record_shapes), start_ns_(now_ns()), step_start_ns_(start_ns_) {}

int Recorder::tid_of_caller() {
  auto [it, fresh] = tids_.emplace(std::this_thread::get_id(), 0);
  if (fresh) it->second = kFirstThreadTid + int(tids_.size()) - 1;
  return it->second;
}

void Recorder::on_kernel(const KernelEvent& e) {
  TraceEvent t;
  t.name = e.info ? e.info->name : "kernel";
  t.cat = e.info && e.info->host ? "host" : "kernel";
  t.t0_ns = e.t0_ns;
  t.t1_ns = std::max(e.t1_ns, e.t0_ns);
  KernelFields& k = t.kernel;
  if (e.info) {
    k.nodes = e.info->node_names;
    k.ops = e.info->op_types;
    k.input_values = e.info->input_values;
    k.output_values = e.info->output_values;
    k.variant = e.info->variant;
  }
  if (!e.variant.empty()) k.variant = e.variant;  // what ran beats what was planned
  k.bytes_read = e.bytes_read;
  k.bytes_written = e.bytes_written;
  if (record_shapes_) {
    k.in_sizes = e.in_sizes;
    k.out_sizes = e.out_sizes;
    k.in_dtypes = e.in_dtypes;
    k.out_dtypes = e.out_dtypes;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  t.tid = tid_of_caller();
  k.step = step_;
  auto ref = kernel_ref_.find(e.info);
  if (ref != kernel_ref_.end()) {
    k.model = int(ref->second.model);
    k.boundaries = refs_[ref->second.model].boundaries[ref->second.kernel];
  }
  events_.push_back(std::move(t));
}

std::string Recorder::default_label(const CompiledModel& m) const {
  return "model " + std::to_string(refs_.size() + 1) +
         (m.fusion_enabled() ? " (graph)" : " (eager)");
}

void Recorder::add_compile(const CompiledModel& m, const std::string& label) {
  const Executor& ex = m.executor();
  const Executable& exe = ex.executable();
  CompileStats stats = m.stats();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  auto known = model_index_.find(&ex);
  if (known != model_index_.end()) {
    if (!label.empty()) refs_[known->second].label = label;
    return;
  }
  const size_t idx = refs_.size();
  ModelRef ref;
  ref.label = label.empty() ? default_label(m) : label;
  std::vector<std::string> not_fused;
  for (auto& d : exe.decisions) {
    if (d.reason != FusionReason::Fused) not_fused.push_back(describe(d));
  }
  for (size_t k = 0; k < exe.kernels.size(); k++) {
    const KernelInfo& info = exe.kernels[k]->info;
    kernel_ref_[&info] = {idx, k};
    std::vector<std::string> b;
    for (auto& d : exe.decisions) {
      if (d.reason == FusionReason::Fused) continue;
      if (contains(info.node_names, d.producer) || contains(info.node_names, d.consumer)) {
        b.push_back(describe(d));
      }
    }
    ref.boundaries.push_back(std::move(b));
  }
  refs_.push_back(std::move(ref));
  model_index_[&ex] = idx;
  models_.push_back(m);

  // One event per pass, on the first compile row that is free for the whole compile.
  if (stats.start_ns == 0 || stats.pass_ms.empty()) return;
  std::vector<int64_t> t0(stats.pass_ms.size()), t1(stats.pass_ms.size());
  double cursor_ms = 0;
  for (size_t i = 0; i < stats.pass_ms.size(); i++) {
    double start_ms = i < stats.pass_start_ms.size() ? stats.pass_start_ms[i] : cursor_ms;
    start_ms = std::max(start_ms, cursor_ms);  // passes never overlap, whatever the rounding
    t0[i] = stats.start_ns + int64_t(start_ms * 1e6);
    t1[i] = t0[i] + int64_t(stats.pass_ms[i].second * 1e6);
    cursor_ms = double(t1[i] - stats.start_ns) / 1e6;
  }
  size_t row = 0;
  while (row < compile_row_end_.size() && compile_row_end_[row] > t0.front()) row++;
  if (row == compile_row_end_.size()) compile_row_end_.push_back(0);
  compile_row_end_[row] = t1.back();
  for (size_t i = 0; i < stats.pass_ms.size(); i++) {
    TraceEvent e;
    e.name = stats.pass_ms[i].first;
    e.cat = "compile";
    e.tid = kFirstCompileTid + int(row);
    e.t0_ns = t0[i];
    e.t1_ns = t1[i];
    e.compile.model = int(idx);
    e.compile.fusion = m.fusion_enabled();
    if (i + 1 == stats.pass_ms.size()) e.compile.decisions = not_fused;  // the lowering pass
    events_.push_back(std::move(e));
  }
}

int Recorder::step() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return step_;
  TraceEvent e;
  e.name = "ProfilerStep#" + std::to_string(step_);
  e.cat = "step";
  e.tid = kStepTid;
  e.t0_ns = step_start_ns_;
  e.t1_ns = std::max(now_ns(), step_start_ns_);
  e.kernel.step = step_;
  step_start_ns_ = e.t1_ns;
  events_.push_back(std::move(e));
  return ++step_;
}

void Recorder::stop() {
  std::vector<CompiledModel> release;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    kernel_ref_.clear();
    release.swap(models_);
  }
}

int Recorder::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

std::vector<TraceEvent> Recorder::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TraceEvent> out = events_;
  for (auto& e : out) {
    if (e.kernel.model >= 0) e.kernel.model_label = refs_[size_t(e.kernel.model)].label;
    if (e.compile.model >= 0) e.compile.model_label = refs_[size_t(e.compile.model)].label;
  }
  return out;
}

std::map<int, std::string> Recorder::thread_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, std::string> names;
  names[kStepTid] = "steps";
  for (size_t r = 0; r < compile_row_end_.size(); r++) {
    names[kFirstCompileTid + int(r)] = r == 0 ? "compile" : "compile " + std::to_string(r + 1);
  }
  for (auto& [_, tid] : tids_) {
    names[tid] = "thread " + std::to_string(tid - kFirstThreadTid + 1);
  }
  return names;
}

}  // namespace ubfuse::prof
