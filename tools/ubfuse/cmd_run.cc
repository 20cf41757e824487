// `ubfuse run MODEL.onnx`: imports an ONNX model, feeds it .npy inputs (or fixed-seed random ones),
// runs it eager, in graph mode or both (alternating, in one process), writes the outputs as .npy
// and reports kernels, times and the fusion summary (--json for one JSON object).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cli_util.h"
#include "commands.h"
#include "explain/report_json.h"
#include "ubfuse/npy.h"
#include "ubfuse/onnx.h"
#include "ubfuse/profiler.h"

namespace ubfuse::cli {

namespace {

struct RunArgs {
  std::string model;
  std::string mode = "graph";
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> dims;    // NAME=N
  std::string output_dir;
  std::vector<std::string> options;
  std::string rules;
  std::string trace_dir;
  int iters = 1;
  uint64_t seed = 0;
  bool json = false;
};

std::pair<std::string, std::string> split_kv(const std::string& kv, const std::string& flag,
                                             const std::string& form) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
    throw Error(flag + " '" + kv + "' must have the form " + form);
  }
  return {kv.substr(0, eq), kv.substr(eq + 1)};
}

// Binds the symbols of `shape` from `sizes`; errors name the input.
void bind_from(const std::string& input, const Shape& shape, const Sizes& sizes,
               SymbolBindings& b) {
  if (shape.size() != sizes.size()) {
    throw Error("--input " + input + ": the model expects rank " + std::to_string(shape.size()) +
                " " + shape_str(shape) + ", the file has " + sizes_str(sizes));
  }
  for (size_t i = 0; i < shape.size(); i++) {
    if (shape[i].is_static()) {
      if (shape[i].value() != sizes[i]) {
        throw Error("--input " + input + ": dim " + std::to_string(i) + " is " +
                    std::to_string(sizes[i]) + ", the model expects " + shape_str(shape));
      }
    } else if (shape[i].is_symbol()) {
      auto [it, fresh] = b.emplace(shape[i].symbol(), sizes[i]);
      if (!fresh && it->second != sizes[i]) {
        throw Error("--input " + input + ": dim '" + shape[i].symbol() + "' is " +
                    std::to_string(sizes[i]) + " here but " + std::to_string(it->second) +
                    " elsewhere (another input or --dim)");
      }
    }
  }
}

std::string file_stem(std::string name) {
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
      ch = '_';
  }
  return name;
}

// One compiled mode of the model, its outputs and its timed runs (ms).
struct ModeRun {
  std::string mode;
  CompiledModel m;
  std::map<std::string, Tensor> outputs;
  RunStats stats;
  std::vector<double> ms;
};

double time_run(ModeRun& r, const std::map<std::string, Tensor>& inputs) {
  auto t0 = std::chrono::steady_clock::now();
  r.m.run_into(inputs, r.outputs, &r.stats);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A block of one mode's runs lasts about this long where runs are short; such a block starts with
// an untimed run, which brings back into cache what the other mode's block evicted.
constexpr double kBlockMs = 20.0;
constexpr int kMaxBlockRuns = 8;

// Graph and eager runs in alternating blocks (graph first, then eager first, ...), so that a
// change in the machine's speed during the measurement falls on both modes alike.
void time_alternating(ModeRun& g, ModeRun& e, const std::map<std::string, Tensor>& inputs,
                      int iters) {
  const double probe = std::max(time_run(g, inputs), time_run(e, inputs));
  const int block = std::clamp(int(std::floor(kBlockMs / std::max(probe, 1e-3))), 1, kMaxBlockRuns);
  for (int done = 0, k = 0; done < iters; done += block, k++) {
    const int n = std::min(block, iters - done);
    for (ModeRun* r : k % 2 == 0 ? std::array{&g, &e} : std::array{&e, &g}) {
      if (block > 1) time_run(*r, inputs);
      for (int i = 0; i < n; i++) r->ms.push_back(time_run(*r, inputs));
    }
  }
}

// The largest |graph - eager| over the float outputs, and the largest |eager| (its scale).
std::pair<double, double> output_difference(const ModeRun& g, const ModeRun& e) {
  double diff = 0, scale = 0;
  for (auto& [name, te] : e.outputs) {
    const Tensor& tg = g.outputs.at(name);
    if (!is_float(te.dtype()) || tg.sizes() != te.sizes()) continue;
    for (int64_t i = 0; i < te.numel(); i++) {
      const double x = te.get(i), y = tg.get(i);
      scale = std::max(scale, std::abs(x));
      diff = std::max(diff, std::isnan(x) != std::isnan(y) ? INFINITY : std::abs(x - y));
    }
  }
  return {diff, scale};
}

nlohmann::json mode_json(const ModeRun& r) {
  return {{"num_kernels", r.m.kernels().size()},
          {"median_ms", r.ms[r.ms.size() / 2]},
          {"min_ms", r.ms.front()},
          {"bytes_moved", r.stats.bytes_read + r.stats.bytes_written}};
}

int run_model(const RunArgs& a) {
  if (a.mode != "eager" && a.mode != "graph" && a.mode != "both") {
    throw Error("--mode must be eager, graph or both, got '" + a.mode + "'");
  }
  if (a.iters < 1) throw Error("--iters must be >= 1");
  if (a.mode == "both" && !a.trace_dir.empty()) {
    throw Error(
        "--trace records one mode; hint: run --mode graph and --mode eager, each with "
        "its own --trace DIR");
  }
  SymbolBindings dims = parse_dims(a.dims);

  // Inputs: files first (they bind symbols), then random ones for the rest.
  auto infos = onnx_model_inputs(a.model);
  std::map<std::string, std::string> files;
  for (auto& kv : a.inputs) {
    // Named references, not a structured binding: clang 14 cannot capture one in a lambda.
    const auto name_path = split_kv(kv, "--input", "NAME=FILE.npy");
    const std::string& name = name_path.first;
    const std::string& path = name_path.second;
    bool known = std::any_of(infos.begin(), infos.end(), [&](auto& i) { return i.name == name; });
    if (!known) {
      std::string names;
      for (auto& i : infos) names += (names.empty() ? "" : ", ") + i.name;
      throw Error("--input " + name + ": the model has no input '" + name +
                  "'; its inputs: " + names);
    }
    files[name] = path;
  }
  std::map<std::string, Tensor> inputs;
  nlohmann::json jin = nlohmann::json::array();
  SymbolBindings bound = dims;
  for (auto& info : infos) {
    auto it = files.find(info.name);
    if (it == files.end()) continue;
    Tensor t = read_npy(it->second);
    if (t.dtype() != info.dtype) {
      throw Error("--input " + info.name + ": '" + it->second + "' holds " +
                  std::string(dtype_name(t.dtype())) + ", the model expects " +
                  std::string(dtype_name(info.dtype)) + "; hint: save it with .astype(...)");
    }
    bind_from(info.name, info.shape, t.sizes(), bound);
    inputs[info.name] = t;
    jin.push_back({{"name", info.name},
                   {"shape", t.sizes()},
                   {"dtype", dtype_name(t.dtype())},
                   {"source", it->second}});
  }
  for (size_t k = 0; k < infos.size(); k++) {
    auto& info = infos[k];
    if (inputs.count(info.name)) continue;
    Sizes s;
    for (auto& d : info.shape) {
      auto v = eval_dim(d, bound);
      if (!v) {
        std::string pass;
        for (auto& sym : d.symbols()) {
          if (!bound.count(sym)) pass += "--dim " + sym + "=N ";
        }
        throw Error("input '" + info.name + "' " + shape_str(info.shape) + " has symbolic dim '" +
                    d.str() + "'; pass " + pass + "or --input " + info.name + "=FILE.npy");
      }
      if (*v < 0) {
        throw Error("input '" + info.name + "' " + shape_str(info.shape) + ": dim '" + d.str() +
                    "' is " + std::to_string(*v) + " with the given --dim values");
      }
      s.push_back(*v);
    }
    // Floats uniform in [-1, 1); integers in [0, 2) so that indices and masks stay valid.
    bool fl = is_float(info.dtype);
    inputs[info.name] = Tensor::random(info.dtype, s, a.seed + k, fl ? -1.0 : 0.0, fl ? 1.0 : 2.0);
    jin.push_back({{"name", info.name},
                   {"shape", s},
                   {"dtype", dtype_name(info.dtype)},
                   {"source", "random(seed=" + std::to_string(a.seed + k) + ")"}});
  }

  // Import: symbolic first; a model whose shape arithmetic needs sizes gets them from the inputs.
  OnnxModel model;
  bool specialized = false;
  try {
    model = import_onnx_model(a.model);
  } catch (const OnnxNeedsStaticDimsError& e) {
    ImportOptions o;
    o.static_dims = bound;
    model = import_onnx_model(a.model, o);
    specialized = true;
  }

  std::string trace_path;
  Options opts = parse_kv_options(a.options);
  if (!a.rules.empty()) opts["ge.fusion_optimizer_config_path"] = a.rules;
  const bool both = a.mode == "both";
  std::vector<ModeRun> runs;
  for (const char* mode : {"graph", "eager"}) {
    if (!both && a.mode != mode) continue;
    ModeRun& r = runs.emplace_back();
    r.mode = mode;
    opts["ge.exec.enableOperatorFusion"] = r.mode == "graph" ? "1" : "0";
    InterruptibleCompile ctrl_c;
    r.m = compile(model.graph, opts, ctrl_c.callback());
  }
  // Warm-up, which also allocates the outputs.
  for (auto& r : runs) r.outputs = r.m.run(inputs, &r.stats);
  if (both) {
    time_alternating(runs[0], runs[1], inputs, a.iters);
  } else {
    ModeRun& r = runs[0];
    std::unique_ptr<Profiler> prof;
    if (!a.trace_dir.empty()) {
      prof = std::make_unique<Profiler>(ProfilerOptions{.trace_dir = a.trace_dir, .name = a.mode});
      prof->record_compile(r.m, a.mode);
    }
    for (int i = 0; i < a.iters; i++) {
      r.ms.push_back(time_run(r, inputs));
      if (prof) prof->step();
    }
    if (prof) {
      prof->stop();
      trace_path = prof->trace_path();
    }
  }
  for (auto& r : runs) std::sort(r.ms.begin(), r.ms.end());
  // Graph mode's outputs are the ones written and listed (--mode both: it comes first).
  const ModeRun& main_run = runs[0];
  const CompiledModel& m = main_run.m;
  const auto& outputs = main_run.outputs;
  const std::vector<double>& ms = main_run.ms;
  const RunStats& stats = main_run.stats;

  nlohmann::json jout = nlohmann::json::array();
  if (!a.output_dir.empty()) std::filesystem::create_directories(a.output_dir);
  for (auto& [name, _] : model.graph.outputs()) {
    const Tensor& t = outputs.at(name);
    nlohmann::json o{{"name", name}, {"shape", t.sizes()}, {"dtype", dtype_name(t.dtype())}};
    if (!a.output_dir.empty()) {
      std::string path =
          (std::filesystem::path(a.output_dir) / (file_stem(name) + ".npy")).string();
      write_npy(path, t);
      o["file"] = path;
    }
    jout.push_back(o);
  }
  int fused = 0;
  for (auto& k : m.kernels()) fused += k.op_types.size() > 1;
  nlohmann::json reasons = nlohmann::json::object();
  for (auto& d : m.decisions()) {
    if (d.reason != FusionReason::Fused)
      reasons[std::string(fusion_reason_name(d.reason))] =
          reasons.value(std::string(fusion_reason_name(d.reason)), 0) + 1;
  }
  nlohmann::json j{{"model", a.model},
                   {"opset", model.opset},
                   {"producer", model.producer},
                   {"mode", a.mode},
                   {"specialized_dims", specialized ? nlohmann::json(bound) : nlohmann::json()},
                   {"notes", model.notes},
                   {"inputs", jin},
                   {"outputs", jout},
                   {"num_kernels", m.kernels().size()},
                   {"kernels", kernels_json(m)},
                   {"fusion", {{"fused_kernels", fused}, {"not_fused_reasons", reasons}}},
                   {"compile_ms", m.stats().compile_ms},
                   {"compile", compile_stats_json(m.stats())},
                   {"iters", a.iters},
                   {"median_ms", ms[ms.size() / 2]},
                   {"min_ms", ms.front()},
                   {"bytes_moved", stats.bytes_read + stats.bytes_written}};
  double diff = 0, scale = 0;
  if (both) {
    std::tie(diff, scale) = output_difference(runs[0], runs[1]);
    j["modes"] = {{"graph", mode_json(runs[0])}, {"eager", mode_json(runs[1])}};
    j["graph_speedup"] = runs[1].ms[runs[1].ms.size() / 2] / ms[ms.size() / 2];
    j["max_abs_diff"] = diff;
    j["max_abs_eager"] = scale;
  }
  if (!trace_path.empty()) j["trace"] = trace_path;
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("ubfuse run: %s (opset %lld, %s), %s mode\n", a.model.c_str(),
              static_cast<long long>(model.opset), model.producer.c_str(), a.mode.c_str());
  if (specialized)
    std::printf("  symbolic dims fixed at import: %s\n", nlohmann::json(bound).dump().c_str());
  for (auto& n : model.notes) std::printf("  note: %s\n", n.c_str());
  for (auto& i : jin) {
    std::printf("  input  %-24s %s %s <- %s\n", i["name"].get<std::string>().c_str(),
                i["dtype"].get<std::string>().c_str(), i["shape"].dump().c_str(),
                i["source"].get<std::string>().c_str());
  }
  std::printf("  %zu kernel(s), %d fused:\n", m.kernels().size(), fused);
  for (auto& k : m.kernels()) {
    if (k.op_types.size() < 2) continue;
    std::string ops;
    for (auto& o : k.op_types) ops += (ops.empty() ? "" : ", ") + o;
    std::printf("    %-32s %s\n", k.name.c_str(), ops.c_str());
  }
  if (both) {
    for (auto& r : runs) {
      std::printf("  %-5s median %.3f ms over %d run(s), %zu kernel(s), %.1f MB moved\n",
                  r.mode.c_str(), r.ms[r.ms.size() / 2], a.iters, r.m.kernels().size(),
                  double(r.stats.bytes_read + r.stats.bytes_written) / 1e6);
    }
    std::printf(
        "  graph mode %.2fx faster than eager (alternating runs); outputs differ by at "
        "most %.3g (largest |eager| %.3g)\n",
        j["graph_speedup"].get<double>(), diff, scale);
  } else {
    std::printf("  median %.3f ms over %d run(s), %.1f MB moved\n", ms[ms.size() / 2], a.iters,
                double(stats.bytes_read + stats.bytes_written) / 1e6);
  }
  for (auto& o : jout) {
    std::printf("  output %-24s %s %s%s\n", o["name"].get<std::string>().c_str(),
                o["dtype"].get<std::string>().c_str(), o["shape"].dump().c_str(),
                o.contains("file") ? (" -> " + o["file"].get<std::string>()).c_str() : "");
  }
  if (!trace_path.empty()) std::printf("  trace: %s\n", trace_path.c_str());
  return 0;
}

}  // namespace

void register_run(CLI::App& app, std::vector<std::function<int()>>& actions) {
  auto a = std::make_shared<RunArgs>();
  auto* c = app.add_subcommand("run", "run an ONNX model on .npy inputs (or random ones)");
  c->add_option("model", a->model, "the .onnx file")->required();
  c->add_option("--mode", a->mode,
                "eager|graph|both (both: alternating runs of each, in one process)")
      ->capture_default_str();
  c->add_option("--input", a->inputs, "NAME=FILE.npy (repeatable); others are random");
  c->add_option("--dim", a->dims, "NAME=N: size of a symbolic dim for random inputs");
  c->add_option("--output-dir", a->output_dir, "write each output as DIR/<name>.npy");
  c->add_option("--option", a->options, "compile option k=v (repeatable)");
  c->add_option("--rules", a->rules, "fusion rules file (JSON)");
  c->add_option("--trace", a->trace_dir, "write a Chrome trace of the timed runs to DIR");
  c->add_option("--iters", a->iters, "timed runs after one warm-up (per mode)")
      ->capture_default_str();
  c->add_option("--seed", a->seed, "seed of the random inputs")->capture_default_str();
  c->add_flag("--json", a->json, "print one JSON object");
  actions.push_back(nullptr);
  size_t slot = actions.size() - 1;
  c->callback([a, &actions, slot] { actions[slot] = [a] { return run_model(*a); }; });
}

}  // namespace ubfuse::cli
