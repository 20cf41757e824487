// Skewed column loops (codegen/loop_plan.h): which passes run their early stage a step ahead, what
// they carry, and that the rendered loops agree with the reference at widths around the 2-vector
// step (the prologue, the last pair without a next one, the single vector and the masked tail).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/loop_plan.h"
#include "fused_kernel_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::generated_code;
using testing::seed_block;
using testing::whole_graph_group;

struct Lowered {
  std::unique_ptr<kir::Program> p;
  kir::Schedule ub;
};
Lowered lower(const Graph& g) {
  FusedGroup fg = whole_graph_group(g);
  std::string why;
  Lowered l;
  l.p = kir::lower_group(fg, &why);
  EXPECT_TRUE(l.p) << why;
  if (l.p) l.ub = kir::schedule(*l.p, true);
  return l;
}

// The ops of the carried values, in order.
std::vector<std::string> carried_ops(const kir::Program& p, const cpp::StepStages& st) {
  std::vector<std::string> ops;
  for (int e : st.carried) ops.push_back(kir::op_str(p.exprs[size_t(e)].op));
  return ops;
}

TEST(LoopPlan, SeedBlockCarriesLayerNormsOutputIntoSilu) {
  const Lowered l = lower(seed_block({"rows", 4096}, DType::f32));
  ASSERT_TRUE(l.p);
  ASSERT_EQ(l.ub.phases.size(), 2u);
  // Pass 0 (x + r, the row statistics) has nothing expensive: not skewed.
  EXPECT_FALSE(cpp::step_stages(*l.p, l.ub.phases[0]).skewed());
  // Pass 1: the affine LayerNorm output, w * n + b, is what SiLU waits on.
  const cpp::StepStages st = cpp::step_stages(*l.p, l.ub.phases[1]);
  ASSERT_TRUE(st.skewed());
  EXPECT_EQ(carried_ops(*l.p, st), std::vector<std::string>{"muladd"});
  for (int e : l.ub.phases[1].compute) {
    const bool silu = l.p->exprs[size_t(e)].op == kir::Op::Silu;
    EXPECT_EQ(bool(st.late[size_t(e)]), silu) << kir::op_str(l.p->exprs[size_t(e)].op);
  }
}

TEST(LoopPlan, OnlyLoadsBeforeTheExpensiveOpIsNotSkewed) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"rows", 64});
  b.output("y", b.silu(x));
  const Lowered l = lower(b.build());
  ASSERT_TRUE(l.p);
  EXPECT_FALSE(cpp::step_stages(*l.p, l.ub.phases[0]).skewed());
  // Two expensive ops in a chain: the second is late because the first is; exp's operand, a
  // sum, is carried.
  GraphBuilder c;
  auto u = c.input("u", DType::f32, {"rows", 64});
  auto v = c.input("v", DType::f32, {"rows", 64});
  c.output("y", c.sigmoid(c.exp(c.add(u, v))));
  const Lowered m = lower(c.build());
  ASSERT_TRUE(m.p);
  const cpp::StepStages st = cpp::step_stages(*m.p, m.ub.phases[0]);
  EXPECT_EQ(carried_ops(*m.p, st), std::vector<std::string>{"add"});
}

// Sets UBFUSE_CODEGEN_SKEW for a scope ("" unsets it).
struct SkewEnv : testing::ScopedEnv {
  explicit SkewEnv(const char* v) : ScopedEnv("UBFUSE_CODEGEN_SKEW", v) {}
};

TEST(LoopPlan, AvxFiveTwelveSkewsOnlyKernelsWithNarrowColumns) {
  SkewEnv unset("");
  const Lowered f32 = lower(seed_block({"rows", 4096}, DType::f32));
  const Lowered bf16 = lower(seed_block({"rows", 4096}, DType::bf16));
  const Lowered f16 = lower(seed_block({"rows", 4096}, DType::f16));
  ASSERT_TRUE(f32.p && bf16.p && f16.p);
  EXPECT_TRUE(cpp::skew_loops(*f32.p, false));  // AVX2: every kernel
  EXPECT_FALSE(cpp::skew_loops(*f32.p, true));
  EXPECT_TRUE(cpp::skew_loops(*bf16.p, true));
  EXPECT_TRUE(cpp::skew_loops(*f16.p, true));
  // One narrow column is enough: an f32 block writing bf16.
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"rows", 64});
  auto r = b.input("r", DType::f32, {"rows", 64});
  b.output("y", b.cast(b.silu(b.mul(b.add(x, r), x)), DType::bf16));
  const Lowered mixed = lower(b.build());
  ASSERT_TRUE(mixed.p);
  EXPECT_TRUE(cpp::skew_loops(*mixed.p, true));
  // Not skewed, the plan keeps its stages and carries nothing.
  const cpp::StepStages st = cpp::step_stages(*f32.p, f32.ub.phases[1], false);
  EXPECT_FALSE(st.skewed());
  EXPECT_EQ(st.late, cpp::step_stages(*f32.p, f32.ub.phases[1]).late);
  {
    SkewEnv on("1");
    EXPECT_TRUE(cpp::skew_loops(*f32.p, true));
  }
  {
    SkewEnv off("0");
    EXPECT_FALSE(cpp::skew_loops(*bf16.p, false));
  }
  SkewEnv bad("yes");
  EXPECT_TRUE(testing::throws_with([&] { cpp::skew_loops(*f32.p, true); },
                                   {"UBFUSE_CODEGEN_SKEW: 'yes' is not 0 or 1"}));
}

TEST(LoopPlan, RenderedKernelsSkewOnlyWhereThePlanSays) {
  for (const char* env : {"", "0", "1"}) {
    SkewEnv skew(env);
    const Graph g = seed_block({"rows", 4096}, DType::f32);
    const Lowered l = lower(g);
    ASSERT_TRUE(l.p);
    const bool want = cpp::skew_loops(*l.p, cpp::native_avx512());
    EXPECT_EQ(want, *env ? *env == '1' : !cpp::native_avx512()) << env;
    const std::string seed = generated_code(g);
    EXPECT_EQ(seed.find("// skewed:") != std::string::npos, want) << env << "\n" << seed;
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {"rows", 64});
    b.output("y", b.silu(x));
    EXPECT_EQ(generated_code(b.build()).find("// skewed:"), std::string::npos) << env;
  }
}

// A skewed elementwise chain and the f32 seed block (its pipelined and one-row UB variants, and
// with ub_bytes 256 split kernels) through generated C++, at widths that end the unrolled loop in
// each way; 5 rows split unevenly over 2 threads. Skewed on every host here (the other fused
// kernel tests run the f32 block unskewed on AVX-512). The bf16 seed block at these widths is
// Bf16Lanes.ResultsKeepColumnOrderAtEveryWidth.
TEST(LoopPlan, SkewedLoopsMatchTheReferenceAtEveryWidth) {
  SkewEnv skew("1");  // skewed on every host, f32 included
  for (DType dt : {DType::f32, DType::bf16}) {
    for (int64_t cols : {1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 64, 65, 4097}) {
      GraphBuilder b;
      auto x = b.input("x", dt, {5, cols});
      auto r = b.input("r", dt, {5, cols});
      b.output("y", b.silu(b.mul(b.add(x, r), x)));
      const Graph chain = b.build();
      std::map<std::string, Tensor> in{{"x", Tensor::random(dt, {5, cols}, 1)},
                                       {"r", Tensor::random(dt, {5, cols}, 2)},
                                       {"residual", Tensor::random(dt, {5, cols}, 2)},
                                       {"w", Tensor::random(dt, {cols}, 3)},
                                       {"b", Tensor::random(dt, {cols}, 4)}};
      Options o = testing::graph_opts();
      o["codegen"] = "cpp";
      o["num_threads"] = "2";
      const std::string at = std::string(dtype_name(dt)) + " cols " + std::to_string(cols);
      EXPECT_EQ(compile(chain, o).kernels().size(), 1u) << at;
      EXPECT_TRUE(testing::matches_reference(chain, {{"x", in["x"]}, {"r", in["r"]}}, o)) << at;
      if (dt != DType::f32) continue;
      const Graph seed = seed_block({5, cols}, dt);
      std::map<std::string, Tensor> seed_in = in;
      seed_in.erase("r");
      EXPECT_EQ(compile(seed, o).kernels().size(), 1u) << at;
      EXPECT_TRUE(testing::matches_reference(seed, seed_in, o)) << at;
      o["ub_bytes"] = "256";
      EXPECT_TRUE(testing::matches_reference(seed, seed_in, o)) << at << " ub_bytes 256";
    }
  }
}

}  // namespace
}  // namespace ubfuse
