#include "compiler/pipeline.h"

#include <algorithm>

#include "ubfuse/error.h"

namespace ubfuse {

std::vector<std::unique_ptr<Pass>> make_pipeline(const CompileConfig& config,
                                                 std::vector<FusionDecision>* notes) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_verify_pass());
  p.push_back(make_infer_shapes_pass());
  p.push_back(make_dce_pass());
  if (config.graph_optimizer) {
    p.push_back(make_simplify_pass());  // folds constants the patterns compare against
    p.push_back(make_canonicalize_pass());
    p.push_back(make_dce_pass());
    p.push_back(make_simplify_pass());  // no-op reshapes/casts the rewrites exposed
  }
  // Graph mode: the dynamic-quantizer chain as one op (eager keeps a kernel per ONNX op).
  if (config.fusion) p.push_back(make_quant_matmul_pass(notes));
  // Graph mode: after the patterns, which want their intermediates private to one chain.
  if (config.fusion && config.graph_optimizer) p.push_back(make_cse_pass());
  p.push_back(make_verify_pass());
  return p;
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t k = s.find(sep, pos);
    out.push_back(s.substr(pos, k == std::string::npos ? std::string::npos : k - pos));
    if (k == std::string::npos) break;
    pos = k + 1;
  }
  return out;
}

int64_t to_int(const std::string& s, const std::string& what) {
  size_t used = 0;
  int64_t v = -2;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || s.empty()) throw Error(what + ": '" + s + "' is not an integer");
  return v;
}

// The symbols the gears fill, in order: the -1 dims of ge.inputShape ("x:-1,-1,4096;r:...") or,
// without it, the symbolic dims of the graph inputs in order of first appearance.
std::vector<std::string> gear_symbols(const Graph& graph, const CompileConfig& config) {
  std::vector<std::string> syms;
  auto add = [&](const std::string& s) {
    if (std::find(syms.begin(), syms.end(), s) == syms.end()) syms.push_back(s);
  };
  const std::string& spec = config.input_shape;
  if (spec.empty()) {
    for (auto* in : graph.inputs()) {
      for (auto& d : in->shape) {
        if (d.is_symbol()) add(d.symbol());
      }
    }
    return syms;
  }
  for (auto& entry : split(spec, ';')) {
    auto colon = entry.rfind(':');
    if (colon == std::string::npos) {
      throw Error("ge.inputShape entry '" + entry + "' must be name:d,d,...");
    }
    std::string name = entry.substr(0, colon);
    const Value* in = nullptr;
    for (auto* v : graph.inputs()) {
      if (v->name == name) in = v;
    }
    if (!in) throw Error("ge.inputShape names unknown input '" + name + "'");
    auto dims = split(entry.substr(colon + 1), ',');
    if (dims.size() != in->shape.size()) {
      throw Error("ge.inputShape gives " + std::to_string(dims.size()) + " dims for input '" +
                  name + "' of shape " + shape_str(in->shape));
    }
    for (size_t i = 0; i < dims.size(); i++) {
      int64_t v = to_int(dims[i], "ge.inputShape");
      const Dim& d = in->shape[i];
      if (v == -1) {
        if (d.is_static()) {
          throw Error("ge.inputShape marks dim " + std::to_string(i) + " of '" + name +
                      "' dynamic (-1) but the model fixes it to " + d.str());
        }
        if (!d.is_symbol()) {
          std::string names;
          for (auto& s : d.symbols()) names += (names.empty() ? "" : ", ") + s;
          throw Error("ge.inputShape marks dim " + std::to_string(i) + " of '" + name +
                      "' dynamic (-1) but it is '" + d.str() + "', an expression of " + names +
                      "; hint: gears set symbols, so mark the input dims that are those symbols");
        }
        add(d.symbol());
      } else if (d.is_static() && d.value() != v) {
        throw Error("ge.inputShape gives " + std::to_string(v) + " for dim " + std::to_string(i) +
                    " of '" + name + "' but the model fixes it to " + d.str());
      }
    }
  }
  return syms;
}

}  // namespace

std::vector<SymbolBindings> parse_gears(const Graph& graph, const CompileConfig& config) {
  std::vector<SymbolBindings> gears;
  if (config.dynamic_dims.empty()) {
    if (config.dynamic_dims_strict) {
      throw Error("ge.dynamic_dims_strict=1 needs ge.dynamic_dims (the gears to accept)");
    }
    return gears;
  }
  auto syms = gear_symbols(graph, config);
  for (auto& gear : split(config.dynamic_dims, ';')) {
    auto vals = split(gear, ',');
    if (vals.size() != syms.size()) {
      std::string names;
      for (auto& s : syms) names += (names.empty() ? "" : ", ") + s;
      throw Error("ge.dynamic_dims gear '" + gear + "' has " + std::to_string(vals.size()) +
                  " values but the model has " + std::to_string(syms.size()) + " dynamic dims (" +
                  names + ")");
    }
    SymbolBindings b;
    for (size_t i = 0; i < syms.size(); i++) {
      int64_t v = to_int(vals[i], "ge.dynamic_dims gear '" + gear + "'");
      if (v <= 0) throw Error("ge.dynamic_dims gear '" + gear + "' has a non-positive size");
      b[syms[i]] = v;
    }
    gears.push_back(b);
  }
  return gears;
}

void prepare_plans(const Executor& ex) {
  const Executable& exe = ex.executable();
  bool all_static = true;
  for (auto* in : exe.graph.inputs()) all_static &= is_static(in->shape);
  // A plan that depends on an input's contents (value inputs) waits for the first run.
  if (!exe.value_inputs.empty()) return;
  // Building a plan also enforces memory_limit, so a static model that cannot fit fails here.
  if (all_static) ex.plan_for({});
  for (auto& gear : exe.gears) ex.plan_for(gear);
}

}  // namespace ubfuse
