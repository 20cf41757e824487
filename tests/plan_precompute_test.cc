// Kernels whose inputs are all known to the plan (constants, shape values) run once while the
// plan is built (PlanSpec::run_step), and runs with that plan skip them.
#include <atomic>
#include <cmath>

#include "plan/plan.h"
#include "test_util.h"

namespace ubfuse {
namespace {

// y = x + cos(2 * ConstantOfShape(Shape(x), 0.5)): everything but the Add depends on x's sizes
// alone.
Graph lengths_only_chain() {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"seq", 8});
  auto c = b.constant_of_shape(b.shape_of(x), Tensor::from_floats(DType::f32, {1}, {0.5f}));
  b.output("y", b.add(x, b.cos(b.mul(c, 2.0))));
  return b.build();
}

void expect_x_plus_cos1(const Tensor& x, const Tensor& y) {
  ASSERT_EQ(y.sizes(), x.sizes());
  for (int64_t i = 0; i < y.numel(); i++) {
    ASSERT_NEAR(y.get(i), x.get(i) + std::cos(1.0), 1e-6) << i;
  }
}

TEST(PlanPrecompute, KernelsOfLengthsAloneRunOncePerPlan) {
  Graph g = lengths_only_chain();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    const int kernels = int(m.kernels().size());
    for (int64_t seq : {3, 5, 3, 1}) {
      Tensor x = Tensor::random(DType::f32, {seq, 8}, uint64_t(seq));
      RunStats st;
      auto y = m.run({{"x", x}}, &st).at("y");
      expect_x_plus_cos1(x, y);
      EXPECT_EQ(st.kernels_launched + st.kernels_precomputed, kernels);
      // The Add reads x: it always runs. In eager mode ConstantOfShape, Mul and Cos are three
      // kernels the plan ran; graph mode may fuse some of them into the Add.
      EXPECT_GE(st.kernels_launched, 1);
      if (kernels == 4) {
        EXPECT_EQ(st.kernels_precomputed, 3);
      }
    }
    EXPECT_EQ(m.stats().plan_builds, 3);  // seq 3, 5, 1; the second 3 reuses its plan
  }
}

TEST(PlanPrecompute, OutputsPastTheBudgetRunPerCall) {
  CompiledModel m = compile(lengths_only_chain(), testing::eager_opts());
  ASSERT_EQ(m.kernels().size(), 4u);
  // [seq, 8] f32 is 32 * seq bytes: the outputs of ConstantOfShape, the Mul and the Cos fit under
  // kPrecomputeBytes at seq 16, none at seq 16384 (512 KiB each).
  static_assert(PlanSpec::kPrecomputeBytes < 16384 * 32);
  for (int64_t seq : {16, 16384}) {
    Tensor x = Tensor::random(DType::f32, {seq, 8}, 7);
    RunStats st;
    auto y = m.run({{"x", x}}, &st).at("y");
    expect_x_plus_cos1(x, y);
    EXPECT_EQ(st.kernels_precomputed, seq == 16 ? 3 : 0) << seq;
    EXPECT_EQ(st.kernels_launched, seq == 16 ? 1 : 4) << seq;
  }
}

TEST(PlanPrecompute, HostCallbacksRunOnEveryCall) {
  std::atomic<int> calls{0};
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"seq", 4});
  auto c = b.constant(Tensor::from_floats(DType::f32, {4}, {1, 2, 3, 4}));
  auto h = b.host(c, [&calls](Tensor& t) {
    calls++;
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, t.get(i) * 10);
  });
  b.output("y", b.add(x, h));
  Graph g = b.build();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    calls = 0;
    for (int run = 0; run < 3; run++) {
      Tensor x = Tensor::zeros(DType::f32, {2, 4});
      RunStats st;
      auto y = m.run({{"x", x}}, &st).at("y");
      for (int64_t i = 0; i < y.numel(); i++) ASSERT_EQ(y.get(i), 10.0 * double(i % 4 + 1));
      EXPECT_EQ(st.kernels_precomputed, 0);
    }
    EXPECT_EQ(calls, 3);
  }
}

}  // namespace
}  // namespace ubfuse
