// The seed block silu(layer_norm(x + residual, w, b)) in graph mode (one generated fused
// kernel) vs eager mode (three kernels) vs a hand-written fused loop with the same SiLU (f32,
// hand_seed-inl.h; "hand/graph" > 1 means graph mode is faster) vs the machine's STREAM add
// bandwidth, measured in one run. Prints times, GB/s (bytes = every input read once + the output
// written once) and ratios against STREAM add with non-temporal and with ordinary stores; then
// RoPE, a MatMul with its epilogue, bf16 against f32, and the fused kernel's in-cache rate against
// what DRAM feeds it.
//
//   bench_fusion_bench [--quick] [--interpreter] [--attention (only the attention cases)]
//
// Targets at (8, 2048, 4096) f32 on 2 cores: graph >= 2.3x eager, fused kernel >= 90% of the
// STREAM add bandwidth; bf16 storage >= 1.6x faster than f32.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hand_seed-inl.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hand_seed-inl.h"
// clang-format on
#include "hwy/cache_control.h"
#include "profiler/bandwidth.h"
#include "runtime/thread_pool.h"
#include "seed_block.h"
#include "ubfuse/ubfuse.h"
#include "util/omp_env.h"
#include "wall_time.h"

#if HWY_ONCE
namespace ubfuse {
HWY_EXPORT(HandSeedRows);
}  // namespace ubfuse
#endif

namespace ubfuse {
namespace {

using bench::best_seconds;
using bench::seconds;
using bench::seed_block;
using bench::seed_inputs;

// The hand-written seed block (hand_seed-inl.h) over the pool; f32, hidden a multiple of 32.
void hand_seed(const std::map<std::string, Tensor>& in, Tensor& y, ThreadPool& pool) {
  const int64_t cols = y.dim(-1), rows = y.numel() / cols;
  const bool stream = y.nbytes() >= (size_t(32) << 20);  // as the kernels' store policy
  const float* x = in.at("x").data_as<float>();
  const float* r = in.at("residual").data_as<float>();
  const float* w = in.at("w").data_as<float>();
  const float* b = in.at("b").data_as<float>();
  float* out = y.data_as<float>();
  pool.parallel_for(rows, 8, [&](int64_t r0, int64_t r1, int) {
    HWY_DYNAMIC_DISPATCH(HandSeedRows)(x, r, w, b, out, r0, r1, cols, stream);
  });
  if (stream) hwy::FlushStream();
}

struct Result {
  // add_s: STREAM add with non-temporal stores (the stricter yardstick, as the kernels store);
  // stream_s: with ordinary stores, as STREAM's C source compiles (its writes also pay a
  // read-for-ownership that its byte count leaves out).
  double graph_s = 1e30, eager_s = 1e30, interp_s = 1e30, add_s = 1e30, stream_s = 1e30;
  double hand_s = 1e30;    // the hand-written loop (f32 only)
  double hand_diff = 0.0;  // its largest difference from graph mode's output
  int64_t bytes = 0;
};

// Graph, eager (and the interpreter) and a STREAM add pass in turns, best of `reps` rounds
// each: the ratios hold on a machine shared with other work.
Result run_case(const Sizes& s, DType t, bool with_interp, int reps, StreamAdd& add) {
  Graph g = seed_block(t, s.back());
  std::map<std::string, Tensor> in = seed_inputs(t, s);
  std::map<std::string, Tensor> out = {{"y", Tensor::zeros(t, s)}};  // pre-faulted, reused
  Result r;
  for (auto& [n, x] : in) r.bytes += int64_t(x.nbytes());
  r.bytes += int64_t(out["y"].nbytes());
  CompiledModel graph = compile(g, {{"ge.exec.enableOperatorFusion", "1"}});
  CompiledModel eager = compile(g, {{"ge.exec.enableOperatorFusion", "0"}});
  CompiledModel interp =
      compile(g, {{"ge.exec.enableOperatorFusion", "1"}, {"codegen", "interpreter"}});
  graph.run_into(in, out);
  if (t == f32) {  // the yardstick computes the same thing
    Tensor h = Tensor::zeros(t, s);
    hand_seed(in, h, ThreadPool::global());
    for (int64_t i = 0; i < h.numel(); i++) {
      r.hand_diff = std::max(r.hand_diff, std::fabs(h.get(i) - out["y"].get(i)));
    }
  }
  eager.run_into(in, out);
  if (with_interp) interp.run_into(in, out);
  for (int i = 0; i < reps; i++) {
    r.graph_s = std::min(r.graph_s, seconds([&] { graph.run_into(in, out); }));
    r.eager_s = std::min(r.eager_s, seconds([&] { eager.run_into(in, out); }));
    if (with_interp) r.interp_s = std::min(r.interp_s, seconds([&] { interp.run_into(in, out); }));
    if (t == f32) {
      r.hand_s =
          std::min(r.hand_s, seconds([&] { hand_seed(in, out["y"], ThreadPool::global()); }));
    }
    r.add_s = std::min(r.add_s, add.pass_seconds(true));
    r.stream_s = std::min(r.stream_s, add.pass_seconds(false));
  }
  return r;
}

// The seed block's graph mode in f32 and in bf16, in alternating rounds: their ratio holds while
// the machine's load changes (the table's rows are measured minutes apart).
void bf16_vs_f32(const Sizes& s, int reps) {
  struct Side {
    CompiledModel m;
    std::map<std::string, Tensor> in, out;
    double best = 1e30;
  };
  auto side = [&](DType t) {
    Side d{compile(seed_block(t, s.back()), {{"ge.exec.enableOperatorFusion", "1"}}),
           seed_inputs(t, s),
           {{"y", Tensor::zeros(t, s)}}};
    d.m.run_into(d.in, d.out);
    return d;
  };
  Side f = side(f32), h = side(bf16);
  for (int i = 0; i < reps; i++) {
    f.best = std::min(f.best, seconds([&] { f.m.run_into(f.in, f.out); }));
    h.best = std::min(h.best, seconds([&] { h.m.run_into(h.in, h.out); }));
  }
  // The ratio is f32 time / bf16 time: above 1 bf16 is faster (the target is 1.6).
  std::printf("bf16 vs f32 at %s: graph %.3f vs %.3f ms, bf16 %.2fx the speed of f32%s\n",
              sizes_str(s).c_str(), h.best * 1e3, f.best * 1e3, f.best / h.best,
              f.best < h.best ? " (slower)" : "");
}

// The fused seed-block kernel's own speed, on data that stays in the caches ([1,256,4096]: 12 MiB
// in f32, in L3), against what DRAM can feed it (STREAM add bandwidth / bytes per element). When
// the first is not well above the second, the kernel is as much compute-bound as memory-bound,
// and its share of the STREAM add bandwidth depends on how well loads overlap the arithmetic.
void compute_ceiling(DType t, int reps, StreamAdd& add) {
  const Sizes s = {1, 256, 4096};
  CompiledModel graph = compile(seed_block(t, s.back()), {{"ge.exec.enableOperatorFusion", "1"}});
  std::map<std::string, Tensor> in = seed_inputs(t, s);
  std::map<std::string, Tensor> out = {{"y", Tensor::zeros(t, s)}};
  const double in_cache_s = best_seconds([&] { graph.run_into(in, out); }, reps);
  double add_s = 1e30;
  for (int i = 0; i < 5; i++) add_s = std::min(add_s, add.pass_seconds(true));
  const double elems = double(s[0] * s[1] * s[2]);
  const double bytes_per_elem = 3.0 * double(dtype_size(t));  // x, residual read; y written
  const double in_cache = elems / in_cache_s / 1e9;
  const double dram = add.bytes_moved() / add_s / 1e9 / bytes_per_elem;
  std::printf(
      "seed block %s, fused kernel on cache-resident data %s: %.2f G elements/s; DRAM feeds "
      "%.2f G elements/s (STREAM add / %.0f bytes): ceiling %.2fx the DRAM rate\n",
      std::string(dtype_name(t)).c_str(), sizes_str(s).c_str(), in_cache, dram, bytes_per_elem,
      in_cache / dram);
}

// x @ W + bias -> gelu -> + residual: the MatMul with its epilogue on cache-resident row blocks
// (graph) vs MatMul, Add, Gelu, Add as four kernels (eager).
void matmul_epilogue(DType t, int64_t M, int64_t K, int64_t N, int reps) {
  GraphBuilder b;
  auto x = b.input("x", t, {"batch", M, K});
  auto w = b.constant(Tensor::random(t, {K, N}, 7, -0.05, 0.05), "w");
  auto bias = b.input("bias", t, {N});
  auto res = b.input("res", t, {"batch", M, N});
  b.output("y", b.add(b.gelu(b.add(b.matmul(x, w), bias)), res));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(t, {1, M, K}, 1)},
                                      {"bias", Tensor::random(t, {N}, 2)},
                                      {"res", Tensor::random(t, {1, M, N}, 3)}};
  std::map<std::string, Tensor> out = {{"y", Tensor::zeros(t, {1, M, N})}};
  CompiledModel graph = compile(g, {{"ge.exec.enableOperatorFusion", "1"}});
  CompiledModel eager = compile(g, {{"ge.exec.enableOperatorFusion", "0"}});
  graph.run_into(in, out);
  eager.run_into(in, out);
  double gs = 1e30, es = 1e30;
  for (int i = 0; i < reps; i++) {
    gs = std::min(gs, seconds([&] { graph.run_into(in, out); }));
    es = std::min(es, seconds([&] { eager.run_into(in, out); }));
  }
  double flops = 2.0 * double(M) * double(K) * double(N);
  std::printf(
      "MatMul+bias+gelu+residual [%lld x %lld x %lld] %s: graph %.3f ms (%.0f GFLOP/s, "
      "%zu kernel), eager %.3f ms (%zu kernels): %.2fx\n",
      (long long)M, (long long)K, (long long)N, std::string(dtype_name(t)).c_str(), gs * 1e3,
      flops / gs / 1e9, graph.kernels().size(), es * 1e3, eager.kernels().size(), es / gs);
}

// RoPE as PyTorch exports it after the heads' transpose: q = transpose(proj, [0, 2, 1, 3]);
// q * cos + cat(-q[..., h:], q[..., :h]) * sin over LLaMA-7B's prefill shape. Graph mode (one
// kernel reading the projection once, through the transpose), eager mode (RotateHalf recovered:
// 5 kernels) and eager mode as exported (graph optimizer off: 8 kernels, the Transpose, Slices,
// Neg and Concat each a pass over memory), beside the STREAM add. Bytes: the projection, cos
// and sin read once, y written once.
void rope(DType t, int64_t seq, int64_t heads, int64_t d, int reps, StreamAdd& add) {
  GraphBuilder b;
  auto proj = b.input("proj", t, {"batch", "seq", heads, d});
  auto cos = b.input("cos", t, {1, 1, "seq", d});
  auto sin = b.input("sin", t, {1, 1, "seq", d});
  auto q = b.transpose(proj, {0, 2, 1, 3});
  auto rot =
      b.concat({b.neg(b.slice(q, {d / 2}, {INT64_MAX}, {-1})), b.slice(q, {0}, {d / 2}, {-1})}, -1);
  b.output("y", b.add(b.mul(q, cos), b.mul(rot, sin)));
  Graph g = b.build();
  const Sizes table = {1, 1, seq, d}, q_sizes = {1, heads, seq, d};
  std::map<std::string, Tensor> in = {{"proj", Tensor::random(t, {1, seq, heads, d}, 1)},
                                      {"cos", Tensor::random(t, table, 2)},
                                      {"sin", Tensor::random(t, table, 3)}};
  std::map<std::string, Tensor> out = {{"y", Tensor::zeros(t, q_sizes)}};
  double bytes = double(out["y"].nbytes());
  for (auto& [n, x] : in) bytes += double(x.nbytes());
  CompiledModel models[3] = {
      compile(g, {{"ge.exec.enableOperatorFusion", "1"}}),
      compile(g, {{"ge.exec.enableOperatorFusion", "0"}}),
      compile(g, {{"ge.exec.enableOperatorFusion", "0"}, {"ge.common_graph_optimizer", "0"}})};
  double best[3] = {1e30, 1e30, 1e30}, add_s = 1e30;
  for (auto& m : models) m.run_into(in, out);
  for (int i = 0; i < reps; i++) {
    for (int k = 0; k < 3; k++) {
      best[k] = std::min(best[k], seconds([&] { models[k].run_into(in, out); }));
    }
    add_s = std::min(add_s, add.pass_seconds(true));
  }
  const double add_gbps = add.bytes_moved() / add_s / 1e9, gbps = bytes / best[0] / 1e9;
  std::printf(
      "RoPE %s %s: graph %.3f ms (%zu kernel, %.1f GB/s, %.0f%% of STREAM add %.1f), eager %.3f ms "
      "(%zu kernels): %.2fx, eager as exported %.3f ms (%zu kernels): %.2fx\n",
      sizes_str(q_sizes).c_str(), std::string(dtype_name(t)).c_str(), best[0] * 1e3,
      models[0].kernels().size(), gbps, 100 * gbps / add_gbps, add_gbps, best[1] * 1e3,
      models[1].kernels().size(), best[1] / best[0], best[2] * 1e3, models[2].kernels().size(),
      best[2] / best[0]);
}

// Attention softmax(q k^T / sqrt(d) [+ causal mask]) v over [1, heads, seq, d]: graph mode (the
// flash-style kernel), graph mode with AttentionFusion off (the scores' MatMul with its softmax
// epilogue, then the second MatMul: what graph mode ran before) and eager mode (4-5 kernels),
// in alternating rounds. GFLOP/s count the two products (4 seq^2 d per head).
void attention(DType t, int64_t heads, int64_t seq, int64_t d, bool causal, int reps) {
  GraphBuilder b;
  auto q = b.input("q", t, {1, heads, "seq", d});
  auto kt = b.input("kt", t, {1, heads, d, "seq"});
  auto v = b.input("v", t, {1, heads, "seq", d});
  auto s = b.div(b.matmul(q, kt), std::sqrt(double(d)));
  if (causal) s = b.add(s, b.input("mask", t, {"seq", "seq"}));
  b.output("y", b.matmul(b.softmax(s), v));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"q", Tensor::random(t, {1, heads, seq, d}, 1)},
                                      {"kt", Tensor::random(t, {1, heads, d, seq}, 2)},
                                      {"v", Tensor::random(t, {1, heads, seq, d}, 3)}};
  if (causal) {
    Tensor m = Tensor::zeros(t, {seq, seq});
    for (int64_t i = 0; i < seq; i++) {
      for (int64_t j = i + 1; j < seq; j++) m.set(i * seq + j, -1e9);
    }
    in["mask"] = m;
  }
  std::map<std::string, Tensor> out = {{"y", Tensor::zeros(t, {1, heads, seq, d})}};
  const std::string rules =
      (std::filesystem::temp_directory_path() / "ubfuse_bench_attention_off.json").string();
  if (FILE* f = std::fopen(rules.c_str(), "w")) {
    std::fputs(R"({"Switch": {"UBFusion": {"AttentionFusion": "off"}}})", f);
    std::fclose(f);
  }
  CompiledModel models[3] = {
      compile(g, {{"ge.exec.enableOperatorFusion", "1"}}),
      compile(g, {{"ge.exec.enableOperatorFusion", "1"}, {"ge.fusionSwitchFile", rules}}),
      compile(g, {{"ge.exec.enableOperatorFusion", "0"}})};
  double best[3] = {1e30, 1e30, 1e30};
  for (auto& m : models) m.run_into(in, out);
  for (int i = 0; i < reps; i++) {
    for (int k = 0; k < 3; k++) {
      best[k] = std::min(best[k], seconds([&] { models[k].run_into(in, out); }));
    }
  }
  const double flops = 4.0 * double(heads) * double(seq) * double(seq) * double(d);
  std::printf(
      "Attention [1,%lld,%lld,%lld] %s%s: graph %.3f ms (%zu kernel, %.0f GFLOP/s), without "
      "AttentionFusion %.3f ms (%zu kernels): %.2fx, eager %.3f ms (%zu kernels): %.2fx\n",
      (long long)heads, (long long)seq, (long long)d, std::string(dtype_name(t)).c_str(),
      causal ? " causal" : "", best[0] * 1e3, models[0].kernels().size(), flops / best[0] / 1e9,
      best[1] * 1e3, models[1].kernels().size(), best[1] / best[0], best[2] * 1e3,
      models[2].kernels().size(), best[2] / best[0]);
}

void attention_cases(bool quick) {
  const int reps = quick ? 3 : 10;
  attention(f32, 8, 1300, 36, false, reps);  // the speech encoder's heads at 31 s of audio
  attention(f32, 16, 512, 64, true, reps);   // a LLaMA-style layer's prefill
  attention(bf16, 16, 512, 64, true, reps);
  if (!quick) attention(f32, 12, 2048, 64, false, reps);
}

int main_impl(int argc, char** argv) {
  bool quick = false, interp = false, only_attention = false;
  for (int i = 1; i < argc; i++) {
    quick = quick || std::strcmp(argv[i], "--quick") == 0;
    interp = interp || std::strcmp(argv[i], "--interpreter") == 0;
    only_attention = only_attention || std::strcmp(argv[i], "--attention") == 0;
  }
  if (only_attention) {
    attention_cases(quick);
    return 0;
  }
  ThreadPool& pool = ThreadPool::global();
  StreamAdd add(pool, size_t(256) << 20);
  std::printf(
      "threads %d; best of interleaved rounds (graph, eager%s, STREAM add over 256 MiB arrays "
      "with non-temporal stores (add) and with ordinary stores as in STREAM (stream))\n\n",
      pool.size(), interp ? ", interpreter" : "");
  std::printf("%-15s %-5s %9s %9s %8s %10s %9s %9s %11s %11s %9s %10s%s\n", "shape", "dtype",
              "graph ms", "eager ms", "speedup", "graph GB/s", "add GB/s", "% of add",
              "stream GB/s", "% of stream", "hand ms", "hand/graph", interp ? "  interp ms" : "");
  std::vector<std::pair<Sizes, DType>> cases = {{{1, 128, 4096}, f32},  {{1, 128, 4096}, bf16},
                                                {{2, 2048, 4096}, f32}, {{2, 2048, 4096}, bf16},
                                                {{8, 2048, 4096}, f32}, {{8, 2048, 4096}, bf16}};
  if (quick) cases.resize(4);
  for (auto& [s, t] : cases) {
    int reps = s[0] * s[1] <= 128 ? 200 : s[0] <= 2 ? 20 : 10;
    if (quick) reps = std::max(3, reps / 4);
    Result r = run_case(s, t, interp, reps, add);
    double gbps = double(r.bytes) / r.graph_s / 1e9;
    double add_gbps = add.bytes_moved() / r.add_s / 1e9;
    double stream_gbps = add.bytes_moved() / r.stream_s / 1e9;
    std::printf("%-15s %-5s %9.3f %9.3f %7.2fx %10.1f %9.1f %8.0f%% %11.1f %10.0f%%",
                sizes_str(s).c_str(), std::string(dtype_name(t)).c_str(), r.graph_s * 1e3,
                r.eager_s * 1e3, r.eager_s / r.graph_s, gbps, add_gbps, 100 * gbps / add_gbps,
                stream_gbps, 100 * gbps / stream_gbps);
    if (t == f32) {
      std::printf(" %9.3f %9.2fx", r.hand_s * 1e3, r.hand_s / r.graph_s);
      if (r.hand_diff > 1e-4) std::printf(" (hand loop differs by %.3g)", r.hand_diff);
    } else {
      std::printf(" %9s %10s", "-", "-");
    }
    if (interp) std::printf("  %9.3f", r.interp_s * 1e3);
    std::printf("\n");
  }
  std::printf("\n");
  for (DType t : {f32, bf16}) rope(t, 2048, 32, 128, quick ? 3 : 10, add);
  for (DType t : {f32, bf16}) matmul_epilogue(t, 2048, 2048, 4096, quick ? 3 : 10);
  attention_cases(quick);
  bf16_vs_f32({2, 2048, 4096}, quick ? 5 : 20);
  if (!quick) bf16_vs_f32({8, 2048, 4096}, 10);
  for (DType t : {f32, bf16}) compute_ceiling(t, quick ? 50 : 500, add);
  return 0;
}

}  // namespace
}  // namespace ubfuse

int main(int argc, char** argv) {
  ubfuse::reexec_with_passive_omp_wait(argv);
  return ubfuse::main_impl(argc, argv);
}
