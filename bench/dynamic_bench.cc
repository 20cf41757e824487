// Dynamic shapes: what a new shape costs (plan build) and what a seen one costs (cache lookup),
// and graph vs eager at seq 1 (decode-like) and seq 2048, from one compiled model.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>

#include "runtime/executor.h"
#include "ubfuse/onnx.h"
#include "ubfuse/ubfuse.h"

namespace {

using namespace ubfuse;

Graph symbolic_seed(int64_t hidden) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", "seq", hidden});
  auto r = b.input("residual", f32, {"batch", "seq", hidden});
  auto w = b.constant(Tensor::random(f32, {hidden}, 1, 0.5, 1.5));
  auto bias = b.constant(Tensor::random(f32, {hidden}, 2));
  b.output("y", b.silu(b.layer_norm(b.add(x, r), w, bias, 1e-5)));
  return b.build();
}

CompiledModel& model(bool fusion) {
  static CompiledModel g = compile(symbolic_seed(4096), {{"fusion", "1"}});
  static CompiledModel e = compile(symbolic_seed(4096), {{"fusion", "0"}});
  return fusion ? g : e;
}

void BM_PlanBuildNewShape(benchmark::State& st) {
  auto& impl = model(true).executor();
  int64_t seq = 1;
  for (auto _ : st) {
    auto p = impl.build_plan({{"batch", 1}, {"seq", seq++}});
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PlanBuildNewShape)->Unit(benchmark::kMicrosecond);

void BM_PlanLookupCachedShape(benchmark::State& st) {
  auto& impl = model(true).executor();
  SymbolBindings b{{"batch", 1}, {"seq", 7}};
  impl.plan_for(b);
  for (auto _ : st) benchmark::DoNotOptimize(impl.plan_for(b));
}
BENCHMARK(BM_PlanLookupCachedShape)->Unit(benchmark::kMicrosecond);

// A decode step's new past length: the test decoder with a KV cache (tests/models), whose plan
// runs its shape arithmetic (Shape -> Gather -> Range over the past) and places 45 kernels.
void BM_PlanBuildDecoderStep(benchmark::State& st) {
  static CompiledModel m = compile(
      import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/kv_decoder_with_past.onnx"),
      {{"num_threads", "1"}});
  auto& impl = m.executor();
  int64_t past = 1;
  for (auto _ : st) {
    auto p = impl.build_plan(
        {{"batch_size", 1}, {"sequence_length", 1}, {"past_sequence_length", past++}});
    benchmark::DoNotOptimize(p);
  }
  st.counters["kernels"] = double(m.kernels().size());
}
BENCHMARK(BM_PlanBuildDecoderStep)->Unit(benchmark::kMicrosecond);

void BM_Seed(benchmark::State& st) {
  bool fusion = st.range(0) != 0;
  int64_t batch = st.range(1), seq = st.range(2);
  std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {batch, seq, 4096}, 1)},
                                   {"residual", Tensor::random(f32, {batch, seq, 4096}, 2)}};
  auto out = model(fusion).run(in);
  RunStats rs;
  for (auto _ : st) model(fusion).run_into(in, out, &rs);
  st.SetBytesProcessed(int64_t(st.iterations()) * (rs.bytes_read + rs.bytes_written));
  st.SetLabel(fusion ? "graph" : "eager");
}
BENCHMARK(BM_Seed)
    ->ArgsProduct({{0, 1}, {1, 8}, {1}})
    ->ArgsProduct({{0, 1}, {1}, {2048}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
