// compile(): the pipeline as one readable function (after Halide's Lower.cpp).
//   UBFUSE_DUMP_IR=1     prints the graph after each pass
//   UBFUSE_TIME_PASSES=1 prints each pass's time
#include "ubfuse/compile.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "compiler/if_kernel.h"
#include "compiler/lower_graph.h"
#include "compiler/options.h"
#include "compiler/pipeline.h"
#include "compiler/progress_line.h"
#include "compiler/shape_values.h"
#include "compiler/views.h"
#include "fusion/rules.h"
#include "kernels/cpu/node_kernel.h"
#include "runtime/executor.h"
#include "runtime/trace_hook.h"
#include "ubfuse/error.h"
#include "util/env.h"

namespace ubfuse {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CompiledModel compile(const Graph& g, const Options& options) { return compile(g, options, {}); }

CompiledModel compile(const Graph& g, const Options& options,
                      const CompileProgressFn& on_progress) {
  auto t_start = std::chrono::steady_clock::now();
  auto exe = std::make_shared<Executable>();
  CompileStats& stats = exe->compile_stats;
  stats.start_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t_start.time_since_epoch()).count();
  auto offset_ms = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - t_start).count();
  };
  CompileConfig config = parse_options(options);
  ProgressLine line(config.progress, stderr);
  config.on_progress = [&line, &on_progress](const CompileProgress& p) {
    line.update(p);
    if (on_progress) on_progress(p);
  };
  config.kernel_build = &stats.kernels;
  if (config.ub_bytes == 0) config.ub_bytes = default_ub_bytes();
  if (!config.rules_path.empty()) {
    config.rules = std::make_shared<FusionRules>(load_fusion_rules(config.rules_path));
  }
  exe->run = run_config(config);
  exe->fusion = config.fusion;
  exe->graph = g.clone();
  Graph& graph = exe->graph;

  const bool dump = env_on("UBFUSE_DUMP_IR"), time = env_on("UBFUSE_TIME_PASSES");
  for (auto& pass : make_pipeline(config, &exe->decisions)) {
    if (config.rules && !config.rules->pass_enabled(pass->name())) {
      exe->decisions.push_back({FusionReason::DisabledByRule, "", "",
                                "graph pass " + pass->name() + " is off in " + config.rules->source,
                                "switch it on in the GraphFusion section"});
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    bool changed = pass->run(graph);
    double ms = ms_since(t0);
    stats.pass_ms.emplace_back(pass->name(), ms);
    stats.pass_start_ms.push_back(offset_ms(t0));
    if (time)
      std::fprintf(stderr, "[ubfuse] pass %-16s %8.3f ms%s\n", pass->name().c_str(), ms,
                   changed ? " (changed)" : "");
    if (dump)
      std::fprintf(stderr, "[ubfuse] after %s:\n%s", pass->name().c_str(),
                   print_graph(graph).c_str());
  }

  auto t_lower = std::chrono::steady_clock::now();
  // Shape values run on the host while a plan is built, in either mode.
  ShapeValues sv = find_shape_values(graph);
  // If nodes run their branches, each compiled here once.
  OwnKernelFn own = [&options, &on_progress](const Node& n) {
    return make_if_kernel(n, options, on_progress);
  };
  for (const Node* n : sv.nodes) exe->shape_kernels.emplace_back(n, make_node_kernel(*n, own));
  exe->value_inputs = sv.value_inputs;
  auto planned = [&sv](const Node& n) { return sv.set.count(&n) > 0; };
  if (config.fusion) {
    exe->kernels = build_fused_kernels(graph, config, &exe->decisions, planned, own);
  } else {
    exe->kernels = build_eager_kernels(graph, planned, own);
  }
  double lower_ms = ms_since(t_lower);
  stats.pass_ms.emplace_back(config.fusion ? "fuse+codegen" : "lower_eager", lower_ms);
  stats.pass_start_ms.push_back(offset_ms(t_lower));
  if (time)
    std::fprintf(stderr, "[ubfuse] pass %-16s %8.3f ms\n",
                 config.fusion ? "fuse+codegen" : "lower_eager", lower_ms);
  elide_view_kernels(*exe);
  for (auto& k : exe->kernels) exe->kernel_infos.push_back(k->info);
  exe->gears = parse_gears(graph, config);
  stats.compilations = 1;

  auto executor = std::make_shared<const Executor>(exe);
  prepare_plans(*executor);
  // The planning above is part of compiling; the executable is frozen when compile() returns.
  exe->compile_stats.compile_ms = ms_since(t_start);
  CompiledModel model(executor);
  note_compiled(model);  // compile events for an active Profiler
  return model;
}

std::map<std::string, Tensor> run_eager(const Graph& g,
                                        const std::map<std::string, Tensor>& inputs) {
  return compile(g, {{"ge.exec.enableOperatorFusion", "0"}}).run(inputs);
}

}  // namespace ubfuse
