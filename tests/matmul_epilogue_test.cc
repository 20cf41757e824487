// MatMul epilogue groups in row blocks: every block size (one block, several with a short last
// one) gives the reference's answer in both engines, the trace says how the product was split,
// and the automatic block follows the oneDNN kernel (kernels that repack the weights on every
// call get larger blocks).
#include "codegen/matmul_epilogue.h"

#include <gtest/gtest.h>

#include "kernels/cpu/matmul_info.h"
#include "kernels/cpu/op_kernel.h"
#include "profiler_test_util.h"
#include "ubfuse/profiler.h"

namespace ubfuse {
namespace {

using namespace ubfuse::testing;

// y = gelu(x @ W + bias) + res over [2, rows / 2, N]; with `raw` the product is an output too
// (its blocks are then written into that output, not into scratch).
Graph projection(DType t, int64_t rows, int64_t K, int64_t N, bool raw) {
  GraphBuilder b;
  auto x = b.input("x", t, {"batch", rows / 2, K});
  auto w = b.constant(Tensor::random(t, {K, N}, 7, -0.2, 0.2), "w");
  auto bias = b.input("bias", t, {N});
  auto res = b.input("res", t, {"batch", rows / 2, N});
  auto mm = b.matmul(x, w);
  b.output("y", b.add(b.gelu(b.add(mm, bias)), res));
  if (raw) b.output("mm", mm);
  return b.build();
}

std::map<std::string, Tensor> projection_inputs(DType t, int64_t rows, int64_t K, int64_t N) {
  return {{"x", Tensor::random(t, {2, rows / 2, K}, 1)},
          {"bias", Tensor::random(t, {N}, 2)},
          {"res", Tensor::random(t, {2, rows / 2, N}, 3)}};
}

// Runs the model once under a profiler; returns the variant its one kernel event reports.
std::string variant_ran(const CompiledModel& m, const std::map<std::string, Tensor>& in,
                        const std::string& tag) {
  fixed_bandwidth();  // no STREAM measurement inside the test
  Profiler prof({.trace_dir = temp_dir(tag), .name = tag});
  auto out = m.run(in);
  prof.stop();
  auto trace = nlohmann::json::parse(prof.trace_json());
  std::string v;
  int kernels = 0;
  for (auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "kernel") continue;
    kernels++;
    v = e["args"]["variant"];
  }
  EXPECT_EQ(kernels, 1) << trace.dump();
  return v;
}

TEST(MatMulEpilogue, EveryBlockingMatchesTheReference) {
  const int64_t rows = 600, K = 64, N = 2100;
  for (const char* engine : {"cpp", "interpreter"}) {
    for (DType t : {DType::f32, DType::bf16}) {
      for (bool raw : {false, true}) {
        Graph g = projection(t, rows, K, N, raw);
        auto in = projection_inputs(t, rows, K, N);
        auto want = ref::run_graph(g, in);
        // 1 byte: blocks of kEpilogueMinBlockRows (256, 256, then 88 rows); 0: one block here.
        for (const char* block : {"1", "0"}) {
          Options o = engine_opts(engine);
          o["matmul_block_bytes"] = block;
          CompiledModel m = compile(g, o);
          ASSERT_EQ(m.kernels().size(), 1u) << m.kernels()[0].name;
          const std::string where = std::string(engine) + " " + std::string(dtype_name(t)) +
                                    (raw ? " raw" : "") + " block " + block;
          auto out = m.run(in);
          EXPECT_TRUE(close_to_ref(out.at("y"), want.at("y"), t == DType::bf16 ? 2 : 1)) << where;
          if (raw) {
            EXPECT_TRUE(close_to_ref(out.at("mm"), want.at("mm"))) << where;
          }
          const std::string v = variant_ran(m, in, "mme_blocks");
          const std::string want_v =
              std::string(engine == std::string("cpp") ? "codegen" : "interpreter") +
              (block[0] == '1' ? ", 3 blocks of 256 rows, " : ", 1 block of 600 rows, ");
          EXPECT_EQ(v.rfind(want_v, 0), 0u) << where << ": " << v;
        }
      }
    }
  }
}

// A product split by rows over two threads: each part's thread runs the epilogue on its rows, and
// rows past whole 16-row parts (514 = 2 x 256 + 2) after them on the caller. The 512 rows before
// that tail would be split by columns on their own (512 x 512 x 512 multiply-adds is the bound),
// which has no whole rows per part: the tail's recursion stays split by rows.
TEST(MatMulEpilogue, EachPartRunsTheEpilogueOfItsRows) {
  const int64_t K = 512, N = 512;
  for (int64_t rows : {int64_t(514), int64_t(600)}) {
    Graph g = projection(DType::f32, rows, K, N, false);
    auto in = projection_inputs(DType::f32, rows, K, N);
    Options o = graph_opts();
    o["num_threads"] = "2";
    CompiledModel m = compile(g, o);
    ASSERT_EQ(m.kernels().size(), 1u);
    EXPECT_TRUE(close_to_ref(m.run(in).at("y"), ref::run_graph(g, in).at("y"))) << rows;
    const std::string v = variant_ran(m, in, "mme_parts");
    if (v.find(" split by rows over 2 threads") != std::string::npos) {
      EXPECT_NE(v.find(", epilogue on each part's thread"), std::string::npos) << v;
    }
  }
}

// The blocks hold whole rows, so a norm after the residual add sees each row once, complete.
TEST(MatMulEpilogue, RowReductionsAcrossBlocks) {
  for (DType t : {DType::f32, DType::bf16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {"batch", 350, 48});
    auto w = b.constant(Tensor::random(t, {48, 1031}, 7, -0.2, 0.2), "w");
    auto lw = b.constant(Tensor::random(t, {1031}, 9), "lw");
    auto res = b.input("res", t, {"batch", 350, 1031});
    b.output("y", b.rms_norm(b.add(b.matmul(x, w), res), lw, 1e-6));
    Graph g = b.build();
    Options o = graph_opts();
    o["matmul_block_bytes"] = "1";
    CompiledModel m = compile(g, o);
    ASSERT_EQ(m.kernels().size(), 1u);
    std::map<std::string, Tensor> in = {{"x", Tensor::random(t, {2, 350, 48}, 1)},
                                        {"res", Tensor::random(t, {2, 350, 1031}, 3)}};
    EXPECT_TRUE(
        close_to_ref(m.run(in).at("y"), ref::run_graph(g, in).at("y"), t == DType::bf16 ? 2 : 1));
    EXPECT_EQ(variant_ran(m, in, "mme_rows").rfind("codegen, 3 blocks of 256 rows, ", 0), 0u);
  }
}

// A product of 9.2 MB (1100 x 2100 f32): over kEpilogueBlockBytes, under kRepackingBlockBytes.
// The automatic block is one call where oneDNN's kernel repacks the weights on every call, else
// 992-row blocks; the trace names the kernel that decided it and how a block runs.
TEST(MatMulEpilogue, AutomaticBlockFollowsTheOneDnnKernel) {
  const int64_t rows = 1100, K = 64, N = 2100;
  Graph g = projection(DType::f32, rows, K, N, false);
  const Node* mm = nullptr;
  for (const Node* n : g.topo_order()) {
    if (n->op == OpKind::MatMul) mm = n;
  }
  ASSERT_NE(mm, nullptr);
  auto k = cpu::make_op_kernel(*mm);
  const cpu::MatMulCallInfo info = cpu::matmul_call_info(*k, {rows, K}, {K, N}, DType::f32);
  ASSERT_FALSE(info.impl.empty());
  EXPECT_EQ(info.repacks_weights, info.impl.rfind("gemm:", 0) == 0) << info.impl;
  CompiledModel m = compile(g, graph_opts());
  const std::string v = variant_ran(m, projection_inputs(DType::f32, rows, K, N), "mme_auto");
  const std::string want =
      info.repacks_weights ? "codegen, 1 block of 1100 rows, " : "codegen, 2 blocks of 992 rows, ";
  // The kernel each block runs on the model's pool (split over it where that applies: split by
  // rows, each part's thread then runs the epilogue on its rows).
  const int64_t block = info.repacks_weights ? rows : 992;
  const std::string impl =
      cpu::matmul_call_info(*k, {block, K}, {K, N}, DType::f32, m.num_threads()).impl;
  const bool per_part = impl.find(" split by rows") != std::string::npos;
  EXPECT_EQ(v, want + impl + (per_part ? ", epilogue on each part's thread" : ""));
  // Sizes that do not multiply are an error naming the node, not a crash.
  EXPECT_TRUE(throws_with(
      [&] {
        cpu::matmul_call_info(*k, {rows, K + 1}, {K, N}, DType::f32);
      },
      {"MatMul", "inner dims differ"}));
}

TEST(MatMulEpilogue, BlockOptionRejectsBadValues) {
  Graph g = projection(DType::f32, 4, 8, 8, false);
  for (const char* v : {"-1", "big", "", "1.5"}) {
    EXPECT_TRUE(throws_with(
        [&] {
          compile(g, {{"matmul_block_bytes", v}});
        },
        {"option 'matmul_block_bytes': bad value", "valid: an integer"}))
        << v;
  }
}

}  // namespace
}  // namespace ubfuse
