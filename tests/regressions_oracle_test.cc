// Fuzz findings that were the oracle's, not the kernels': the references (ref::Rounding EveryOp,
// CastsOnly and KernelBoundaries, ref::Jitter) that scripts/fuzz.sh judges eager and graph mode by,
// and what each finding taught them. Kernel bugs found by fuzzing are in regressions_test.cc.
#include <cmath>

#include "kernels/reference/reference.h"
#include "test_util.h"

namespace ubfuse {
namespace {

// fuzz_graph, crash-e47e1e68 (seed 1): log(layer_norm(x)^3) in f16. Where x^3 falls below f16's
// smallest subnormal, eager mode (and the reference, rounding every op) gives log(0) = -inf; the
// fused kernel keeps x^3 in f32 and gives about -22.3. Both are right for their contract, so the
// fuzzers now also accept graph mode matching the reference that rounds only at casts.
TEST(Regressions, FusedKernelsKeepF16IntermediatesInF32) {
  GraphBuilder b;
  auto x = b.input("x", f16, {1, 4});
  auto y = b.log(b.pow(x, 3.0));
  b.output("y", y);
  b.output("c", b.cast(b.mul(b.cast(x, f32), 1e-4), f16));  // a cast to f16 still rounds
  Graph g = b.build();
  std::map<std::string, Tensor> in{
      {"x", Tensor::from_floats(f16, {1, 4}, {5.8e-4f, 0.5f, 2.0f, 0.1f})}};
  auto every_op = ref::run_graph(g, in);
  auto casts_only = ref::run_graph(g, in, ref::Rounding::CastsOnly);
  EXPECT_TRUE(std::isinf(every_op.at("y").data[0]));
  EXPECT_NEAR(casts_only.at("y").data[0], 3 * std::log(double(f16_to_f32(f32_to_f16(5.8e-4f)))),
              1e-9);
  EXPECT_EQ(casts_only.at("c").data[0], every_op.at("c").data[0]);  // both round at the cast
  EXPECT_NE(casts_only.at("c").data[0], double(f16_to_f32(f32_to_f16(5.8e-4f))) * 1e-4);

  Tensor eager = compile(g, testing::eager_opts()).run(in).at("y");
  EXPECT_TRUE(std::isinf(eager.get(0)) && eager.get(0) < 0) << eager.get(0);
  for (const char* engine : {"cpp", "interpreter"}) {
    Options o = testing::graph_opts();
    o["codegen"] = engine;
    CompiledModel m = compile(g, o);
    ASSERT_EQ(m.kernels().size(), 2u) << engine;  // pow+log, and the mul+casts chain
    EXPECT_EQ(m.kernels()[0].name, "FusedPowLog") << engine;
    Tensor fused = m.run(in).at("y");
    EXPECT_NEAR(fused.get(0), casts_only.at("y").data[0], 0.05) << engine;
    for (int64_t i = 1; i < 4; i++)
      EXPECT_NEAR(fused.get(i), every_op.at("y").data[size_t(i)], 0.05);
  }
}

// fuzz_graph, crash-83323730: pow(pow(pow(matmul(x, w), 3), 3), 3) / (|...| + 1) in
// f16. Eager mode overflowed to inf; the fused kernel gave 55264, the CastsOnly reference 54909.5
// (0.65% apart, the f16 tolerance 0.4%). Graph mode stores a MatMul's result in its dtype (oneDNN
// writes it, then the epilogue reads it), and pow amplified that one f16 rounding 24-fold; the
// CastsOnly reference had kept it exact. It now rounds MatMul results in both modes.
TEST(Regressions, MatMulResultsAreStoredInTheirDtypeInGraphModeToo) {
  GraphBuilder b;
  auto x = b.input("x", f16, {1, 2});
  // 0.75 + (0.75 + 2^-11) = 1.5 + 2^-11: half an f16 ulp above 1.5, so it rounds to 1.5.
  auto w = b.constant(Tensor::from_floats(f16, {2, 1}, {0.75f, 0.75048828125f}), "w");
  auto m = b.matmul(x, w);
  b.output("y", b.pow(m, 24.0));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x", Tensor::from_floats(f16, {1, 2}, {1.0f, 1.0f})}};
  const double stored = ref::run_graph(g, in, ref::Rounding::CastsOnly).at("y").data[0];
  EXPECT_EQ(stored, std::pow(1.5, 24));
  const double exact = std::pow(1.5 + 0x1p-11, 24);  // what CastsOnly gave before
  EXPECT_GT(std::fabs(exact - stored) / stored, ref::tolerance(f16));
  for (const char* engine : {"cpp", "interpreter"}) {
    Options o = testing::graph_opts();
    o["codegen"] = engine;
    CompiledModel model = compile(g, o);
    ASSERT_EQ(model.kernels().size(), 1u) << engine;  // the MatMul with its epilogue
    const double fused = model.run(in).at("y").get(0);
    EXPECT_LE(std::fabs(fused - stored) / stored, ref::tolerance(f16)) << engine << " " << fused;
  }
}

// fuzz_graph, crash-4754e83f (seed 2): exp(x0 - ReduceSum(x1)) in f16, eager 92.125 against a
// reference 92.5. Eager mode stores the row sum in f16 before the Sub; the reference kept row ops
// and MatMul in double, so the exp amplified one f16 rounding of the sum past the tolerance. The
// reference now stores every op's result in its dtype (Rounding::EveryOp), as eager mode does;
// CastsOnly still keeps them exact.
TEST(Regressions, ReferenceStoresRowOpResultsInTheirDtype) {
  GraphBuilder b;
  auto x0 = b.input("x0", f16, {2, 6, 15});
  auto x1 = b.input("x1", f16, {2, 6, 15});
  auto s = b.reduce_sum(x1, true);
  b.output("s", s);
  b.output("y", b.exp(b.sub(x0, s)));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x0", Tensor::random(f16, {2, 6, 15}, 1, 2, 5)},
                                   {"x1", Tensor::random(f16, {2, 6, 15}, 2, -1, 1)}};
  auto every_op = ref::run_graph(g, in);
  auto casts_only = ref::run_graph(g, in, ref::Rounding::CastsOnly);
  int differs = 0;
  for (size_t i = 0; i < every_op.at("s").data.size(); i++) {
    double stored = every_op.at("s").data[i], exact = casts_only.at("s").data[i];
    EXPECT_EQ(stored, double(f16_to_f32(f32_to_f16(float(exact)))));
    differs += stored != exact;
  }
  EXPECT_GT(differs, 0);  // the sums of 15 f16 values are mostly not f16 values
  for (int seed = 0; seed < 20; seed++) {
    in["x0"] = Tensor::random(f16, {2, 6, 15}, uint64_t(100 + seed), 2, 5);
    in["x1"] = Tensor::random(f16, {2, 6, 15}, uint64_t(200 + seed), -1, 1);
    EXPECT_TRUE(testing::matches_reference(g, in, testing::eager_opts())) << seed;
  }
}

// rsqrt(rms_norm(mean(row)) + softmax(row)) over rows of one element (crash-3ed54487 and its
// kin): row 0 computes 1 - 0.9999998, so one f32 ulp of rms_norm moves the output by a third.
struct CancellingRows {
  Graph g;
  std::map<std::string, Tensor> in;
};
CancellingRows cancelling_rows(DType t) {
  GraphBuilder b;
  auto row = b.input("row", t, {3, 1});
  b.output("y",
           b.rsqrt(b.add(b.rms_norm(b.reduce_mean(row, true), nullptr, 1e-6), b.softmax(row))));
  return {b.build(), {{"row", Tensor::from_floats(t, {3, 1}, {-1.72656f, 2.0f, -0.5f})}}};
}
constexpr double kFourF32Ulps = 4.0 / (1 << 24);  // the fuzz oracle's jitter, relative

// fuzz_graph, crash-3ed54487 (seed 4): rsqrt(rms_norm(mean(row)) + softmax(row)) over rows of one
// bf16 element. Eager mode rounds rms_norm(-1.73) to -1 and gives rsqrt(0) = inf; the fused kernel
// keeps -0.99999982 in f32 and gives 2368, where the exact value is 2440: 1 - 0.9999998 cancels, so
// one f32 ulp moves the result by a third. Neither is wrong. The fuzzers now also re-run the
// CastsOnly reference with every computed value nudged by 4 f32 ulps (ref::Jitter) and do not
// judge graph mode where that moves the output past half the tolerance.
TEST(Regressions, JitteredReferenceExposesF32Cancellation) {
  const CancellingRows rows = cancelling_rows(bf16);
  const Graph& g = rows.g;
  const auto& in = rows.in;
  auto every_op = ref::run_graph(g, in).at("y").data;
  auto exact = ref::run_graph(g, in, ref::Rounding::CastsOnly).at("y").data;
  EXPECT_TRUE(std::isinf(every_op[0]));
  EXPECT_NEAR(exact[0], 2441.6, 1.0);
  double widest = 0;
  for (uint32_t k = 0; k < 4; k++) {
    auto j = ref::run_graph(g, in, ref::Rounding::CastsOnly, {kFourF32Ulps, k}).at("y").data;
    widest = std::max(widest, std::isnan(j[0]) ? 1e9 : std::fabs(j[0] - exact[0]) / exact[0]);
    EXPECT_NEAR(j[1], exact[1], 1e-5 * exact[1]);  // 2 + 1: well-conditioned, barely moves
  }
  EXPECT_GT(widest, 0.1);
}

// fuzz_graph, crash-6b866758 (seed 1): rsqrt(sigmoid(x1 / x0)) in eager
// f32 gave inf where the reference gives 2.67e22. Sigmoid computed 2^m / (2^m + e^-s), and for x
// in [-104, -103.6] m is -150, whose 2^m is not a float (it rounds to 0): the result was 0 instead
// of the smallest subnormal 2^-149. Numerator and denominator are now scaled by 2^24 first.
TEST(Regressions, SigmoidNearMinus104RoundsToTheSmallestSubnormal) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.output("y", b.rsqrt(b.sigmoid(x)));
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(f32, {4}, {-103.7f, -103.9f, -103.3f, -60.5f});
  for (const char* engine : {"eager", "cpp", "interpreter"}) {
    const Options o = testing::engine_opts(engine);
    EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, o)) << engine;
    // e^-103.7 = 0.66 * 2^-149 rounds up to 2^-149, whose rsqrt is 2^74.5.
    EXPECT_NEAR(compile(g, o).run({{"x", xv}}).at("y").get(0), std::exp2(74.5), 1e18) << engine;
  }
  // The bf16-grade form, times 1e30 so the subnormal survives bf16 storage.
  GraphBuilder b16;
  auto x16 = b16.input("x", bf16, {4});
  b16.output("s", b16.mul(b16.sigmoid(x16), 1e30));
  Graph g16 = b16.build();
  Tensor x16v = Tensor::from_floats(bf16, {4}, {-103.5f, -103.0f, -62.0f, 61.0f});
  for (auto o : {testing::eager_opts(), testing::graph_opts()}) {
    EXPECT_TRUE(testing::matches_reference(g16, {{"x", x16v}}, o));
  }
}

// The f32 twin of crash-3ed54487 (make test's seed-1 run reached it by mutation): eager f32 keeps
// rms_norm(-1.73) = -0.9999998 but may land an ulp off the exact value, and 1 - 0.9999998 turns
// that ulp into 20% of the output. The jittered reference now also runs with EveryOp rounding
// (each nudged value rounded to its dtype again), so the fuzzers see eager f32 cancellation too.
TEST(Regressions, JitteredEveryOpReferenceRoundsToTheDtype) {
  for (DType t : {f32, bf16}) {
    const CancellingRows rows = cancelling_rows(t);
    const Graph& g = rows.g;
    const auto& in = rows.in;
    const double y0 = ref::run_graph(g, in).at("y").data[0];
    double widest = 0;
    for (uint32_t k = 0; k < 4; k++) {
      auto j = ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, k}).at("y").data;
      for (double v : j) {  // every element representable in the dtype
        if (std::isfinite(v)) {
          EXPECT_EQ(Tensor::from_floats(t, {1}, {float(v)}).get(0), v);
        }
      }
      widest = std::max(widest, std::isnan(j[0]) ? 1e9 : std::fabs(j[0] - y0) / y0);
    }
    if (t == f32) {
      EXPECT_GT(widest, 0.1);
    }
  }
}

// fuzz_graph, crash-8a8fd196 (seed 9): the same graph with its rows one bit apart.
// The fused kernel gave 1832, the CastsOnly reference 2440, and all 4 random-sign jitters happened
// to nudge rms_norm and softmax the same way, so 1 + rms_norm barely moved and the oracle called
// the element stable. The oracle now also nudges each node alone, up, down and both ways of random
// signs: here nudging rms_norm alone moves the output by a third or to NaN, either direction.
TEST(Regressions, JitteringOneNodeAtATimeExposesCancellation) {
  // Named, not structured bindings: clang 14 cannot capture those in a lambda.
  const CancellingRows rows = cancelling_rows(bf16);
  const Graph& g = rows.g;
  const auto& in = rows.in;
  const double exact = ref::run_graph(g, in, ref::Rounding::CastsOnly).at("y").data[0];
  auto moved = [&](uint32_t node, uint32_t pattern) {
    const double v = ref::run_graph(g, in, ref::Rounding::CastsOnly, {kFourF32Ulps, pattern, node})
                         .at("y")
                         .data[0];
    return std::isnan(v) || std::fabs(v - exact) > 0.1 * exact;
  };
  // Some node (rms_norm, softmax) moves the output both ways; the final rsqrt does not (its
  // input, 1 + rms_norm, is already computed: a relative nudge of it is well-conditioned).
  const uint32_t nodes = ref::count_jitterable(g);  // the last is the rsqrt
  bool both_ways = false;
  for (uint32_t n = 1; n <= nodes; n++) both_ways = both_ways || (moved(n, 0) && moved(n, 1));
  EXPECT_TRUE(both_ways);
  EXPECT_FALSE(moved(nodes, 0) || moved(nodes, 1));
}

// CI's seed-1 fuzz run of stop 10 (crash-9c6d268d): layer_norm(l / rms_norm(l)) in bf16, where
// l = layer_norm(sigmoid(x)). The quotient is about 1 everywhere, so the second LayerNorm
// amplifies its bf16 rounding; eager's f32 quotient fell on the other side of a bf16 rounding
// boundary than the double one. The jitter nudged values after rounding them to bf16, which
// rounds back to the same value, so the oracle called the element stable. It now nudges first.
// Here 1 + 2^-8 is a bf16 tie: exactly it rounds to 1, nudged up by 4 f32 ulps to 1 + 2^-7.
TEST(Regressions, JitterNudgesBeforeRoundingToTheDtype) {
  GraphBuilder b;
  auto x = b.input("x", bf16, {1});
  auto y = b.input("y", bf16, {1});
  b.output("s", b.add(x, y));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::from_floats(bf16, {1}, {1.0f})},
                                      {"y", Tensor::from_floats(bf16, {1}, {1.0f / 256})}};
  EXPECT_EQ(ref::run_graph(g, in).at("s").data[0], 1.0);
  const double up =
      ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, 0, 1}).at("s").data[0];
  const double down =
      ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, 1, 1}).at("s").data[0];
  EXPECT_EQ(up, 1.0 + 1.0 / 128);
  EXPECT_EQ(down, 1.0);
}

// fuzz_graph, crash-5172d5d2: 1 / layer_norm(x * 0) in f16, over a row of +0 and
// -0: eager mode gave +inf where the reference gave -inf. Which zero x - mean is depends on the
// order of operations, not on precision, and the jitter could not move a zero. Nudged down, a
// zero now changes sign, so the oracle sees that element as unstable.
TEST(Regressions, JitterFlipsTheSignOfZeros) {
  GraphBuilder b;
  auto x = b.input("x", f16, {1, 4});
  b.output("y", b.reciprocal(b.layer_norm(b.mul(x, 0.0), nullptr, nullptr, 0.01)));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {
      {"x", Tensor::from_floats(f16, {1, 4}, {-1.0f, 2.0f, -3.0f, 4.0f})}};
  const auto plain = ref::run_graph(g, in).at("y").data;
  const uint32_t ln = ref::count_jitterable(g) - 1;  // the node before the reciprocal
  const auto down =
      ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, 1, ln}).at("y").data;
  const auto up = ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, 0, ln}).at("y").data;
  for (size_t i = 0; i < plain.size(); i++) {
    ASSERT_TRUE(std::isinf(plain[i])) << i;
    EXPECT_EQ(down[i], -plain[i]) << i;
    EXPECT_EQ(up[i], plain[i]) << i;
  }
}

// fuzz_graph, crash-7f523594: log(gelu(col^3)) in bf16. gelu(-8) is -2.5e-15, and
// its log NaN; eager mode's GELU computes 1 + erf(x / sqrt(2)) in f32, as PyTorch does, which is
// exactly 0 there, so it gave log(-0) = -inf. For x < -3 that form has only an absolute error
// bound (vecmath.h), which the jitter did not model. A jittered GELU (erf form) now moves by at
// least 1e-7 |x| (ref::kGeluErfAbsErrorPerX), so such an element is seen as unstable; a GELU of
// a positive x still moves by its relative jitter alone.
TEST(Regressions, JitterCoversGeluErfAbsoluteError) {
  GraphBuilder b;
  auto x = b.input("x", bf16, {2});
  b.output("y", b.log(b.gelu(x)));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::from_floats(bf16, {2}, {-8.0f, 1.0f})}};
  const auto plain = ref::run_graph(g, in).at("y").data;
  EXPECT_TRUE(std::isnan(plain[0]));
  const Tensor eager = compile(g, testing::eager_opts()).run(in).at("y");
  EXPECT_EQ(eager.get(0), -std::numeric_limits<double>::infinity());
  const uint32_t gelu = 1;  // the first computing node
  const auto down =
      ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, 1, gelu}).at("y").data;
  const auto up =
      ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, 0, gelu}).at("y").data;
  EXPECT_TRUE(std::isfinite(down[0]));  // nudged past 0: the log of a tiny positive value
  EXPECT_TRUE(std::isnan(up[0]));
  EXPECT_NEAR(down[1], plain[1], 0.02 * std::fabs(plain[1]));  // one bf16 ulp at most
  EXPECT_NEAR(up[1], plain[1], 0.02 * std::fabs(plain[1]));
}

// fuzz_graph, crash-d3cbe7c0: gelu(log(x)) / x / gelu(log(x)) in f32, eager NaN
// against a reference of 1 / x. gelu(-5.92) is -9.5e-9; eager GELU's 1 + erf rounds to 0 there,
// and 0 / x / 0 is NaN. The quotient of a value by itself does not move when the value is nudged,
// so the oracle saw a stable element. A one-node jitter now also lands such a GELU element on
// zero (patterns 2 and 3), which exposes it.
TEST(Regressions, JitterLandsTinyGeluErfValuesOnZero) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2});
  auto g = b.gelu(x);
  auto q = b.div(g, x);
  b.output("y", b.div(q, g));
  Graph graph = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::from_floats(f32, {2}, {-5.92f, 1.5f})}};
  const auto plain = ref::run_graph(graph, in).at("y").data;
  EXPECT_NEAR(plain[0], 1 / -5.92, 1e-6);
  const Tensor eager = compile(graph, testing::eager_opts()).run(in).at("y");
  EXPECT_TRUE(std::isnan(eager.get(0))) << eager.get(0);
  EXPECT_NEAR(eager.get(1), 1 / 1.5, 1e-6);
  const uint32_t gelu = 1;  // the first computing node
  int zeros = 0;
  for (uint32_t pattern = 0; pattern < 4; pattern++) {
    const auto y =
        ref::run_graph(graph, in, ref::Rounding::EveryOp, {kFourF32Ulps, pattern, gelu}).at("y");
    zeros += std::isnan(y.data[0]) ? 1 : 0;             // 0 / x / 0
    EXPECT_NEAR(y.data[1], plain[1], 1e-6) << pattern;  // gelu(1.5) moves by 4 ulps only
  }
  EXPECT_EQ(zeros, 1);  // in one of patterns 2 and 3
}

// fuzz_graph, crash-2399eae4: exp(exp(f16(f16(exp(exp(x)))))) in f16, graph mode
// 65312 where the reference gives inf. The casts are to f16 of an f16 value: simplify drops
// them, so the fused kernel keeps exp(exp(x)) in f32, but the CastsOnly reference rounded it to
// f16 there, and the final exp amplified that rounding past f16's largest value. CastsOnly now
// treats a cast to its input's own dtype as the identity, as simplify does; a cast to another
// dtype still rounds.
TEST(Regressions, CastsOnlyIgnoresCastsToTheSameDtype) {
  GraphBuilder b;
  auto x = b.input("x", f16, {3});
  auto e = b.exp(b.exp(x));
  b.output("same", b.exp(b.cast(b.cast(e, f16), f16)));
  b.output("other", b.exp(b.cast(b.cast(e, bf16), f16)));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x", Tensor::from_floats(f16, {3}, {0.8f, 0.3f, -1.0f})}};
  auto casts_only = ref::run_graph(g, in, ref::Rounding::CastsOnly);
  for (int i = 0; i < 3; i++) {
    const double xi = in.at("x").get(i);
    const double ee = std::exp(std::exp(xi));
    EXPECT_NEAR(casts_only.at("same").data[size_t(i)], std::exp(ee), 1e-12 * std::exp(ee));
    const double bf = Tensor::from_floats(bf16, {1}, {float(ee)}).get(0);
    EXPECT_NEAR(casts_only.at("other").data[size_t(i)], std::exp(bf), 1e-12 * std::exp(bf));
  }
  // And graph mode, which fuses the chain, matches it (fuzz_graph's check, in short).
  Tensor fused = compile(g, testing::graph_opts()).run(in).at("same");
  for (int i = 0; i < 3; i++) {
    const double want = casts_only.at("same").data[size_t(i)];
    EXPECT_NEAR(fused.get(i), want, ref::tolerance(f16) * (1 + want));
  }
}

// fuzz_graph, crash-720358d7: exp(exp(x)) - max(sum(exp(exp(x)))) in f16, graph
// mode -3.625 where the EveryOp reference gives -3.6875 and CastsOnly -3.6658 (f16 tolerance
// 0.019 there). The fused kernel stores exp(exp(x)) in f16 for the Sub kernel but sums it in f32;
// each of the two 77.6-sized terms of the difference rounds by up to 0.03. Neither reference
// rounds as the model does, and nudging the inputs moves both terms together, so both saw a stable
// element. The KernelBoundaries reference rounds exactly the reads that cross kernels.
TEST(Regressions, KernelBoundariesRoundWhatCrossesKernels) {
  GraphBuilder b;
  auto x = b.input("x", f16, {2, 4});
  auto e = b.exp(b.exp(x));
  b.output("out0", b.sub(e, b.reduce_max(b.reduce_sum(e, false), true)));
  b.output("out1", b.neg(e));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {
      {"x", Tensor::from_floats(f16, {2, 4},
                                {-1.78516f, -1.7832f, 1.4707f, -1.33789f, -1.2998f, -1.53027f,
                                 -1.09375f, -0.304688f})}};
  CompiledModel m = compile(g, testing::engine_opts("interpreter"));
  ASSERT_EQ(m.kernels().size(), 3u);  // exp, exp, sum, neg | max over rows | sub
  const double got = m.run(in).at("out0").get(2);
  EXPECT_EQ(got, -3.625);
  const double tol = ref::tolerance(f16) * (1 + std::fabs(got));
  EXPECT_EQ(ref::run_graph(g, in).at("out0").data[2], -3.6875);
  EXPECT_GT(std::fabs(ref::run_graph(g, in, ref::Rounding::CastsOnly).at("out0").data[2] - got),
            tol);
  ref::KernelOfNode kernel_of;
  for (size_t k = 0; k < m.kernels().size(); k++) {
    for (auto& n : m.kernels()[k].node_names) kernel_of[n] = int(k);
  }
  const auto boundaries =
      ref::run_graph(g, in, ref::Rounding::KernelBoundaries, {}, &kernel_of).at("out0").data;
  EXPECT_NEAR(boundaries[2], got, tol);

  // The rule itself: with every node in one kernel nothing is rounded (CastsOnly); with each in
  // its own, every read is (EveryOp, whose outputs are also rounded: within half an ulp).
  ref::KernelOfNode one, own;
  int k = 0;
  for (const Node* n : g.topo_order()) {
    one[n->name] = 0;
    own[n->name] = k++;
  }
  const auto casts_only = ref::run_graph(g, in, ref::Rounding::CastsOnly);
  const auto every_op = ref::run_graph(g, in);
  for (const char* out : {"out0", "out1"}) {
    EXPECT_EQ(ref::run_graph(g, in, ref::Rounding::KernelBoundaries, {}, &one).at(out).data,
              casts_only.at(out).data);
    const auto split = ref::run_graph(g, in, ref::Rounding::KernelBoundaries, {}, &own).at(out);
    for (size_t i = 0; i < split.data.size(); i++) {
      EXPECT_NEAR(split.data[i], every_op.at(out).data[i],
                  std::fabs(every_op.at(out).data[i]) / 2048 + 1e-12)
          << out << " " << i;
    }
  }
  EXPECT_THROW(ref::run_graph(g, in, ref::Rounding::KernelBoundaries), Error);
}

// fuzz_graph, crash-8173ddae: gelu(log(x) - 3) / x / gelu(log(x) - 3) in f32,
// eager NaN against a reference of 1 / x: crash-d3cbe7c0 again, at another element. One
// node's jitter patterns 2 and 3 were meant to negate each other's random signs, so that every
// element is nudged down (and a tiny GELU lands on zero) in one of them, but each hashed its own
// pattern number: about a quarter of the elements went up in both. Pattern 3 now hashes as 2.
TEST(Regressions, OneNodeJitterPatternsTwoAndThreeAreNegations) {
  constexpr int kN = 64;
  GraphBuilder b;
  auto x = b.input("x", f32, {kN});
  auto g = b.gelu(x);
  b.output("y", b.div(b.div(g, x), g));
  Graph graph = b.build();
  std::map<std::string, Tensor> in = {
      {"x", Tensor::from_floats(f32, {kN}, std::vector<float>(kN, -5.92f))}};
  std::vector<int> nan_patterns(kN, 0);
  for (uint32_t pattern : {2u, 3u}) {
    const auto y =
        ref::run_graph(graph, in, ref::Rounding::EveryOp, {kFourF32Ulps, pattern, 1}).at("y");
    for (int i = 0; i < kN; i++) nan_patterns[size_t(i)] += std::isnan(y.data[size_t(i)]) ? 1 : 0;
  }
  for (int i = 0; i < kN; i++) EXPECT_EQ(nan_patterns[size_t(i)], 1) << "element " << i;
}

// fuzz_graph, crash-165a0b53: rsqrt(softmax(x / c)) in f32, eager 3.4487e21
// against a reference of 3.4203e21 (0.8% apart). The softmax probability, 8.5e-44, is an f32
// subnormal, whose ulp (2^-149) is 1.6% of it: eager's exp and divide were one ulp off, and rsqrt
// halved that. The jitter nudged by 4 f32 ulps *relative*, which for a subnormal is a fraction of
// one ulp and rounded back, so the oracle saw a stable element. Nonzero values now move by at
// least as many of f32's subnormal ulps.
TEST(Regressions, JitterMovesSubnormalValuesByWholeUlps) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 2});
  b.output("y", b.rsqrt(b.softmax(x)));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::from_floats(f32, {1, 2}, {0.f, -100.f})}};
  const auto plain = ref::run_graph(g, in).at("y").data;
  EXPECT_NEAR(plain[1], 1 / std::sqrt(double(float(std::exp(-100.0)))), 1e-3 * plain[1]);
  const uint32_t softmax = 1;
  for (uint32_t pattern : {0u, 1u}) {  // every element up, then down
    const auto y =
        ref::run_graph(g, in, ref::Rounding::EveryOp, {kFourF32Ulps, pattern, softmax}).at("y");
    EXPECT_GT(std::fabs(y.data[1] - plain[1]), 1e-2 * plain[1]) << pattern;  // ulps of 2^-149
    EXPECT_NEAR(y.data[0], plain[0], 1e-6) << pattern;  // p near 1 moves by 4 ulps only
  }
}

}  // namespace
}  // namespace ubfuse
