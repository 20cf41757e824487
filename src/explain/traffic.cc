#include "explain/traffic.h"

#include <set>

#include "ubfuse/error.h"

namespace ubfuse {

namespace explain_detail {

SymbolBindings bind_dims(const Graph& g, const SymbolBindings& dims) {
  std::set<std::string> symbols;
  for (auto* in : g.inputs()) {
    for (auto& d : in->shape) {
      for (auto& s : d.symbols()) symbols.insert(s);  // "past+seq" names past and seq
    }
  }
  auto list = [](const std::set<std::string>& xs) {
    std::string r;
    for (auto& x : xs) r += (r.empty() ? "" : ", ") + x;
    return r;
  };
  SymbolBindings b;
  std::set<std::string> missing;
  for (auto& s : symbols) {
    auto it = dims.find(s);
    if (it == dims.end()) {
      missing.insert(s);
    } else if (it->second <= 0) {
      throw Error("dim " + s + "=" + std::to_string(it->second) + " must be positive");
    } else {
      b[s] = it->second;
    }
  }
  for (auto& [name, _] : dims) {
    if (!symbols.count(name)) {
      throw Error("--dim " + name + ": the model has no symbolic dim '" + name + "'" +
                  (symbols.empty() ? "; its shapes are all static"
                                   : "; its symbols are: " + list(symbols)));
    }
  }
  if (!missing.empty()) {
    std::string eg;
    for (auto& m : missing) eg += (eg.empty() ? "" : " ") + ("--dim " + m + "=N");
    throw Error("symbolic dims " + list(missing) + " need values to predict bytes; hint: pass " +
                eg);
  }
  return b;
}

int64_t value_bytes(const Value* v, const Plan& plan) {
  const Sizes* ps = plan.find_sizes(v);
  Sizes s = ps ? *ps : static_sizes(v->shape);
  return numel(s) * int64_t(dtype_size(v->dtype));
}

}  // namespace explain_detail

std::vector<KernelTraffic> predicted_traffic(const CompiledModel& m, const SymbolBindings& dims) {
  const Executor& ex = m.executor();
  const Executable& exe = ex.executable();
  auto plan = ex.build_plan(explain_detail::bind_dims(exe.graph, dims));
  std::vector<KernelTraffic> out;
  for (auto& k : exe.kernels) {
    KernelTraffic t;
    t.name = k->info.name;
    t.nodes = k->info.node_names;
    t.ops = k->info.op_types;
    t.host = k->info.host;
    t.variant = k->info.variant;
    for (auto* v : k->inputs) {
      t.inputs.push_back(v->name);
      t.bytes_read += explain_detail::value_bytes(v, *plan);
    }
    for (auto* v : k->outputs) {
      t.outputs.push_back(v->name);
      t.bytes_written += explain_detail::value_bytes(v, *plan);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ubfuse
