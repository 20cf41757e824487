// The LLaMA-style decoder layer exported by PyTorch (tests/models/export_layers.py --bench: hidden
// 2048, 16 heads, MLP 5632; batch 1, seq 512) in ubfuse graph and eager mode, f32 and bf16, with
// the time split between matmul kernels and memory-bound kernels; and the layer's matmuls called
// directly through oneDNN (the library ubfuse's MatMul uses), for the matmul-efficiency figure.
// bench/decoder_bench.py exports the models, runs PyTorch eager and prints the comparison.
//
//   build/bench_decoder_bench
//
// UBFUSE_DECODER_DIR names the folder of llama_decoder_2048_{f32,bf16}.onnx (default
// build/bench_models).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <oneapi/dnnl/dnnl.hpp>

#include "ubfuse/onnx.h"
#include "ubfuse/profiler.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse {
namespace {

constexpr int64_t kSeq = 512, kHidden = 2048, kHeads = 16, kMlp = 5632;

std::string model_path(const char* dtype) {
  const char* d = std::getenv("UBFUSE_DECODER_DIR");
  std::string dir = d && *d ? d : "build/bench_models";
  return dir + "/llama_decoder_2048_" + dtype + ".onnx";
}

struct Loaded {
  CompiledModel model;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, Tensor> outputs;
};

Loaded load(const char* dtype, bool fusion) {
  ImportOptions o;
  Graph g;
  try {
    g = import_onnx(model_path(dtype), o);
  } catch (const OnnxNeedsStaticDimsError&) {
    o.static_dims = {{"batch", 1}, {"seq", kSeq}};
    g = import_onnx(model_path(dtype), o);
  }
  Loaded l;
  l.model = compile(g, {{"ge.exec.enableOperatorFusion", fusion ? "1" : "0"}});
  DType dt = parse_dtype(dtype);
  l.inputs["hidden_states"] = Tensor::random(dt, {1, kSeq, kHidden}, 1);
  Tensor pos(DType::i64, {1, kSeq});
  for (int64_t i = 0; i < kSeq; i++) pos.data_as<int64_t>()[i] = i;
  l.inputs["position_ids"] = pos;
  l.outputs = l.model.run(l.inputs);
  return l;
}

// args: 0 eager / 1 graph; 0 f32 / 1 bf16
void BM_DecoderLayer(benchmark::State& state) {
  const bool fusion = state.range(0) == 1;
  const char* dtype = state.range(1) == 1 ? "bf16" : "f32";
  if (!std::filesystem::exists(model_path(dtype))) {
    state.SkipWithError(("no " + model_path(dtype) + "; run bench/decoder_bench.py").c_str());
    return;
  }
  Loaded l = load(dtype, fusion);
  for (auto _ : state) l.model.run_into(l.inputs, l.outputs);
  // The split: a few profiled runs after the timed ones.
  Profiler prof({.trace_dir = std::filesystem::temp_directory_path().string(),
                 .name = std::string("decoder_") + (fusion ? "graph_" : "eager_") + dtype,
                 .with_bandwidth = false});
  const int steps = 3;
  for (int i = 0; i < steps; i++) {
    l.model.run_into(l.inputs, l.outputs);
    prof.step();
  }
  prof.stop();
  double mm = 0, other = 0;
  for (auto& r : prof.summary().rows) {
    bool is_mm = std::find(r.ops.begin(), r.ops.end(), "MatMul") != r.ops.end();
    (is_mm ? mm : other) += r.total_us / 1e3 / steps;
  }
  state.counters["matmul_ms"] = mm;
  state.counters["memory_bound_ms"] = other;
  state.counters["kernels"] = double(l.model.kernels().size());
  state.SetLabel(std::string(fusion ? "graph " : "eager ") + dtype);
}
BENCHMARK(BM_DecoderLayer)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"graph", "bf16"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

// The layer's matmuls straight through oneDNN: weights prepacked (format any), primitives built
// once, f32 or bf16 (f32 accumulation). Shapes: q/k/v/o, gate/up, down, and attention's two
// batched products.
void BM_DecoderMatmulsOneDNN(benchmark::State& state) {
  using tag = dnnl::memory::format_tag;
  const auto dt =
      state.range(0) == 1 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  struct Mm {
    dnnl::memory::dims a, b, c;
    int count;
  };
  const int64_t hd = kHidden / kHeads;
  std::vector<Mm> shapes = {
      {{kSeq, kHidden}, {kHidden, kHidden}, {kSeq, kHidden}, 4},
      {{kSeq, kHidden}, {kHidden, kMlp}, {kSeq, kMlp}, 2},
      {{kSeq, kMlp}, {kMlp, kHidden}, {kSeq, kHidden}, 1},
      {{kHeads, kSeq, hd}, {kHeads, hd, kSeq}, {kHeads, kSeq, kSeq}, 1},
      {{kHeads, kSeq, kSeq}, {kHeads, kSeq, hd}, {kHeads, kSeq, hd}, 1},
  };
  struct Run {
    dnnl::matmul prim;
    dnnl::memory a, b, c;
    int count;
  };
  std::vector<Run> runs;
  for (auto& m : shapes) {
    bool batched = m.a.size() == 3;
    auto plain = batched ? tag::abc : tag::ab;
    dnnl::memory::desc ad(m.a, dt, plain), cd(m.c, dt, plain);
    dnnl::memory::desc bd(m.b, dt, batched ? tag::abc : tag::any);  // weights prepacked
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), eng);
    } catch (const dnnl::error&) {
      // No bf16 matmul on CPUs without AVX512_BF16/AMX (ubfuse's MatMul converts through f32).
      state.SkipWithError("oneDNN has no matmul for this dtype on this CPU");
      return;
    }
    Run r{dnnl::matmul(pd), dnnl::memory(ad, eng), dnnl::memory(pd.weights_desc(), eng),
          dnnl::memory(cd, eng), m.count};
    std::memset(r.a.get_data_handle(), 0, ad.get_size());
    std::memset(r.b.get_data_handle(), 0, pd.weights_desc().get_size());
    runs.push_back(std::move(r));
  }
  for (auto _ : state) {
    for (auto& r : runs) {
      for (int i = 0; i < r.count; i++) {
        r.prim.execute(s, {{DNNL_ARG_SRC, r.a}, {DNNL_ARG_WEIGHTS, r.b}, {DNNL_ARG_DST, r.c}});
      }
    }
    s.wait();
  }
  double flops = 0;
  for (auto& m : shapes) {
    double batch = m.a.size() == 3 ? double(m.a[0]) : 1.0;
    flops += 2.0 * batch * double(m.a[m.a.size() - 2]) * double(m.a.back()) * double(m.b.back()) *
             m.count;
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(state.range(0) == 1 ? "oneDNN bf16" : "oneDNN f32");
}
BENCHMARK(BM_DecoderMatmulsOneDNN)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("bf16")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

}  // namespace
}  // namespace ubfuse
BENCHMARK_MAIN();
