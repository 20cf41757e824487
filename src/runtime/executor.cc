#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/kv_cache.h"
#include "runtime/trace_hook.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {
std::atomic<TraceSink*> g_sink{nullptr};
thread_local int t_muted = 0;  // live TraceMutes on this thread
}  // namespace

TraceSink* active_trace_sink() {
  return t_muted > 0 ? nullptr : g_sink.load(std::memory_order_acquire);
}
TraceMute::TraceMute() { t_muted++; }
TraceMute::~TraceMute() { t_muted--; }
void set_active_trace_sink(TraceSink* s) { g_sink.store(s, std::memory_order_release); }
void note_compiled(const CompiledModel& m) {
  if (TraceSink* s = active_trace_sink()) s->on_compile(m);
}
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Executor::Executor(std::shared_ptr<const Executable> exe) : exe_(std::move(exe)) {
  spec_.graph = &exe_->graph;
  spec_.view_of = &exe_->view_of;
  spec_.memory_limit = exe_->run.memory_limit;
  for (auto& k : exe_->kernels) spec_.steps.push_back({k->inputs, k->outputs});
  for (auto& [n, k] : exe_->shape_kernels) spec_.shape_nodes.insert(n);
  for (const Node* n : exe_->graph.topo_order()) spec_.order.push_back(n);
  spec_.index = index_plan_spec(spec_);
  for (auto& k : exe_->kernels) spec_.step_pure.push_back(!k->info.host);
  spec_.run_step = [this](size_t k, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    auto ws = acquire_workspace();
    struct Release {
      const Executor* e;
      std::unique_ptr<Workspace>* ws;
      ~Release() { e->release_workspace(std::move(*ws)); }
    } release{this, &ws};
    ExecContext ctx = context(*ws);
    exe_->kernels[k]->run(in, out, ctx);
  };
  spec_.run_shape_node = [this](const Node& n, const std::vector<Tensor>& in,
                                std::vector<Tensor>& out) {
    const Kernel* k = nullptr;
    for (auto& [sn, sk] : exe_->shape_kernels) {
      if (sn == &n) k = sk.get();
    }
    UBF_CHECK(k != nullptr, n.describe() + " is a shape node without a kernel");
    ExecContext ctx;  // an eager node kernel: no UB, no block scratch
    ctx.pool = exe_->run.pool;
    k->run(in, out, ctx);
  };
}

SymbolBindings Executor::bind_inputs(const std::map<std::string, Tensor>& inputs) const {
  const Graph& graph = exe_->graph;
  SymbolBindings b;
  // Where each symbol was bound, for errors; the text is made only when one is thrown (this runs
  // on every call).
  auto where = [](const Value* in, int d) {
    return "input '" + in->name + "' dim " + std::to_string(d);
  };
  std::map<std::string, std::pair<const Value*, int>> bound_at;
  auto bound_by = [&](const std::string& sym) {
    auto it = bound_at.find(sym);
    return it == bound_at.end() ? std::string("?") : where(it->second.first, it->second.second);
  };
  size_t found = 0;  // every name given is a graph input when all of them are found
  for (auto* in : graph.inputs()) found += inputs.count(in->name);
  for (auto it = inputs.begin(); found != inputs.size() && it != inputs.end(); ++it) {
    bool known = false;
    for (auto* in : graph.inputs()) known |= in->name == it->first;
    if (!known) {
      std::string names;
      for (auto* in : graph.inputs()) names += (names.empty() ? "" : ", ") + in->name;
      throw Error("unknown input '" + it->first + "'; the model's inputs are: " + names);
    }
  }
  struct Compound {
    const Dim* dim;
    int64_t got;
    const Value* in;
    int d;
  };
  std::vector<Compound> compound;  // dims like "past+1" or "batch*seq"
  for (auto* in : graph.inputs()) {
    auto it = inputs.find(in->name);
    if (it == inputs.end() || !it->second.defined()) {
      throw Error("missing input '" + in->name + "' (" + std::string(dtype_name(in->dtype)) +
                  shape_str(in->shape) + ")");
    }
    const Tensor& t = it->second;
    if (t.dtype() != in->dtype) {
      throw Error("input '" + in->name + "' has dtype " + std::string(dtype_name(t.dtype())) +
                  " but the model expects " + std::string(dtype_name(in->dtype)));
    }
    if (t.rank() != int(in->shape.size())) {
      throw Error("input '" + in->name + "' has shape " + sizes_str(t.sizes()) +
                  " but the model expects rank " + std::to_string(in->shape.size()) + " " +
                  shape_str(in->shape));
    }
    for (int d = 0; d < t.rank(); d++) {
      const Dim& want = in->shape[size_t(d)];
      int64_t got = t.sizes()[size_t(d)];
      if (want.is_static()) {
        if (want.value() != got) {
          throw Error(where(in, d) + " is " + std::to_string(got) + " but the model expects " +
                      std::to_string(want.value()) + " (shape " + shape_str(in->shape) + ")");
        }
        continue;
      }
      if (!want.is_symbol()) {
        compound.push_back({&want, got, in, d});
        continue;
      }
      const std::string& sym = want.symbol();
      auto [bit, fresh] = b.emplace(sym, got);
      if (!fresh && bit->second != got) {
        throw Error("symbol '" + sym + "' is " + std::to_string(bit->second) + " in " +
                    bound_by(sym) + " but " + std::to_string(got) + " in " + where(in, d) +
                    "; inputs that share a symbol must agree");
      }
      if (fresh) bound_at[sym] = {in, d};
    }
  }
  // Once the lone symbols are bound, a dim with one unknown left ("past+1") binds it; the others
  // must agree with what the inputs bound. Dims still unbound are the plan's to report.
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& c : compound) {
      if (auto sol = solve_dim(*c.dim, c.got, b)) {
        b[sol->symbol] = sol->value;
        bound_at[sol->symbol] = {c.in, c.d};
        progress = true;
      }
    }
  }
  for (auto& c : compound) {
    auto v = eval_dim(*c.dim, b);
    auto syms = c.dim->symbols();
    if (!v && std::count_if(syms.begin(), syms.end(), [&](auto& s) { return !b.count(s); }) == 1) {
      std::string why;  // one unknown left, yet the loop above could not solve it
      solve_dim(*c.dim, c.got, b, &why);
      throw Error(where(c.in, c.d) + " is " + std::to_string(c.got) + " but the model declares '" +
                  c.dim->symbol() + "': " + why);
    }
    if (v && *v != c.got) {
      std::string vals;
      for (auto& s : syms) {
        vals += (vals.empty() ? "" : ", ") + s + "=" + std::to_string(b.at(s)) + " (from " +
                bound_by(s) + ")";
      }
      throw Error(where(c.in, c.d) + " is " + std::to_string(c.got) + " but the model expects '" +
                  c.dim->symbol() + "' = " + std::to_string(*v) + " with " + vals +
                  "; inputs that share a symbol must agree");
    }
  }
  const auto& gears = exe_->gears;
  if (exe_->run.dynamic_dims_strict && !gears.empty()) {
    bool ok = false;
    for (auto& gear : gears) ok |= gear == b;
    if (!ok) {
      std::string have, list;
      for (auto& [k, v] : b) have += (have.empty() ? "" : ", ") + k + "=" + std::to_string(v);
      for (auto& gear : gears) {
        std::string one;
        for (auto& [k, v] : gear) one += (one.empty() ? "" : ",") + k + "=" + std::to_string(v);
        list += (list.empty() ? "" : "; ") + one;
      }
      throw Error("shape " + have + " is not one of the gears (" + list +
                  ") and ge.dynamic_dims_strict=1; hint: add it to ge.dynamic_dims or drop strict");
    }
  }
  return b;
}

std::unique_ptr<Workspace> Executor::acquire_workspace() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_workspaces_.empty()) {
      auto ws = std::move(free_workspaces_.back());
      free_workspaces_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  int64_t ub = exe_->run.ub_bytes;
  for (int i = 0; i < exe_->run.pool->size(); i++)
    ws->ubs.push_back(Tensor::zeros(DType::f32, {ub / 4}));
  return ws;
}

ExecContext Executor::context(Workspace& ws) const {
  ExecContext ctx;
  ctx.pool = exe_->run.pool;
  ctx.ub_bytes = exe_->run.ub_bytes;
  ctx.block_scratch = &ws.block_scratch;
  ctx.matmul_block_bytes = exe_->run.matmul_block_bytes;
  for (auto& u : ws.ubs) ctx.ub.push_back(u.data_as<float>());
  return ctx;
}

void Executor::release_workspace(std::unique_ptr<Workspace> ws) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_workspaces_.push_back(std::move(ws));
}

Executor::PlanKey Executor::key_of(const SymbolBindings& b,
                                   const std::map<std::string, Tensor>& inputs) const {
  PlanKey key;
  key.symbols = b;
  for (const Value* v : exe_->value_inputs) {
    auto it = inputs.find(v->name);
    if (it == inputs.end() || !it->second.defined()) {
      throw Error("input '" + v->name + "' sets a shape, so planning needs its contents; " +
                  "hint: pass it to run()");
    }
    const Tensor& t = it->second;  // bound already: its sizes are part of the symbols
    key.values.emplace_back(static_cast<const char*>(t.data()), t.nbytes());
  }
  return key;
}

std::shared_ptr<const Plan> Executor::build_plan(
    const SymbolBindings& b, const std::map<std::string, Tensor>& inputs) const {
  std::map<const Value*, Tensor> values;
  for (const Value* v : exe_->value_inputs) {
    auto it = inputs.find(v->name);
    if (it == inputs.end() || !it->second.defined()) {
      throw Error("input '" + v->name + "' sets a shape, so planning needs its contents; " +
                  "hint: pass it to run()");
    }
    values[v] = it->second;
  }
  return ubfuse::build_plan(spec_, b, values, &memo_);
}

std::shared_ptr<const Plan> Executor::plan_for(const SymbolBindings& b,
                                               const std::map<std::string, Tensor>& inputs,
                                               bool* built) const {
  if (built) *built = false;
  PlanKey key = key_of(b, inputs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      plan_hits_++;
      it->second.last_used = ++use_clock_;
      return it->second.plan;
    }
  }
  auto p = build_plan(b, inputs);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = plans_.emplace(std::move(key), Cached{p, ++use_clock_});
  if (inserted) plan_builds_++;
  if (built) *built = inserted;
  std::shared_ptr<const Plan> out = it->second.plan;
  if (plans_.size() > kMaxPlans) {
    auto oldest = plans_.begin();
    for (auto i = plans_.begin(); i != plans_.end(); ++i) {
      if (i->second.last_used < oldest->second.last_used) oldest = i;
    }
    plans_.erase(oldest);  // runs holding it keep it alive through their shared_ptr
  }
  return out;
}

void Executor::run(const std::map<std::string, Tensor>& inputs,
                   std::map<std::string, Tensor>& outputs, bool allocate_outputs, RunStats* stats,
                   KvCache* kv) const {
  const Graph& graph = exe_->graph;
  const auto& gouts = graph.outputs();
  const int64_t t_call = now_ns();
  RunStats local;
  // With a KV cache: its pairs by graph output and by kernel, and its rows so far as the pasts.
  std::vector<int> pair_of_output, pair_of_kernel;
  std::map<std::string, Tensor> with_past;
  const std::map<std::string, Tensor>& ins = kv ? with_past : inputs;
  if (kv) {
    if (kv->owner_.get() != this) {
      throw Error("run_with_cache: the KV cache was made by another model's make_kv_cache");
    }
    with_past = inputs;
    pair_of_output.assign(gouts.size(), -1);
    pair_of_kernel.assign(exe_->kernels.size(), -1);
    for (size_t j = 0; j < kv->pairs_.size(); j++) {
      const KvCache::Pair& p = kv->pairs_[j];
      if (inputs.count(p.past)) {
        throw Error("input '" + p.past + "' comes from the KV cache; hint: leave it out of " +
                    "run_with_cache's inputs (reset() the cache to start a new sequence)");
      }
      if (auto o = outputs.find(p.present); o != outputs.end() && o->second.defined()) {
        throw Error("output '" + p.present + "' goes into the KV cache, not into a buffer of " +
                    "the caller; hint: leave it out of the outputs and read KvCache::rows");
      }
      Sizes s = p.buffer.sizes();
      s[size_t(p.axis)] = kv->length_;
      with_past[p.past] = Tensor::view(p.buffer.dtype(), s, p.buffer.data());
      pair_of_output[size_t(kv->slots_[j].output)] = int(j);
      pair_of_kernel[kv->slots_[j].kernel] = int(j);
    }
  }
  SymbolBindings b;
  try {
    b = bind_inputs(ins);
  } catch (const Error& e) {
    if (!kv) throw;
    throw Error(std::string(e.what()) + " (the past inputs come from the KV cache, sized by " +
                "make_kv_cache's dims)");
  }
  auto plan = plan_for(b, ins, &local.plan_built);
  const int64_t t_planned = now_ns();
  int64_t kv_rows = 0;  // rows this call adds to the cache
  if (kv) {
    for (size_t j = 0; j < kv->pairs_.size(); j++) {
      const KvCache::Pair& p = kv->pairs_[j];
      const Sizes& want = plan->output_sizes[size_t(kv->slots_[j].output)];
      const int64_t rows = want[size_t(p.axis)];
      Sizes fits = p.buffer.sizes();
      fits[size_t(p.axis)] = rows;
      if (want != fits) {
        throw Error("present '" + p.present + "' is " + sizes_str(want) +
                    " but the KV cache holds " + sizes_str(p.buffer.sizes()) + " along axis " +
                    std::to_string(p.axis) + "; hint: make_kv_cache with these dims");
      }
      if (rows > kv->max_length_) {
        throw Error("the KV cache is full: present '" + p.present + "' needs " +
                    std::to_string(rows) + " rows but max_length is " +
                    std::to_string(kv->max_length_) +
                    "; hint: make_kv_cache with a larger max_length, or reset() it");
      }
      if (j > 0 && rows - kv->length_ != kv_rows) {
        throw Error("present '" + p.present + "' adds " + std::to_string(rows - kv->length_) +
                    " rows but '" + kv->pairs_[0].present + "' adds " + std::to_string(kv_rows) +
                    "; a KV cache's pairs grow together");
      }
      kv_rows = rows - kv->length_;
    }
  }
  // The caller's tensors by graph input and output index, as the plan's buffers name them.
  std::vector<const Tensor*> in_t, out_t;
  for (auto* in : graph.inputs()) in_t.push_back(&ins.at(in->name));
  for (size_t i = 0; i < gouts.size(); i++) {
    const std::string& name = gouts[i].first;
    const Value* v = gouts[i].second;
    const Sizes& want = plan->output_sizes[i];
    if (kv && pair_of_output[i] >= 0) continue;  // in the cache
    auto it = outputs.find(name);
    if (allocate_outputs || it == outputs.end() || !it->second.defined()) {
      outputs[name] = Tensor(v->dtype, want);
    } else if (it->second.sizes() != want || it->second.dtype() != v->dtype) {
      throw Error("output buffer '" + name + "' is " + std::string(dtype_name(it->second.dtype())) +
                  sizes_str(it->second.sizes()) + " but this call produces " +
                  std::string(dtype_name(v->dtype)) + sizes_str(want));
    }
  }
  for (size_t i = 0; i < gouts.size(); i++) {
    const bool cached = kv && pair_of_output[i] >= 0;
    out_t.push_back(cached ? &kv->pairs_[size_t(pair_of_output[i])].buffer
                           : &outputs.at(gouts[i].first));
  }
  auto ws = acquire_workspace();
  struct Release {
    const Executor* e;
    std::unique_ptr<Workspace>* ws;
    ~Release() { e->release_workspace(std::move(*ws)); }
  } release{this, &ws};
  if (ws->arena.nbytes() < size_t(plan->arena_bytes)) {
    // Grown by half again at least, so that a decode loop whose plans need a little more each
    // step reallocates now and then, not every step (never past the memory limit for it).
    int64_t grow = std::max(plan->arena_bytes, int64_t(ws->arena.nbytes() * 3 / 2));
    if (exe_->run.memory_limit > 0) {
      grow = std::max(plan->arena_bytes, std::min(grow, exe_->run.memory_limit));
    }
    ws->arena = Tensor(DType::boolean, {grow});
    std::memset(ws->arena.data(), 0, ws->arena.nbytes());  // fault pages in now, not mid-kernel
  }
  char* arena = static_cast<char*>(ws->arena.data());
  // Binds t to operand r (a view, or the constant itself when its sizes are the operand's).
  auto bind = [&](const BufferRef& r, Tensor& t) {
    void* base = nullptr;
    switch (r.kind) {
      case BufferRef::Kind::Input:
        base = in_t[size_t(r.index)]->data();
        break;
      case BufferRef::Kind::Output:
        base = out_t[size_t(r.index)]->data();
        break;
      case BufferRef::Kind::Constant:
        if (r.constant->sizes() == *r.sizes) {
          t = *r.constant;
          return;
        }
        base = r.constant->data();
        break;
      case BufferRef::Kind::Arena:
        base = arena + r.offset;
        break;
    }
    t.assign_view(r.dtype, *r.sizes, base);
  };

  // A cache pair's rows as one dense tensor, gathered once per call for the kernels (and output
  // copies) that cannot read the buffer in place.
  std::vector<char> kv_gathered(kv ? kv->pairs_.size() : 0, 0);
  auto kv_dense = [&](size_t j) -> const Tensor& {
    const KvCache::Pair& p = kv->pairs_[j];
    if (ws->kv_dense.size() <= j) ws->kv_dense.resize(j + 1);
    Tensor& d = ws->kv_dense[j];
    if (!kv_gathered[j]) {
      Sizes s = p.buffer.sizes();
      s[size_t(p.axis)] = kv->length_ + kv_rows;
      if (!d.defined() || d.sizes() != s || d.dtype() != p.buffer.dtype()) {
        d = Tensor(p.buffer.dtype(), s);
      }
      copy_rows(p.buffer, p.axis, kv->length_ + kv_rows, d, exe_->run.pool);
      kv_gathered[j] = 1;
      local.kv_dense_copies++;
    }
    return d;
  };
  ExecContext ctx = context(*ws);
  TraceSink* sink = active_trace_sink();
  // Kept by the workspace, so that rebinding them reuses their sizes' storage (what they view
  // after the call is never read: every kernel's operands are rebound before it runs).
  std::vector<Tensor>& in = ws->in;
  std::vector<Tensor>& out = ws->out;
  for (size_t k = 0; k < exe_->kernels.size(); k++) {
    const Kernel& kern = *exe_->kernels[k];
    const Plan::Operands& ops = plan->steps[k];
    if (ops.precomputed) {
      local.kernels_precomputed++;
      continue;
    }
    in.resize(ops.inputs.size());
    out.resize(ops.outputs.size());
    for (size_t i = 0; i < in.size(); i++) bind(ops.inputs[i], in[i]);
    for (size_t i = 0; i < out.size(); i++) bind(ops.outputs[i], out[i]);
    const int pair = kv ? pair_of_kernel[k] : -1;  // the Concat that makes a cached present
    ctx.in_storage = nullptr;
    if (kv && pair < 0) {
      // Operands that read a cached present: in place when the kernel can, else a dense copy.
      ws->in_storage.resize(in.size());
      for (auto& st : ws->in_storage) st.clear();
      for (size_t i = 0; i < in.size(); i++) {
        const BufferRef& r = ops.inputs[i];
        const int j = r.kind == BufferRef::Kind::Output ? pair_of_output[size_t(r.index)] : -1;
        if (j < 0) continue;
        const KvCache::Pair& p = kv->pairs_[size_t(j)];
        const int64_t rows = kv->length_ + kv_rows;
        auto pv = pitched_view(p.buffer.sizes(), p.axis, rows, *r.sizes);
        if (pv && kern.reads_pitched(i, pv->axis, int(r.sizes->size()))) {
          ws->in_storage[i] = pv->storage;
          ctx.in_storage = &ws->in_storage;
        } else {
          in[i].assign_view(r.dtype, *r.sizes, kv_dense(size_t(j)).data());
        }
      }
    }
    ctx.extra_bytes_read = 0;
    ctx.variant_used.clear();
    const int64_t t0 = now_ns();
    if (pair >= 0) {  // write only the new rows, after the rows so far
      const KvCache::Pair& p = kv->pairs_[size_t(pair)];
      append_rows(p.buffer, p.axis, kv->length_, in[1], exe_->run.pool);
      local.kv_rows_appended += kv_rows;
      ctx.variant_used = "kv cache in place";
      in[0] = in[1];  // what it read and wrote: the new rows only
      in.resize(1);
      out[0].assign_view(in[0].dtype(), in[0].sizes(), out[0].data());
    } else {
      kern.run(in, out, ctx);
    }
    const int64_t t1 = now_ns();
    local.kernels_us += double(t1 - t0) * 1e-3;
    int64_t br = ctx.extra_bytes_read, bw = 0;
    for (auto& t : in) br += int64_t(t.nbytes());
    for (auto& t : out) bw += int64_t(t.nbytes());
    local.bytes_read += br;
    local.bytes_written += bw;
    local.kernels_launched++;
    if (sink) {
      KernelEvent e;
      e.info = &kern.info;
      e.t0_ns = t0;
      e.t1_ns = t1;
      e.bytes_read = br;
      e.bytes_written = bw;
      for (auto& t : in) {
        e.in_sizes.push_back(t.sizes());
        e.in_dtypes.push_back(t.dtype());
      }
      for (auto& t : out) {
        e.out_sizes.push_back(t.sizes());
        e.out_dtypes.push_back(t.dtype());
      }
      e.variant = ctx.variant_used;
      sink->on_kernel(e);
    }
  }
  for (auto& c : plan->output_copies) {
    Tensor src;
    bind(c.from, src);
    if (kv && c.from.kind == BufferRef::Kind::Output && pair_of_output[size_t(c.from.index)] >= 0) {
      src.assign_view(c.from.dtype, *c.from.sizes,
                      kv_dense(size_t(pair_of_output[size_t(c.from.index)])).data());
    }
    const Tensor& dst = *out_t[size_t(c.output)];
    if (src.data() != dst.data()) std::memcpy(dst.data(), src.data(), dst.nbytes());
  }
  if (kv) kv->length_ += kv_rows;
  local.plan_us = double(t_planned - t_call) * 1e-3;
  local.total_us = double(now_ns() - t_call) * 1e-3;
  if (stats) *stats = local;
}

CompileStats Executor::stats() const {
  CompileStats s = exe_->compile_stats;
  s.plan_builds = plan_builds_.load();
  s.plan_cache_hits = plan_hits_.load();
  std::lock_guard<std::mutex> lock(memo_.mu);
  s.plan_nodes_reused = memo_.reused;
  s.plan_nodes_inferred = memo_.inferred;
  return s;
}

// ---- public CompiledModel ----

std::map<std::string, Tensor> CompiledModel::run(const std::map<std::string, Tensor>& inputs,
                                                 RunStats* stats) const {
  if (!executor_) throw Error("run() on an empty CompiledModel; hint: call ubfuse::compile first");
  std::map<std::string, Tensor> out;
  executor_->run(inputs, out, true, stats);
  return out;
}

void CompiledModel::run_into(const std::map<std::string, Tensor>& inputs,
                             std::map<std::string, Tensor>& outputs, RunStats* stats) const {
  if (!executor_)
    throw Error("run_into() on an empty CompiledModel; hint: call ubfuse::compile first");
  executor_->run(inputs, outputs, false, stats);
}

const Executor& CompiledModel::executor() const {
  UBF_CHECK(executor_ != nullptr, "CompiledModel::executor() on an empty model");
  return *executor_;
}
const std::vector<KernelInfo>& CompiledModel::kernels() const {
  return executor().executable().kernel_infos;
}
const std::vector<FusionDecision>& CompiledModel::decisions() const {
  return executor().executable().decisions;
}
CompileStats CompiledModel::stats() const { return executor().stats(); }
const Graph& CompiledModel::graph() const { return executor().executable().graph; }
bool CompiledModel::fusion_enabled() const { return executor().executable().fusion; }
int CompiledModel::num_threads() const { return executor().executable().run.pool->size(); }
int64_t CompiledModel::ub_bytes() const { return executor().executable().run.ub_bytes; }
std::vector<std::string> CompiledModel::output_names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : graph().outputs()) out.push_back(n);
  return out;
}
std::vector<std::string> CompiledModel::input_names() const {
  std::vector<std::string> out;
  for (auto* v : graph().inputs()) out.push_back(v->name);
  return out;
}

}  // namespace ubfuse
