// Eager kernels vs the machine's memory bandwidth, measured in one run.
//
// Memory-bound eager ops at the DRAM-bound shape (8, 2048, 4096) f32 (256 MiB per tensor), run
// through make_op_kernel on the global thread pool (UBFUSE_NUM_THREADS or all cores), each
// reporting bytes_per_second (the bytes it must move: every input read once, the output written
// once). A STREAM add (c = a + b, 2 reads + 1 write) in the same binary is the yardstick; at the
// end the ratio op / STREAM is printed per op, measured interleaved (best of several rounds of
// each). The target is >= 70% for every memory-bound op. Also: MatMul GFLOP/s (oneDNN).
//
//   build/bench_eager_bench                        all (UBFUSE_NUM_THREADS=2: the 2-core case)
//   UBFUSE_BENCH_RATIOS=0 build/bench_eager_bench  the Google Benchmark part only
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/op_kernel.h"
#include "profiler/bandwidth.h"
#include "runtime/thread_pool.h"
#include "ubfuse/builder.h"
#include "util/omp_env.h"

namespace ubfuse {
namespace {

const Sizes kShape = {8, 2048, 4096};
constexpr int64_t kCols = 4096;

ThreadPool& pool() { return ThreadPool::global(); }
using V = GraphBuilder::V;

// One op on fresh inputs, with its graph kept alive for the kernel's lifetime.
struct OpBench {
  Graph graph;
  std::unique_ptr<cpu::OpKernel> kernel;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  int64_t bytes = 0;  // moved per run
};

// Scale (y = 2x, STREAM's 1 read + 1 write) shows what an op that reads one tensor and writes one
// can reach at all here: LayerNorm, Silu and Softmax move bytes in that ratio, not in Add's 2:1.
enum class Op { Add, Scale, LayerNorm, Silu, Softmax };

std::unique_ptr<OpBench> make_bench(Op op, DType dt, const Sizes& shape = kShape) {
  auto ob = std::make_unique<OpBench>();
  GraphBuilder b;
  V x = b.input("x", dt, to_shape(shape));
  V y = nullptr;
  ob->inputs.push_back(Tensor::random(dt, shape, 1, -2, 2));
  switch (op) {
    case Op::Add: {
      V r = b.input("r", dt, to_shape(shape));
      ob->inputs.push_back(Tensor::random(dt, shape, 2, -2, 2));
      y = b.add(x, r);
      break;
    }
    case Op::Scale: {
      Tensor two = Tensor::from_floats(dt, {}, {2.0f});
      ob->inputs.push_back(two);
      y = b.mul(x, b.constant(two));
      break;
    }
    case Op::LayerNorm: {
      V w = b.input("w", dt, {kCols});
      V bias = b.input("b", dt, {kCols});
      ob->inputs.push_back(Tensor::random(dt, {kCols}, 3, 0.5, 1.5));
      ob->inputs.push_back(Tensor::random(dt, {kCols}, 4, -1, 1));
      y = b.layer_norm(x, w, bias, 1e-5);
      break;
    }
    case Op::Silu:
      y = b.silu(x);
      break;
    case Op::Softmax:
      y = b.softmax(x);
      break;
  }
  b.output("y", y);
  ob->graph = b.build();
  ob->kernel = cpu::make_op_kernel(*y->producer);
  ob->outputs.push_back(Tensor::zeros(dt, shape));  // pre-faulted
  for (const auto& t : ob->inputs) ob->bytes += int64_t(t.nbytes());
  ob->bytes += int64_t(ob->outputs[0].nbytes());
  return ob;
}

void run_op(benchmark::State& state, Op op, DType dt) {
  auto ob = make_bench(op, dt);
  ob->kernel->run(ob->inputs, ob->outputs, pool());  // warm-up
  for (auto _ : state) {
    ob->kernel->run(ob->inputs, ob->outputs, pool());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * ob->bytes);
  state.counters["threads"] = pool().size();
}

void BM_EagerAdd(benchmark::State& s) { run_op(s, Op::Add, DType::f32); }
void BM_EagerLayerNorm(benchmark::State& s) { run_op(s, Op::LayerNorm, DType::f32); }
void BM_EagerSilu(benchmark::State& s) { run_op(s, Op::Silu, DType::f32); }
void BM_EagerSoftmax(benchmark::State& s) { run_op(s, Op::Softmax, DType::f32); }
void BM_EagerSiluBf16(benchmark::State& s) { run_op(s, Op::Silu, DType::bf16); }

// The same kernels on [2, 16, 4096] (256 KiB per f32 tensor, in each core's L2): what they
// compute per second when memory is not the limit. An op whose in-cache rate is not far above its
// DRAM-shape rate is compute-bound on this machine.
void run_in_cache(benchmark::State& state, Op op, DType dt) {
  auto ob = make_bench(op, dt, {2, 16, kCols});
  ob->kernel->run(ob->inputs, ob->outputs, pool());
  for (auto _ : state) ob->kernel->run(ob->inputs, ob->outputs, pool());
  state.SetItemsProcessed(state.iterations() * ob->outputs[0].numel());
  state.SetBytesProcessed(state.iterations() * ob->bytes);
}
void BM_InCacheLayerNorm(benchmark::State& s) { run_in_cache(s, Op::LayerNorm, DType::f32); }
void BM_InCacheSilu(benchmark::State& s) { run_in_cache(s, Op::Silu, DType::f32); }
void BM_InCacheSoftmax(benchmark::State& s) { run_in_cache(s, Op::Softmax, DType::f32); }
void BM_InCacheSiluBf16(benchmark::State& s) { run_in_cache(s, Op::Silu, DType::bf16); }

// MatMul with constant (prepacked) weights: [512, 2048] x [2048, 2048], GFLOP/s.
void run_matmul(benchmark::State& state, DType dt) {
  const int64_t M = 512, K = 2048, N = 2048;
  GraphBuilder b;
  V x = b.input("x", dt, {M, K});
  Tensor w = Tensor::random(dt, {K, N}, 5, -1, 1);
  V y = b.matmul(x, b.constant(w, "w"));
  b.output("y", y);
  Graph g = b.build();
  auto k = cpu::make_op_kernel(*y->producer);
  std::vector<Tensor> in{Tensor::random(dt, {M, K}, 6, -1, 1), w};
  std::vector<Tensor> out{Tensor::zeros(dt, {M, N})};
  k->run(in, out, pool());
  for (auto _ : state) k->run(in, out, pool());
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(2 * M * K * N) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
void BM_EagerMatMulF32(benchmark::State& s) { run_matmul(s, DType::f32); }
void BM_EagerMatMulBf16(benchmark::State& s) { run_matmul(s, DType::bf16); }

// The yardstick: each iteration measures (allocation and page faults excluded, best of a few
// passes inside) and reports one pass's time.
void stream(benchmark::State& state, bool nt) {
  const size_t bytes = size_t(numel(kShape)) * sizeof(float);
  double gbps = 0;
  for (auto _ : state) {
    gbps = measure_stream_add_gbps(pool(), bytes, nt);
    state.SetIterationTime(3.0 * double(bytes) / (gbps * 1e9));
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 3 * int64_t(bytes));
  state.counters["threads"] = pool().size();
}
void BM_EagerStreamAdd(benchmark::State& s) { stream(s, true); }
void BM_EagerStreamAddCachedStores(benchmark::State& s) { stream(s, false); }

// Repetitions: the ratio table uses each benchmark's best repetition, which keeps it meaningful
// on a machine shared with other work.
BENCHMARK(BM_EagerStreamAdd)
    ->UseManualTime()
    ->Iterations(2)
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerStreamAddCachedStores)
    ->UseManualTime()
    ->Iterations(2)
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerAdd)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerLayerNorm)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerSilu)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerSoftmax)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerSiluBf16)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_InCacheLayerNorm)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InCacheSilu)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InCacheSoftmax)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InCacheSiluBf16)->UseRealTime()->Repetitions(3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EagerMatMulF32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EagerMatMulBf16)->UseRealTime()->Unit(benchmark::kMillisecond);

// The ratio table: for each op, rounds of (one op pass, one STREAM pass) interleaved, keeping the
// best time of each, so a machine shared with other work still gives a fair ratio.
void print_ratios() {
  constexpr int kRounds = 12;
  StreamAdd stream(pool(), size_t(numel(kShape)) * sizeof(float));
  std::printf("\nEager ops vs STREAM add, %d threads, shape %s, best of %d interleaved rounds:\n",
              pool().size(), sizes_str(kShape).c_str(), kRounds);
  std::printf("  %-16s %10s %12s %8s\n", "op", "op GB/s", "STREAM GB/s", "ratio");
  struct Row {
    const char* name;
    Op op;
    DType dt;
  };
  const Row rows[] = {{"Add f32", Op::Add, DType::f32},
                      {"Scale f32", Op::Scale, DType::f32},
                      {"LayerNorm f32", Op::LayerNorm, DType::f32},
                      {"Silu f32", Op::Silu, DType::f32},
                      {"Softmax f32", Op::Softmax, DType::f32},
                      {"Silu bf16", Op::Silu, DType::bf16}};
  for (const Row& r : rows) {
    auto ob = make_bench(r.op, r.dt);
    ob->kernel->run(ob->inputs, ob->outputs, pool());
    double best_op = 1e30, best_stream = 1e30;
    for (int i = 0; i < kRounds; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      ob->kernel->run(ob->inputs, ob->outputs, pool());
      best_op = std::min(
          best_op, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      best_stream = std::min(best_stream, stream.pass_seconds(true));
    }
    const double op_gbps = double(ob->bytes) / best_op / 1e9;
    const double st_gbps = stream.bytes_moved() / best_stream / 1e9;
    const double ratio = op_gbps / st_gbps;
    std::printf("  %-16s %10.1f %12.1f %7.1f%%%s\n", r.name, op_gbps, st_gbps, 100.0 * ratio,
                ratio >= 0.7 ? "" : "  (below the 70% target)");
  }
}

}  // namespace
}  // namespace ubfuse

int main(int argc, char** argv) {
  ubfuse::reexec_with_passive_omp_wait(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  const char* r = std::getenv("UBFUSE_BENCH_RATIOS");
  if (!r || std::string(r) != "0") ubfuse::print_ratios();
  benchmark::Shutdown();
  return 0;
}
