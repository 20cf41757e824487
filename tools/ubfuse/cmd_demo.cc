// `ubfuse demo`: the seed block silu(layer_norm(x + residual)) run eager and/or in graph mode,
// checked against the double reference, timed, with bandwidth and the kernels launched.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "explain/report_json.h"
#include "kernels/reference/reference.h"
#include "seed_block.h"
#include "ubfuse/profiler.h"

namespace ubfuse::cli {

namespace {

struct DemoArgs {
  std::string shape = "2,2048,4096";
  std::string dtype = "f32";
  std::string mode = "both";
  std::vector<std::string> options;
  std::string rules;
  std::string trace_dir;
  int iters = 10;
  bool json = false;
  bool print_mid = false;
  bool no_check = false;
};

struct ModeResult {
  std::string mode;
  CompiledModel model;
  double median_ms = 0;
  RunStats stats;
  double max_abs_diff = 0;
  std::map<std::string, Tensor> outputs;
  std::string trace_path;  // with --trace
  ProfilerSummary summary;
};

ModeResult run_mode(const std::string& mode, const Graph& g,
                    const std::map<std::string, Tensor>& in, Options opts, int iters,
                    const std::string& trace_dir) {
  ModeResult r;
  r.mode = mode;
  opts["ge.exec.enableOperatorFusion"] = mode == "graph" ? "1" : "0";
  {
    InterruptibleCompile ctrl_c;
    r.model = compile(g, opts, ctrl_c.callback());
  }
  r.outputs = r.model.run(in, &r.stats);  // warm-up; also allocates the outputs reused below
  // --trace: the timed runs, one step each, to DIR/<mode>.trace.json (warm-up left out).
  std::unique_ptr<Profiler> prof;
  if (!trace_dir.empty()) {
    prof = std::make_unique<Profiler>(ProfilerOptions{.trace_dir = trace_dir, .name = mode});
    prof->record_compile(r.model, mode);
  }
  std::vector<double> ms;
  for (int i = 0; i < iters; i++) {
    auto t0 = std::chrono::steady_clock::now();
    r.model.run_into(in, r.outputs, &r.stats);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (prof) prof->step();
  }
  if (prof) {
    prof->stop();
    r.trace_path = prof->trace_path();
    r.summary = prof->summary();
  }
  std::sort(ms.begin(), ms.end());
  r.median_ms = ms.empty() ? 0 : ms[ms.size() / 2];
  return r;
}

int run_demo(const DemoArgs& a) {
  SeedBlockOptions so;
  so.shape = parse_sizes(a.shape, "--shape");
  so.dtype = parse_dtype(a.dtype);
  so.print_mid = a.print_mid;
  Graph g = seed_block(so);
  auto inputs = seed_inputs(so);
  Options opts = parse_kv_options(a.options);
  if (!a.rules.empty()) opts["ge.fusion_optimizer_config_path"] = a.rules;

  std::vector<std::string> modes;
  if (a.mode == "both") {
    modes = {"eager", "graph"};
  } else if (a.mode == "eager" || a.mode == "graph") {
    modes = {a.mode};
  } else {
    throw Error("--mode must be eager, graph or both, got '" + a.mode + "'");
  }
  std::map<std::string, ref::RefTensor> want;
  if (!a.no_check) want = ref::run_graph(g, inputs);

  std::vector<ModeResult> results;
  for (auto& m : modes) {
    results.push_back(run_mode(m, g, inputs, opts, a.iters, a.trace_dir));
    if (!a.no_check)
      results.back().max_abs_diff = ref::max_abs_diff(results.back().outputs.at("y"), want.at("y"));
  }

  nlohmann::json j;
  j["block"] = "silu(layer_norm(x + residual))";
  j["shape"] = so.shape;
  j["dtype"] = a.dtype;
  j["threads"] = results.empty() ? 0 : results[0].model.num_threads();
  // Which compute-bound loops stream their outputs on this CPU.
  j["store_profile"] = store_profile_name();
  const char* omp_wait = std::getenv("OMP_WAIT_POLICY");
  j["omp_wait_policy"] = omp_wait ? omp_wait : "";
  const char* gomp_spin = std::getenv("GOMP_SPINCOUNT");
  j["gomp_spincount"] = gomp_spin ? gomp_spin : "";
  for (auto& r : results) {
    nlohmann::json m;
    double bytes = double(r.stats.bytes_read + r.stats.bytes_written);
    m["median_ms"] = r.median_ms;
    m["bytes_moved"] = bytes;
    m["gb_per_s"] = r.median_ms > 0 ? bytes / (r.median_ms * 1e6) : 0;
    m["max_abs_diff"] = r.max_abs_diff;
    m["tolerance"] = ref::tolerance(so.dtype);
    m["within_tolerance"] = r.max_abs_diff <= ref::tolerance(so.dtype) * 10;
    m["kernels"] = kernels_json(r.model);
    m["compile_ms"] = r.model.stats().compile_ms;
    m["compile"] = compile_stats_json(r.model.stats());
    m["compilations"] = r.model.stats().compilations;
    m["plan_builds"] = r.model.stats().plan_builds;
    m["plan_cache_hits"] = r.model.stats().plan_cache_hits;
    if (!r.trace_path.empty()) {
      m["trace"] = r.trace_path;
      for (auto& row : r.summary.rows) {
        m["summary"].push_back({{"name", row.name},
                                {"calls", row.calls},
                                {"total_us", row.total_us},
                                {"mean_us", row.mean_us},
                                {"bytes", row.bytes},
                                {"gb_per_s", row.gb_per_s},
                                {"pct_of_bandwidth", row.pct_of_bandwidth}});
      }
    }
    j["modes"][r.mode] = m;
  }
  if (results.size() == 2 && results[1].median_ms > 0) {
    j["speedup_graph_vs_eager"] = results[0].median_ms / results[1].median_ms;
  }

  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "ubfuse demo: silu(layer_norm(x + residual)), %s %s, %d threads, store profile %s\n",
        sizes_str(so.shape).c_str(), a.dtype.c_str(), int(j["threads"]),
        store_profile_name().c_str());
    for (auto& r : results) {
      auto& m = j["modes"][r.mode];
      std::printf("\n[%s] %zu kernel(s):\n", r.mode.c_str(), r.model.kernels().size());
      for (auto& k : r.model.kernels()) {
        std::string ops;
        for (auto& o : k.op_types) ops += (ops.empty() ? "" : ", ") + o;
        std::printf("  %-28s ops: %s\n", k.name.c_str(), ops.c_str());
      }
      std::printf("  median %.3f ms, %.1f MB moved, %.1f GB/s", r.median_ms,
                  double(m["bytes_moved"]) / 1e6, double(m["gb_per_s"]));
      if (!a.no_check) std::printf(", max |diff| vs reference %.3g", r.max_abs_diff);
      std::printf("\n");
      if (!r.trace_path.empty()) {
        std::printf("  trace: %s (open in chrome://tracing or ui.perfetto.dev)\n\n%s",
                    r.trace_path.c_str(), r.summary.table().c_str());
      }
    }
    if (j.contains("speedup_graph_vs_eager")) {
      std::printf("\ngraph mode is %.2fx faster than eager\n", double(j["speedup_graph_vs_eager"]));
    }
  }
  for (auto& r : results) {
    if (!a.no_check && r.max_abs_diff > ref::tolerance(so.dtype) * 10) {
      std::fprintf(stderr, "ubfuse demo: %s result differs from the reference by %g\n",
                   r.mode.c_str(), r.max_abs_diff);
      return 1;
    }
  }
  return 0;
}

}  // namespace

void register_demo(CLI::App& app, std::vector<std::function<int()>>& actions) {
  auto a = std::make_shared<DemoArgs>();
  auto* c = app.add_subcommand("demo", "run the seed block silu(layer_norm(x + residual))");
  c->add_option("--shape", a->shape, "B,S,H")->capture_default_str();
  c->add_option("--dtype", a->dtype, "f32|bf16|f16")->capture_default_str();
  c->add_option("--mode", a->mode, "eager|graph|both")->capture_default_str();
  c->add_option("--option", a->options, "compile option k=v (repeatable)");
  c->add_option("--rules", a->rules, "fusion rules file (JSON)");
  c->add_option("--iters", a->iters, "timed runs per mode")->capture_default_str();
  c->add_option("--trace", a->trace_dir, "write DIR/eager.trace.json and DIR/graph.trace.json");
  c->add_flag("--json", a->json, "print one JSON object");
  c->add_flag("--print-mid", a->print_mid, "put a Host print between LayerNorm and Silu");
  c->add_flag("--no-check", a->no_check, "skip the reference check");
  actions.push_back(nullptr);
  size_t slot = actions.size() - 1;
  c->callback([a, &actions, slot] { actions[slot] = [a] { return run_demo(*a); }; });
}

}  // namespace ubfuse::cli
