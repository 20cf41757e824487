// One compiled model serves every batch and sequence length: same kernels, one compilation,
// plans built once per new shape and cached.
#include "test_util.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::throws_with;

Graph symbolic_seed(Dim hidden = 256) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", "seq", hidden});
  auto r = b.input("residual", f32, {"batch", "seq", hidden});
  Tensor w, bias;
  if (hidden.is_static()) {
    w = Tensor::random(f32, {hidden.value()}, 3, 0.5, 1.5);
    bias = Tensor::random(f32, {hidden.value()}, 4);
  }
  auto ln = hidden.is_static() ? b.layer_norm(b.add(x, r), b.constant(w), b.constant(bias))
                               : b.layer_norm(b.add(x, r), nullptr, nullptr);
  b.output("y", b.silu(ln));
  return b.build();
}

TEST(DynamicShapes, OneCompilationServesEveryShape) {
  Graph g = symbolic_seed();
  auto graph_model = compile(g, testing::graph_opts());
  auto eager_model = compile(g, testing::eager_opts());
  size_t kernels = graph_model.kernels().size();
  EXPECT_EQ(kernels, 1u);
  int shapes = 0;
  for (int64_t batch : {1, 3}) {
    for (int64_t seq : {1, 7, 128, 513, 2048}) {
      std::map<std::string, Tensor> in{
          {"x", Tensor::random(f32, {batch, seq, 256}, seq)},
          {"residual", Tensor::random(f32, {batch, seq, 256}, seq + 1)}};
      auto want = ref::run_graph(g, in);
      auto got = graph_model.run(in);
      auto eager = eager_model.run(in);
      EXPECT_TRUE(testing::close_to_ref(got.at("y"), want.at("y"))) << batch << "x" << seq;
      EXPECT_TRUE(testing::close_to_ref(eager.at("y"), want.at("y"))) << batch << "x" << seq;
      EXPECT_EQ(graph_model.kernels().size(), kernels);
      shapes++;
    }
  }
  CompileStats s = graph_model.stats();
  EXPECT_EQ(s.compilations, 1);
  EXPECT_EQ(s.plan_builds, shapes);
  // Running a seen shape again reuses its plan.
  graph_model.run({{"x", Tensor::random(f32, {3, 7, 256}, 1)},
                   {"residual", Tensor::random(f32, {3, 7, 256}, 2)}});
  EXPECT_EQ(graph_model.stats().plan_builds, shapes);
  EXPECT_GE(graph_model.stats().plan_cache_hits, 1);
}

// The exported LLaMA-style decoder layer (tests/models, dims batch and seq, hidden 64): one
// compiled model runs every batch and sequence length like eager mode does, with the same kernels
// and one compilation. Positions repeat modulo the model's 64 rotary positions; the causal mask
// follows them.
TEST(DynamicShapes, ExportedDecoderLayerServesEverySeq) {
  Graph g = import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/llama_decoder.onnx");
  auto graph_model = compile(g, testing::graph_opts());
  auto eager_model = compile(g, testing::eager_opts());
  const size_t kernels = graph_model.kernels().size();
  int shapes = 0;
  for (int64_t batch : {1, 3}) {
    for (int64_t seq : {1, 7, 128, 513, 2048}) {
      Tensor pos(i64, {batch, seq});
      for (int64_t i = 0; i < batch * seq; i++) pos.set(i, double((i % seq) % 64));
      std::map<std::string, Tensor> in{
          {"hidden_states", Tensor::random(f32, {batch, seq, 64}, uint64_t(seq + batch))},
          {"position_ids", pos}};
      auto got = graph_model.run(in).at("out");
      auto want = eager_model.run(in).at("out");
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_LT(ref::max_abs_diff(got, ref::from_tensor(want)), 1e-4) << batch << "x" << seq;
      EXPECT_EQ(graph_model.kernels().size(), kernels);
      shapes++;
    }
  }
  EXPECT_EQ(graph_model.stats().compilations, 1);
  EXPECT_EQ(graph_model.stats().plan_builds, shapes);
}

TEST(DynamicShapes, SymbolicRowLongerThanTheUbStillRuns) {
  Graph g = symbolic_seed(Dim("hidden"));
  auto m = compile(g, {{"ge.exec.enableOperatorFusion", "1"}, {"ub_bytes", "196608"}});
  EXPECT_EQ(m.kernels().size(), 1u);
  for (int64_t h : {64, 70000}) {  // 70000 floats = 280 KB per row > 192 KiB
    std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {2, 3, h}, 5)},
                                     {"residual", Tensor::random(f32, {2, 3, h}, 6)}};
    auto want = ref::run_graph(g, in);
    EXPECT_TRUE(testing::close_to_ref(m.run(in).at("y"), want.at("y"))) << h;
  }
}

TEST(DynamicShapes, GearsArePlannedAtCompileTime) {
  Graph g = symbolic_seed();
  auto m = compile(
      g, {{"ge.dynamicDims", "1,128;4,512"}, {"ge.inputShape", "x:-1,-1,256;residual:-1,-1,256"}});
  EXPECT_EQ(m.stats().plan_builds, 2);
  m.run({{"x", Tensor::random(f32, {4, 512, 256}, 1)},
         {"residual", Tensor::random(f32, {4, 512, 256}, 2)}});
  EXPECT_EQ(m.stats().plan_builds, 2);
  // Outside the gears still runs unless strict.
  m.run({{"x", Tensor::random(f32, {2, 5, 256}, 1)},
         {"residual", Tensor::random(f32, {2, 5, 256}, 2)}});
  EXPECT_EQ(m.stats().plan_builds, 3);
}

TEST(DynamicShapes, StrictGearsRejectOtherShapes) {
  Graph g = symbolic_seed();
  auto m = compile(g, {{"ge.dynamic_dims", "1,128;4,512"}, {"ge.dynamic_dims_strict", "1"}});
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", Tensor::random(f32, {2, 5, 256}, 1)},
               {"residual", Tensor::random(f32, {2, 5, 256}, 2)}});
      },
      {"batch=2, seq=5", "not one of the gears", "batch=1,seq=128; batch=4,seq=512"}));
  EXPECT_TRUE(throws_with(
      [&] {
        compile(g, {{"ge.dynamic_dims", "1,128,3"}});
      },
      {"gear '1,128,3' has 3 values", "2 dynamic dims (batch, seq)"}));
  EXPECT_TRUE(throws_with(
      [&] {
        compile(g, {{"ge.inputShape", "x:-1,-1,255"}, {"ge.dynamic_dims", "1,2"}});
      },
      {"ge.inputShape gives 255", "'x'"}));
}

TEST(DynamicShapes, MismatchedSymbolNamesBothInputs) {
  Graph g = symbolic_seed();
  auto m = compile(g, testing::graph_opts());
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", Tensor::random(f32, {2, 5, 256}, 1)},
               {"residual", Tensor::random(f32, {2, 6, 256}, 2)}});
      },
      {"symbol 'seq' is 5 in input 'x' dim 1 but 6 in input 'residual' dim 1"}));
}

}  // namespace
}  // namespace ubfuse
