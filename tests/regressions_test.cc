// One test per bug found by fuzzing (scripts/fuzz.sh) or by the sanitizer runs: the input that
// found it, reduced, and the behaviour now expected. Each names the fuzz target it came from.
#include <fstream>
#include <sstream>

#include "fusion/rules.h"
#include "test_util.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::throws_with;

// fuzz_graph, crash-b03e27f7: a symbolic dim broadcast against a fixed one ([38] < [rows]) passes
// shape inference; bound to 6 at run time the sizes no longer broadcast. The reference kernels
// dereferenced the empty std::optional from broadcast_shapes (std::bad_variant_access, UB); they
// now throw ubfuse::Error like the executor does.
TEST(Regressions, SymbolBoundAgainstFixedDimDoesNotBroadcast) {
  GraphBuilder b;
  auto x = b.input("x0", bf16, {"rows", 38});
  auto col = b.input("col", bf16, {38});
  auto row_max = b.reduce_max(x, /*keepdims=*/false);  // bf16[rows]
  auto p = b.pow(col, 2.0);                            // bf16[38]
  b.output("y", b.where(b.less(p, row_max), p, row_max));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x0", Tensor::random(bf16, {6, 38}, 1)},
                                   {"col", Tensor::random(bf16, {38}, 2)}};
  EXPECT_TRUE(throws_with([&] { ref::run_graph(g, in); }, {"do not broadcast", "[6]"}));
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Options o = opts;
    o["codegen"] = "interpreter";
    EXPECT_THROW(compile(g, o).run(in), Error);
  }
  // Bound to 38 (or 1) it is a valid graph.
  in["x0"] = Tensor::random(bf16, {38, 38}, 1);
  EXPECT_NO_THROW(ref::run_graph(g, in));
}

// fuzz_rules, number overflow: a JSON number too big for a double ('0.5e1777...') makes
// nlohmann::json throw out_of_range (406), not parse_error; it escaped parse_fusion_rules as a
// foreign exception. Every nlohmann exception is now a rules-file error.
TEST(Regressions, RulesFileNumberOverflowIsAnError) {
  EXPECT_TRUE(throws_with(
      [] {
        parse_fusion_rules("{\"Switch\": 0.5e17777777777777000000015105683216109345906}", "r.json");
      },
      {"fusion rules file r.json: not valid JSON", "number overflow"}));
}

// fuzz_graph, crash-b564c1e5: Greater(transpose(x1) : [44, rows], col : [44]) is
// inferred as [44, 44], i.e. rows is 44 or 1. With rows = 1 the reference and eager mode broadcast
// fine, but the fused group (FusedGreaterWhere) was planned for a full [44, 44] operand and
// rejects it at run time: "input 'transpose0' [44,1] has rows of 1 but the domain [44,44] has
// 44". The partitioner now keeps such an operand out of the group with a DynamicShape decision.
TEST(Regressions, SymbolicDimBroadcastingAtRunTimeInAFusedGroup) {
  GraphBuilder b;
  b.input("x0", bf16, {"rows", 44});
  auto x1 = b.input("x1", bf16, {"rows", 44});
  auto col = b.input("col", bf16, {44});
  auto t = b.transpose(x1, {1, 0});
  b.output("y", b.where(b.greater(t, col), t, col));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x0", Tensor::random(bf16, {1, 44}, 1)},
                                   {"x1", Tensor::random(bf16, {1, 44}, 2)},
                                   {"col", Tensor::random(bf16, {44}, 3)}};
  Options o = testing::graph_opts();
  o["codegen"] = "interpreter";
  EXPECT_TRUE(testing::matches_reference(g, in, o));
  EXPECT_TRUE(testing::matches_reference(g, in, testing::eager_opts()));
  bool recorded = false;
  std::string msgs;
  CompiledModel m = compile(g, o);
  for (auto& d : m.decisions()) {
    recorded |= d.reason == FusionReason::DynamicShape &&
                d.message.find("'transpose0' [44,rows]") != std::string::npos;
    msgs += d.message + "\n";
  }
  EXPECT_TRUE(recorded) << msgs;
}

// fuzz_graph, crash-f474a65a: ReduceMax over a row holding NaN gives -Inf (a row of
// only NaN) or the largest number in eager mode; the reference, numpy and PyTorch give NaN.
// Highway's Max (x86 vmaxps) returns one operand when the other is NaN, so RowMax in
// src/kernels/cpu/loops-inl.h dropped it; it now uses the NaN-aware MaxF.
TEST(Regressions, ReduceMaxPropagatesNaN) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 5});
  b.output("y", b.reduce_max(b.rsqrt(x), false));
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(f32, {2, 5}, {-1, -1, -1, -1, -1, 4, 1, -1, 4, 4});
  auto y = compile(g, testing::eager_opts()).run({{"x", xv}}).at("y");
  EXPECT_TRUE(std::isnan(y.get(0))) << y.get(0);
  EXPECT_TRUE(std::isnan(y.get(1))) << y.get(1);
}

// fuzz_options, crash-1e3f1e4c: a gear "ge.dynamic_dims=48585;48585;255555555555552770" made the
// planner multiply sizes past int64 (UBSan: signed overflow in memory_plan.cc). Sizes are now
// checked: a plan whose tensor would pass 2^48 bytes is an error naming the value and binding.
TEST(Regressions, HugeGearIsAnErrorNotAnOverflow) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 16});
  auto r = b.input("r", f32, {"batch", 16});
  b.output("y", b.silu(b.add(x, r)));
  Graph g = b.build();
  Options o = testing::graph_opts();
  o["ge.dynamic_dims"] = "48585;48585;255555555555552770";
  EXPECT_TRUE(throws_with([&] { compile(g, o); },
                          {"'x' [batch,16]", "batch=255555555555552770", "2^48 bytes", "hint"}));
}

// fuzz_graph, crash-fa2e724a: exp(exp(exp(x))) in bf16 gave 1.65e38 in graph mode where the
// reference overflows to inf: the bf16-grade exp clamped its argument at 88 (e^88 = 1.65e38)
// instead of letting the scaling overflow past 88.72, and returned e^-87 for anything smaller.
TEST(Regressions, Bf16GradeExpOverflowsAndUnderflowsLikeExp) {
  GraphBuilder b;
  auto x = b.input("x", bf16, {2, 5});
  b.output("y", b.exp(b.exp(x)));
  b.output("s", b.silu(x));
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(
      bf16, {2, 5}, {4.5f, 4.6f, 5.0f, -200.0f, 1.0f, 2.0f, 0.0f, -1000.0f, 90.0f, -90.0f});
  for (const char* engine : {"cpp", "interpreter"}) {
    Options o = testing::graph_opts();
    o["codegen"] = engine;
    EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, o)) << engine;
    Tensor y = compile(g, o).run({{"x", xv}}).at("y");
    EXPECT_TRUE(std::isinf(y.get(2))) << engine << " " << y.get(2);  // e^(e^5) = e^148
    EXPECT_EQ(y.get(3), 1.0) << engine;                              // e^(e^-200) = e^0
  }
  EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, testing::eager_opts()));
}

// fuzz_graph, crash-389ba9a0 (seed 1): ReduceMean of a ReduceMean ([2,rows,1] reduced again over
// its last axis of 1) heap-overflowed kir::schedule: the inner mean is a row scalar, and the
// reduction of a row scalar was given a pass after the last one. A sum, mean or max over one
// element is that element; lowering now says so, and schedule() checks the pass bound loudly.
TEST(Regressions, ReductionOfARowScalarStaysInTheKernelsPasses) {
  GraphBuilder b;
  auto x = b.input("x0", f32, {2, "rows", 10});
  auto m0 = b.reduce_mean(x, true);   // [2,rows,1]
  auto m1 = b.reduce_mean(m0, true);  // over one element
  auto m2 = b.reduce_max(m1, true);
  auto s = b.reduce_sum(b.exp(m2), true);
  b.output("y", b.reduce_mean(s, true));
  b.output("z", b.softmax(m1));  // exp(m - m) / 1 = 1
  Graph g = b.build();
  Tensor xv = Tensor::random(f32, {2, 4, 10}, 7);
  for (const char* engine : {"cpp", "interpreter"}) {
    for (const char* ub : {"1024", "65536"}) {
      Options o = testing::graph_opts();
      o["codegen"] = engine;
      o["ub_bytes"] = ub;
      EXPECT_TRUE(testing::matches_reference(g, {{"x0", xv}}, o)) << engine << " " << ub;
      CompiledModel m = compile(g, o);
      // mean(x) apart (another domain), the chain over [2,rows,1] in one kernel, and the
      // softmax apart: the chain is at the limit of 4 reductions per group.
      ASSERT_EQ(m.kernels().size(), 3u) << engine << " " << ub;
      EXPECT_EQ(m.kernels()[1].name, "FusedReduceMeanReduceMaxExpReduceSumReduceMean");
      EXPECT_EQ(m.run({{"x0", xv}}).at("z").get(3), 1.0);
    }
  }
  EXPECT_TRUE(testing::matches_reference(g, {{"x0", xv}}, testing::eager_opts()));
}

// fuzz_onnx, crash-c5cb5bf7 (seed 2): a Split whose input is a scalar (the backend test
// test_split_equal_parts_1d with its input's shape cut to rank 0). The importer's axis check let
// axis 0 pass for rank 0 and split() then read the shape's first dim: UBSan, reference binding
// to null. An axis on a scalar is now an error naming the node and the attribute.
TEST(Regressions, AxisOfAScalarIsAnImportError) {
  std::ifstream f(std::string(UBFUSE_SOURCE_DIR) +
                      "/fuzz/corpus/onnx/crash-c5cb5bf7c8958c22ed9f2df1e86028ee8914c5ee",
                  std::ios::binary);
  ASSERT_TRUE(f.good());
  std::stringstream bytes;
  bytes << f.rdbuf();
  EXPECT_TRUE(throws_with([&] { import_onnx_model_from_bytes(bytes.str()); },
                          {"Split", "axis 0: the input is a scalar, which has no axes"}));
}

// fuzz_graph, crash-23acbd1c (seed 3): rsqrt(sigmoid(x1 / x0)) gave 1.3e19 where the reference
// gives inf. sigmoid clamped x at -88 to keep 1 + e^-x finite, so every x below -88 gave
// e^-88 = 6e-39 instead of a smaller subnormal or 0. sigmoid is now 2^m / (2^m + e^-s), exact down
// to the subnormal results, and the bf16-grade form likewise.
TEST(Regressions, SigmoidIsAccurateWhereItsResultIsSubnormal) {
  GraphBuilder b;
  auto x = b.input("x", f32, {8});
  b.output("y", b.rsqrt(b.sigmoid(x)));
  b.output("s", b.sigmoid(x));
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(
      f32, {8}, {-88.5f, -95.0f, -103.0f, -104.5f, -200.0f, 87.5f, 200.0f, -1.0f});
  for (const char* engine : {"eager", "cpp", "interpreter"}) {
    const Options o = testing::engine_opts(engine);
    EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, o)) << engine;
    Tensor s = compile(g, o).run({{"x", xv}}).at("s");
    EXPECT_NEAR(s.get(1), std::exp(-95.0), 2e-45) << engine;  // a subnormal, not e^-88
    EXPECT_EQ(s.get(4), 0.0) << engine;
    EXPECT_EQ(s.get(6), 1.0) << engine;
  }
  // bf16 storage, where fused kernels use the bf16-grade sigmoid.
  GraphBuilder b16;
  auto x16 = b16.input("x", bf16, {8});
  b16.output("s", b16.mul(b16.sigmoid(x16), 1e30));
  Graph g16 = b16.build();
  Tensor x16v = Tensor::from_floats(
      bf16, {8}, {-88.5f, -95.0f, -103.0f, -104.5f, -200.0f, 87.5f, 200.0f, -1.0f});
  for (auto o : {testing::eager_opts(), testing::graph_opts()}) {
    EXPECT_TRUE(testing::matches_reference(g16, {{"x", x16v}}, o));
  }
}

// fuzz_graph, crash-62104fa3: x / gelu_tanh(1 / x) in bf16 gave inf in graph mode.
// The fused kernel (exact form: a Div follows) computed 0.5 x (1 + tanh(u)), which is 0 in f32 for
// x below about -5.5 (GELU(-8) is -3e-21), while eager bf16 used x sigmoid(2u). GeluTanhF is now
// x sigmoid(2u) too. Checked in f32 and bf16, eager and both graph engines.
TEST(Regressions, TanhGeluKeepsRelativeAccuracyForLargeNegativeX) {
  for (DType t : {f32, bf16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {6});
    b.output("q", b.div(x, b.gelu(x, "tanh")));  // 1 / sigmoid(2u): huge, finite
    b.output("g", b.gelu(x, "tanh"));
    Graph g = b.build();
    Tensor xv = Tensor::from_floats(t, {6}, {-8.0f, -6.5f, -5.0f, -3.0f, 0.5f, 4.0f});
    for (const char* engine : {"eager", "cpp", "interpreter"}) {
      const Options o = testing::engine_opts(engine);
      EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, o)) << engine << " " << dtype_name(t);
      const Tensor q = compile(g, o).run({{"x", xv}}).at("q");
      EXPECT_TRUE(std::isfinite(q.get(0))) << engine << " " << dtype_name(t);
    }
  }
}

// fuzz_graph, crash-3b4107d2: pow(row / (row - row), 0.5) in f16 gave NaN in eager
// mode where the reference (C's pow) gives +inf: the 0.5 fast path was sqrt, and sqrt(-inf) is
// NaN. Pow's fast and general paths now follow C at -inf and -0. All engines, f32 and f16.
TEST(Regressions, PowOfMinusInfinityFollowsC) {
  for (DType t : {f32, f16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {4});
    auto inf = b.div(x, b.sub(x, x));  // x / 0: +-inf, and NaN for x = 0
    auto zero = b.neg(b.sub(x, x));    // -0
    for (float e : {0.5f, 1.5f, -0.5f}) {
      b.output("inf^" + std::to_string(e), b.pow(inf, e));
      b.output("zero^" + std::to_string(e), b.pow(zero, e));
    }
    Graph g = b.build();
    Tensor xv = Tensor::from_floats(t, {4}, {-0.67f, 1.97f, 0.0f, -2.5f});
    for (const char* engine : {"eager", "cpp", "interpreter"}) {
      const Options o = testing::engine_opts(engine);
      EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, o)) << engine << " " << dtype_name(t);
    }
  }
}

// The fused half of crash-ca35a9b3, and fuzz_graph's seed-1 finding crash-7785d8ad (
// rms_norm(log(...) + 1e30) in bf16): fused LayerNorm and RMSNorm gave 0 where squares passed
// f32's range. LayerNorm now takes its statistics at 2^-k (k from the row's max |x|), RMSNorm
// keeps a second sum of squares at 2^-80 (codegen/lower.cc). Rows: ordinary; around 1e30; one
// value near FLT_MAX; a constant huge row (LayerNorm gives the bias, as the reference does).
TEST(Regressions, FusedNormsOfHugeValuesDoNotOverflow) {
  for (DType t : {f32, bf16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {4, 37});
    auto r = b.input("r", t, {4, 37});
    auto w = b.input("w", t, {37});
    auto bias = b.input("bias", t, {37});
    auto sum = b.add(x, r);
    b.output("ln", b.silu(b.layer_norm(sum, w, bias, 1e-5)));
    b.output("rms", b.rms_norm(sum, w, 1e-6));
    Graph g = b.build();
    Tensor xv = Tensor::random(t, {4, 37}, 3);
    for (int64_t c = 0; c < 37; c++) {
      xv.set(37 + c, xv.get(37 + c) * 1e30);
      xv.set(3 * 37 + c, 1e35);
    }
    xv.set(2 * 37 + 5, 3e38);
    std::map<std::string, Tensor> in{{"x", xv},
                                     {"r", Tensor::random(t, {4, 37}, 4)},
                                     {"w", Tensor::random(t, {37}, 5, 0.5, 1.5)},
                                     {"bias", Tensor::random(t, {37}, 6)}};
    for (int c = 0; c < 37; c++) in["r"].set(3 * 37 + c, 0);  // row 3 stays constant: 1e35
    Options codegen = testing::graph_opts(), interp = testing::graph_opts();
    interp["codegen"] = "interpreter";
    for (const Options& o : {codegen, interp}) {
      auto m = compile(g, o);
      EXPECT_EQ(m.kernels().size(), 1u) << dtype_name(t);
      EXPECT_TRUE(testing::matches_reference(g, in, o)) << dtype_name(t) << " " << o.at("codegen");
      // Row 3 is constant: LayerNorm gives the bias (silu of it here), RMSNorm gives w.
      auto got = m.run(in);
      const double bias2 = in.at("bias").get(2), w2 = in.at("w").get(2);
      EXPECT_NEAR(got.at("ln").get(3 * 37 + 2), bias2 / (1 + std::exp(-bias2)), 2e-2);
      EXPECT_NEAR(got.at("rms").get(3 * 37 + 2), w2, 2e-2 * w2);
    }
  }
}

// fuzz_graph, crash-ca35a9b3 (seed 5): rms_norm(col + 1e30) gave 0 in eager mode, where the
// reference gives 1: the sum of squares passed f32's range, so 1 / rms was 0. PyTorch's f32
// RMSNorm and LayerNorm overflow the same way. Eager LayerNorm and RMSNorm now redo such a row's
// statistics on x * 2^-k (k from the row's largest |x|); rows with Inf or NaN keep IEEE results.
// Fused kernels are fixed too (FusedNormsOfHugeValuesDoNotOverflow above).
TEST(Regressions, EagerNormsOfHugeValuesDoNotOverflow) {
  GraphBuilder b;
  auto x = b.input("x", f32, {3, 6});
  auto w = b.input("w", f32, {6});
  b.output("r", b.rms_norm(b.add(x, 1e30), w, 1e-6));
  b.output("l", b.layer_norm(b.mul(x, 1e30), w, w, 1e-5));
  b.output("small", b.layer_norm(x, nullptr, nullptr, 1e-5));  // rows not rescaled
  Graph g = b.build();
  Tensor xv = Tensor::random(f32, {3, 6}, 1);
  xv.set(13, 3e38);  // row 2: a value near FLT_MAX
  std::map<std::string, Tensor> in{{"x", xv}, {"w", Tensor::random(f32, {6}, 2, 0.5, 1.5)}};
  EXPECT_TRUE(testing::matches_reference(g, in, testing::eager_opts()));
  auto got = compile(g, testing::eager_opts()).run(in);
  EXPECT_NEAR(got.at("r").get(0), in.at("w").get(0), 1e-5);  // (1e30 + x) / rms = 1, times w
  // A row with an Inf: rms is Inf, finite values normalize to 0 and the Inf to NaN, as in IEEE.
  in["x"].set(0, std::numeric_limits<float>::infinity());
  auto inf_row = compile(g, testing::eager_opts()).run(in).at("r");
  EXPECT_TRUE(std::isnan(inf_row.get(0)));
  EXPECT_EQ(inf_row.get(1), 0.0);
}

}  // namespace
}  // namespace ubfuse
