// Running a CompiledModel: bind symbols from the inputs, fetch (or build) the plan for that
// binding, take a workspace (arena + per-thread UBs) from the pool, launch the kernels in order.
#include <atomic>
#include <chrono>
#include <cstring>

#include "runtime/compiled_model_impl.h"
#include "runtime/trace_hook.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {
std::atomic<TraceSink*> g_sink{nullptr};
}

TraceSink* active_trace_sink() { return g_sink.load(std::memory_order_acquire); }
void set_active_trace_sink(TraceSink* s) { g_sink.store(s, std::memory_order_release); }
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

SymbolBindings CompiledModelImpl::bind_inputs(const std::map<std::string, Tensor>& inputs) const {
  SymbolBindings b;
  std::map<std::string, std::string> bound_by;  // symbol -> "input 'x' dim 0"
  for (auto& [name, _] : inputs) {
    bool known = false;
    for (auto* in : graph.inputs()) known |= in->name == name;
    if (!known) {
      std::string names;
      for (auto* in : graph.inputs()) names += (names.empty() ? "" : ", ") + in->name;
      throw Error("unknown input '" + name + "'; the model's inputs are: " + names);
    }
  }
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
      std::string here = "input '" + in->name + "' dim " + std::to_string(d);
      if (want.is_static()) {
        if (want.value() != got) {
          throw Error(here + " is " + std::to_string(got) + " but the model expects " +
                      std::to_string(want.value()) + " (shape " + shape_str(in->shape) + ")");
        }
        continue;
      }
      const std::string& sym = want.symbol();
      if (sym.find('*') != std::string::npos) continue;  // products are checked by the plan
      auto [bit, fresh] = b.emplace(sym, got);
      if (!fresh && bit->second != got) {
        throw Error("symbol '" + sym + "' is " + std::to_string(bit->second) + " in " +
                    bound_by[sym] + " but " + std::to_string(got) + " in " + here +
                    "; inputs that share a symbol must agree");
      }
      if (fresh) bound_by[sym] = here;
    }
  }
  if (config.dynamic_dims_strict && !gears.empty()) {
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

std::unique_ptr<Workspace> CompiledModelImpl::acquire_workspace() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_workspaces_.empty()) {
      auto ws = std::move(free_workspaces_.back());
      free_workspaces_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  int64_t ub = config.ub_bytes;
  for (int i = 0; i < pool->size(); i++) ws->ubs.push_back(Tensor::zeros(DType::f32, {ub / 4}));
  return ws;
}

void CompiledModelImpl::release_workspace(std::unique_ptr<Workspace> ws) const {
  std::lock_guard<std::mutex> lock(mu_);
  free_workspaces_.push_back(std::move(ws));
}

void CompiledModelImpl::run(const std::map<std::string, Tensor>& inputs,
                            std::map<std::string, Tensor>& outputs, bool allocate_outputs,
                            RunStats* stats) const {
  SymbolBindings b = bind_inputs(inputs);
  auto plan = plan_for(b);
  // Output tensors: allocated here or checked against the plan.
  for (auto& [name, v] : graph.outputs()) {
    const Sizes& want = plan->sizes.at(v);
    auto it = outputs.find(name);
    if (allocate_outputs || it == outputs.end() || !it->second.defined()) {
      outputs[name] = Tensor(v->dtype, want);
    } else if (it->second.sizes() != want || it->second.dtype() != v->dtype) {
      throw Error("output buffer '" + name + "' is " + std::string(dtype_name(it->second.dtype())) +
                  sizes_str(it->second.sizes()) + " but this call produces " +
                  std::string(dtype_name(v->dtype)) + sizes_str(want));
    }
  }
  auto ws = acquire_workspace();
  struct Release {
    const CompiledModelImpl* m;
    std::unique_ptr<Workspace>* ws;
    ~Release() { m->release_workspace(std::move(*ws)); }
  } release{this, &ws};
  if (ws->arena.nbytes() < size_t(plan->arena_bytes)) {
    ws->arena = Tensor(DType::boolean, {plan->arena_bytes});
    std::memset(ws->arena.data(), 0, ws->arena.nbytes());  // fault pages in now, not mid-kernel
  }

  std::unordered_map<const Value*, Tensor> vals;
  for (auto* in : graph.inputs()) vals[in] = inputs.at(in->name);
  for (auto& [name, v] : graph.outputs()) {
    if (v->producer && v->producer->op != OpKind::Constant && !vals.count(v)) {
      vals[v] = outputs.at(name);
    }
  }
  // The tensor of a value that owns its bytes: a graph input or output, a constant, or an arena
  // buffer.
  auto storage_tensor = [&](const Value* v) -> Tensor {
    auto it = vals.find(v);
    if (it != vals.end()) return it->second;
    if (v->producer && v->producer->op == OpKind::Constant) return v->producer->payload;
    auto off = plan->offset.find(v);
    UBF_CHECK(off != plan->offset.end(), "value '" + v->name + "' has no buffer");
    Tensor t = Tensor::view(v->dtype, plan->sizes.at(v),
                            static_cast<char*>(ws->arena.data()) + off->second);
    vals[v] = t;
    return t;
  };
  auto tensor_of = [&](const Value* v) -> Tensor {
    const Value* s = storage_of(v);
    if (s == v) return storage_tensor(v);
    auto it = vals.find(v);
    if (it != vals.end()) return it->second;
    Tensor t = Tensor::view(v->dtype, plan->sizes.at(v), storage_tensor(s).data());  // a view
    vals[v] = t;
    return t;
  };

  ExecContext ctx;
  ctx.pool = pool;
  ctx.ub_bytes = config.ub_bytes;
  ctx.block_scratch = &ws->block_scratch;
  ctx.matmul_block_bytes = config.matmul_block_bytes;
  for (auto& u : ws->ubs) ctx.ub.push_back(u.data_as<float>());
  TraceSink* sink = active_trace_sink();
  RunStats local;
  std::vector<Tensor> in, out;
  for (auto& k : kernels) {
    in.clear();
    out.clear();
    for (auto* v : k->inputs) in.push_back(tensor_of(v));
    for (auto* v : k->outputs) out.push_back(tensor_of(v));
    ctx.extra_bytes_read = 0;
    ctx.variant_used.clear();
    int64_t t0 = sink ? now_ns() : 0;
    k->run(in, out, ctx);
    int64_t br = ctx.extra_bytes_read, bw = 0;
    for (auto& t : in) br += int64_t(t.nbytes());
    for (auto& t : out) bw += int64_t(t.nbytes());
    local.bytes_read += br;
    local.bytes_written += bw;
    local.kernels_launched++;
    if (sink) {
      KernelEvent e;
      e.info = &k->info;
      e.t0_ns = t0;
      e.t1_ns = now_ns();
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
  // Outputs that no kernel wrote (graph inputs or constants returned directly, or one value
  // returned under two names).
  for (auto& [name, v] : graph.outputs()) {
    Tensor src = tensor_of(v);
    Tensor& dst = outputs.at(name);
    if (src.data() != dst.data()) std::memcpy(dst.data(), src.data(), dst.nbytes());
  }
  if (stats) *stats = local;
}

CompileStats CompiledModelImpl::stats() const {
  CompileStats s = compile_stats;
  s.plan_builds = plan_builds_.load();
  s.plan_cache_hits = plan_hits_.load();
  return s;
}

// ---- public CompiledModel ----

std::map<std::string, Tensor> CompiledModel::run(const std::map<std::string, Tensor>& inputs,
                                                 RunStats* stats) const {
  if (!impl_) throw Error("run() on an empty CompiledModel; hint: call ubfuse::compile first");
  std::map<std::string, Tensor> out;
  impl_->run(inputs, out, true, stats);
  return out;
}

void CompiledModel::run_into(const std::map<std::string, Tensor>& inputs,
                             std::map<std::string, Tensor>& outputs, RunStats* stats) const {
  if (!impl_) throw Error("run_into() on an empty CompiledModel; hint: call ubfuse::compile first");
  impl_->run(inputs, outputs, false, stats);
}

const std::vector<KernelInfo>& CompiledModel::kernels() const { return impl_->kernel_infos; }
const std::vector<FusionDecision>& CompiledModel::decisions() const { return impl_->decisions; }
CompileStats CompiledModel::stats() const { return impl_->stats(); }
const Graph& CompiledModel::graph() const { return impl_->graph; }
bool CompiledModel::fusion_enabled() const { return impl_->config.fusion; }
std::vector<std::string> CompiledModel::output_names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : impl_->graph.outputs()) out.push_back(n);
  return out;
}
std::vector<std::string> CompiledModel::input_names() const {
  std::vector<std::string> out;
  for (auto* v : impl_->graph.inputs()) out.push_back(v->name);
  return out;
}

}  // namespace ubfuse
