// Eager CPU kernels (src/kernels/cpu) against the double-precision reference (ref::eval_node),
// op by op: f32 / bf16 / f16 storage, sizes 1, 3 and 4097 (vector tails), size-1 and broadcast
// dims, threaded sizes, the non-temporal-store path, and the user errors the kernels raise.
// This file: unary ops and their accuracy in ulps, and the suites rerun on other Highway targets;
// kernels_cpu_binary_test.cc, kernels_cpu_rows_test.cc and kernels_cpu_data_test.cc the rest.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "hwy/targets.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/op_kernel.h"
#include "kernels/reference/reference.h"
#include "kernels_cpu_util.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse::kernels_test {

// ---------------------------------------------------------------------------------------------
// Unary

struct UnaryCase {
  const char* name;
  std::function<V(GraphBuilder&, V)> f;
  double lo, hi;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](GraphBuilder& b, V x) { return b.neg(x); }, -3, 3},
      {"abs", [](GraphBuilder& b, V x) { return b.abs(x); }, -3, 3},
      {"exp", [](GraphBuilder& b, V x) { return b.exp(x); }, -10, 10},
      {"log", [](GraphBuilder& b, V x) { return b.log(x); }, 0.01, 50},
      {"sqrt", [](GraphBuilder& b, V x) { return b.sqrt(x); }, 0, 50},
      {"rsqrt", [](GraphBuilder& b, V x) { return b.rsqrt(x); }, 0.01, 50},
      {"reciprocal", [](GraphBuilder& b, V x) { return b.reciprocal(x); }, 0.1, 5},
      {"tanh", [](GraphBuilder& b, V x) { return b.tanh(x); }, -6, 6},
      {"sigmoid", [](GraphBuilder& b, V x) { return b.sigmoid(x); }, -20, 20},
      {"relu", [](GraphBuilder& b, V x) { return b.relu(x); }, -3, 3},
      {"silu", [](GraphBuilder& b, V x) { return b.silu(x); }, -20, 20},
      {"gelu", [](GraphBuilder& b, V x) { return b.gelu(x); }, -6, 6},
      {"gelu_tanh", [](GraphBuilder& b, V x) { return b.gelu(x, true); }, -6, 6},
      {"erf", [](GraphBuilder& b, V x) { return b.erf(x); }, -5, 5},
      {"pow2", [](GraphBuilder& b, V x) { return b.pow(x, 2); }, -3, 3},
      {"pow3", [](GraphBuilder& b, V x) { return b.pow(x, 3); }, -3, 3},
      {"pow_half", [](GraphBuilder& b, V x) { return b.pow(x, 0.5); }, 0, 9},
      {"pow1", [](GraphBuilder& b, V x) { return b.pow(x, 1); }, -3, 3},
      {"pow_m1", [](GraphBuilder& b, V x) { return b.pow(x, -1); }, 0.2, 3},
      {"pow0", [](GraphBuilder& b, V x) { return b.pow(x, 0); }, -3, 3},
      {"pow_1_7", [](GraphBuilder& b, V x) { return b.pow(x, 1.7); }, 0, 4},
      {"pow4_neg", [](GraphBuilder& b, V x) { return b.pow(x, 4); }, -3, 3},
      {"pow_m3_neg", [](GraphBuilder& b, V x) { return b.pow(x, -3); }, -3, -0.3},
      {"sin", [](GraphBuilder& b, V x) { return b.sin(x); }, -10, 10},
      {"cos", [](GraphBuilder& b, V x) { return b.cos(x); }, -10, 10},
      {"floor", [](GraphBuilder& b, V x) { return b.floor(x); }, -5, 5},
      {"ceil", [](GraphBuilder& b, V x) { return b.ceil(x); }, -5, 5},
      {"round", [](GraphBuilder& b, V x) { return b.round(x); }, -5, 5},
      {"sign", [](GraphBuilder& b, V x) { return b.sign(x); }, -3, 3},
  };
}

void unary_all_dtypes_and_sizes() {
  uint64_t seed = 1;
  for (const auto& c : unary_cases()) {
    for (DType dt : kFloats) {
      for (const Sizes& s : kSizes) {
        Tensor x = Tensor::random(dt, s, seed++, c.lo, c.hi);
        EXPECT_TRUE(check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) { return c.f(b, v[0]); }))
            << c.name << " " << dtype_name(dt);
      }
    }
  }
}

// Maximum error in ulps of f32 results over a dense sweep, vs the double function.
double max_ulp(const std::function<V(GraphBuilder&, V)>& f, const std::function<double(double)>& g,
               double lo, double hi, int64_t n = 200001) {
  std::vector<float> xs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xs[size_t(i)] = float(lo + (hi - lo) * double(i) / double(n - 1));
  const Tensor out = run_eager_op(f, Tensor::from_floats(DType::f32, {n}, xs));
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = g(double(xs[size_t(i)]));
    const float wf = float(want);
    if (wf == 0.0f || std::isinf(wf)) continue;
    worst = std::max(worst, ulps_off(out.data_as<float>()[i], want));
  }
  return worst;
}

TEST(KernelsCpu, VecmathAccuracyInUlps) {
  using B = GraphBuilder;
  using F = std::function<double(double)>;
  struct Case {
    const char* name;
    std::function<V(B&, V)> f;
    F g;
    double lo, hi, max_ulps;  // vecmath.h documents these bounds
  };
  const F gelu_tanh = [](double v) {
    return v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  const std::vector<Case> cases = {
      {"exp", [](B& b, V x) { return b.exp(x); }, [](double v) { return std::exp(v); }, -87, 88.7,
       1.0},
      {"exp (subnormal results)", [](B& b, V x) { return b.exp(x); },
       [](double v) { return std::exp(v); }, -103, -87.5, 1.0},
      {"log", [](B& b, V x) { return b.log(x); }, [](double v) { return std::log(v); }, 1e-30, 1e30,
       1.0},
      {"log near 1", [](B& b, V x) { return b.log(x); }, [](double v) { return std::log(v); }, 0.5,
       2, 1.0},
      {"tanh", [](B& b, V x) { return b.tanh(x); }, [](double v) { return std::tanh(v); }, -10, 10,
       3.0},
      {"erf", [](B& b, V x) { return b.erf(x); }, [](double v) { return std::erf(v); }, -4, 4, 6.0},
      {"erf near 0", [](B& b, V x) { return b.erf(x); }, [](double v) { return std::erf(v); },
       -1e-3, 1e-3, 6.0},
      {"sigmoid", [](B& b, V x) { return b.sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }, -80, 80, 2.2},
      {"sigmoid (subnormal results)", [](B& b, V x) { return b.sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }, -103, -87, 2.5},
      {"silu", [](B& b, V x) { return b.silu(x); }, [](double v) { return v / (1 + std::exp(-v)); },
       -80, 80, 2.5},
      {"rsqrt", [](B& b, V x) { return b.rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); },
       1e-6, 1e6, 1.5},
      // Cody-Waite below 2^17, lane by lane past it (and everywhere without FMA).
      {"sin", [](B& b, V x) { return b.sin(x); }, [](double v) { return std::sin(v); }, -7, 7, 1.0},
      {"cos", [](B& b, V x) { return b.cos(x); }, [](double v) { return std::cos(v); }, -7, 7, 1.0},
      {"sin (rotary angles)", [](B& b, V x) { return b.sin(x); },
       [](double v) { return std::sin(v); }, -1e4, 1e4, 1.0},
      {"cos (rotary angles)", [](B& b, V x) { return b.cos(x); },
       [](double v) { return std::cos(v); }, -1e4, 1e4, 1.0},
      {"sin (past 2^17)", [](B& b, V x) { return b.sin(x); }, [](double v) { return std::sin(v); },
       1e5, 1e7, 1.0},
      {"cos (huge)", [](B& b, V x) { return b.cos(x); }, [](double v) { return std::cos(v); },
       -3e38, 3e38, 1.0},
      // x sigmoid(2u): u's rounding error, times |2u|, passes to sigmoid where it is small
      // (measured 12.2 and 147 ulps on AVX-512; a 1 + tanh(u) form is 100% off below -5).
      {"gelu tanh (x > -3)", [](B& b, V x) { return b.gelu(x, "tanh"); }, gelu_tanh, -3, 10, 16},
      {"gelu tanh (x in [-9, -3])", [](B& b, V x) { return b.gelu(x, "tanh"); }, gelu_tanh, -9, -3,
       200},
      // 1 + erf cancels for negative x (vecmath.h): relative accuracy only where it is mild.
      {"gelu (x > -1)", [](B& b, V x) { return b.gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -1, 5, 16.0},
  };
  for (const auto& c : cases) EXPECT_LE(max_ulp(c.f, c.g, c.lo, c.hi), c.max_ulps) << c.name;
}

// Softmax over rows (0, v): exp's error (ExpNonPositiveF on AVX-512; elsewhere ExpInRangeF for
// v >= -87, the row's range, and ExpNonPositiveF's range-tested form below it) plus the sum,
// the reciprocal and the product's roundings, in ulps of each output (measured 3.1; 2.5 with ExpF).
// For v < -17, 1 + e^v rounds to 1 and the second output is exp(v) itself, so that range checks exp
// alone.
double softmax_pair_max_ulp(double lo, double hi, int64_t n = 200001) {
  std::vector<float> xs(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    xs[size_t(2 * i)] = 0.0f;
    xs[size_t(2 * i + 1)] = float(lo + (hi - lo) * double(i) / double(n - 1));
  }
  const Tensor out = run_eager_op([](GraphBuilder& b, V v) { return b.softmax(v); },
                                  Tensor::from_floats(DType::f32, {n, 2}, xs));
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(double(xs[size_t(2 * i + 1)]));
    const double want[2] = {1 / (1 + e), e / (1 + e)};
    for (int k = 0; k < 2; ++k) {
      if (float(want[k]) == 0.0f) continue;
      worst = std::max(worst, ulps_off(out.data_as<float>()[2 * i + k], want[k]));
    }
  }
  return worst;
}

TEST(KernelsCpu, SoftmaxAccuracyInUlps) {
  EXPECT_LE(softmax_pair_max_ulp(-17, 0), 3.3);
  EXPECT_LE(softmax_pair_max_ulp(-87, -17), 1.3);     // exp alone (vecmath.h's bound)
  EXPECT_LE(softmax_pair_max_ulp(-103, -87.5), 1.3);  // exp's subnormal results
  // Around -87, where rows leave ExpInRangeF's one-multiply scaling (without VSCALEFPS).
  EXPECT_LE(softmax_pair_max_ulp(-88, -86, 20001), 1.3);
}

// Vectors whose lanes mix ordinary scores with masked ones (-1e9, lowest, -inf: exp is 0 without
// the underflowing arithmetic) and scores with subnormal exps (the exact, slower form): every
// output as the double reference's, within one subnormal ulp of 0 where that rounds to 0.
TEST(KernelsCpu, SoftmaxMixesMaskedAndSubnormalLanes) {
  const float lowest = std::numeric_limits<float>::lowest();
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> pool = {-1e9f,   -95.0f, lowest, -50.0f, -104.5f,
                                   -103.5f, ninf,   -87.2f, -1.0f,  -200.0f};
  for (int64_t cols : {16, 37}) {
    for (bool subnormals : {false, true}) {
      std::vector<float> xs(size_t(4 * cols));
      for (size_t i = 0; i < xs.size(); i++) {
        const float v = pool[(i * 7 + i / size_t(cols)) % pool.size()];
        xs[i] = (i % size_t(cols) == 0)                      ? 0.0f
                : (!subnormals && v > -104.0f && v < -87.0f) ? -1.0f
                                                             : v;
      }
      const Tensor out = run_eager_op([](GraphBuilder& b, V v) { return b.softmax(v); },
                                      Tensor::from_floats(DType::f32, {4, cols}, xs));
      for (int64_t r = 0; r < 4; r++) {
        double sum = 0;
        for (int64_t c = 0; c < cols; c++) sum += std::exp(double(xs[size_t(r * cols + c)]));
        for (int64_t c = 0; c < cols; c++) {
          const double want = std::exp(double(xs[size_t(r * cols + c)])) / sum;
          const float got = out.data_as<float>()[r * cols + c];
          if (float(want) == 0.0f) {  // 0, or one subnormal ulp as exp(-104) may round
            EXPECT_LE(got, 0x1p-149f) << "cols " << cols << " row " << r << " col " << c;
          } else {
            EXPECT_LE(ulps_off(got, want), 3.3) << "cols " << cols << " row " << r << " col " << c;
          }
        }
      }
    }
  }
}

TEST(KernelsCpu, UnarySpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_floats(DType::f32, {6}, {0.0f, -0.0f, inf, -inf, nan, 100.0f});
  auto run = [&](const std::function<V(GraphBuilder&, V)>& f) {
    GraphBuilder b;
    V in = b.input("x", DType::f32, {6});
    V y = f(b, in);
    b.output("y", y);
    Graph g = b.build();
    Tensor out(DType::f32, {6});
    std::vector<Tensor> outs{out};
    cpu::make_op_kernel(*y->producer)->run({x}, outs, pool2());
    return out.to_floats();
  };
  auto e = run([](GraphBuilder& b, V v) { return b.exp(v); });
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[2], inf);
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(e[5], inf);
  auto l = run([](GraphBuilder& b, V v) { return b.log(v); });
  EXPECT_EQ(l[0], -inf);
  EXPECT_EQ(l[2], inf);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_TRUE(std::isnan(l[4]));
  auto t = run([](GraphBuilder& b, V v) { return b.tanh(v); });
  EXPECT_EQ(t[2], 1.0f);
  EXPECT_EQ(t[3], -1.0f);
  auto s = run([](GraphBuilder& b, V v) { return b.sigmoid(v); });
  EXPECT_EQ(s[2], 1.0f);
  EXPECT_GE(s[3], 0.0f);
  EXPECT_LE(s[3], 1e-38f);  // vecmath.h: below 1e-38 for x < -88
  auto r = run([](GraphBuilder& b, V v) { return b.relu(v); });
  EXPECT_TRUE(std::isnan(r[4]));
  EXPECT_EQ(r[3], 0.0f);
  auto er = run([](GraphBuilder& b, V v) { return b.erf(v); });
  EXPECT_EQ(er[2], 1.0f);
  EXPECT_EQ(er[3], -1.0f);
  // Pow matches C's pow on zeros, infinities and NaN, signs included, on every path (the fast
  // ones for 0.5, -1, 2, 3 too: sqrt(-inf) would be NaN where pow(-inf, 0.5) is +inf).
  const std::vector<float> xs = {0.0f, -0.0f, inf, -inf, nan};
  for (float ex : {0.5f, -1.5f, 1.7f, -1.0f, 2.0f, 3.0f, -3.0f, 4.0f, 0.0f, 1.0f}) {
    auto p = run([ex](GraphBuilder& b, V v) { return b.pow(v, ex); });
    for (size_t i = 0; i < xs.size(); i++) {
      const float want = std::pow(xs[i], ex);
      const bool same = std::isnan(want) ? std::isnan(p[i])
                                         : p[i] == want && std::signbit(p[i]) == std::signbit(want);
      EXPECT_TRUE(same) << "pow(" << xs[i] << ", " << ex << ") = " << p[i] << ", C: " << want;
    }
  }
}

TEST(KernelsCpu, IntegerUnaryAndNot) {
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor x = Tensor::random(dt, {4097}, 7, -100, 100);
    EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.neg(v[0]); }));
    EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.abs(v[0]); }));
    EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.relu(v[0]); }));
  }
  Tensor m = Tensor::random(DType::boolean, {3, 4097}, 9, 0, 2);
  EXPECT_TRUE(
      check_op({m}, [](GraphBuilder& b, std::vector<V>& v) { return b.logical_not(v[0]); }));
}

// The non-temporal-store path (taken for big outputs of memory-bound ops such as Neg; the
// threshold is lowered here so small tensors with unaligned rows exercise it), the plain stores
// that compute-bound ops (SiLU, Softmax) keep past it, and threading over many blocks.
TEST(KernelsCpu, StreamingStoresPath) {
  const size_t saved = cpu::stream_min_bytes();
  cpu::set_stream_min_bytes(1024);
  const Sizes s{67, 1031};  // rows start unaligned
  Tensor x = Tensor::random(DType::f32, s, 11, -3, 3);
  Tensor r = Tensor::random(DType::f32, s, 12, -3, 3);
  Tensor w = Tensor::random(DType::f32, {1031}, 13, -1, 1);
  Tensor c = Tensor::random(DType::boolean, s, 15, 0, 2);
  EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.silu(v[0]); }));
  EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.neg(v[0]); }));
  EXPECT_TRUE(
      check_op({x, r}, [](GraphBuilder& b, std::vector<V>& v) { return b.add(v[0], v[1]); }));
  EXPECT_TRUE(
      check_op({x, w}, [](GraphBuilder& b, std::vector<V>& v) { return b.mul(v[0], v[1]); }));
  EXPECT_TRUE(check_op(
      {c, x, r}, [](GraphBuilder& b, std::vector<V>& v) { return b.where(v[0], v[1], v[2]); }));
  EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }));
  EXPECT_TRUE(check_op({x, w}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.layer_norm(v[0], v[1], nullptr);
  }));
  // Aligned rows: the pipelined row loops' stores (bf16 in pairs of vectors; streaming for the
  // norms).
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor xa = Tensor::random(dt, {40, 1024}, 17, -3, 3);
    Tensor wa = Tensor::random(dt, {1024}, 18, -1, 1);
    EXPECT_TRUE(check_op({xa}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }));
    EXPECT_TRUE(check_op({xa, wa, wa}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.layer_norm(v[0], v[1], v[2]);
    }));
    EXPECT_TRUE(check_op(
        {xa, wa}, [](GraphBuilder& b, std::vector<V>& v) { return b.rms_norm(v[0], v[1]); }));
  }
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor xb = Tensor::random(dt, {129, 1031}, 14, -3, 3);
    EXPECT_TRUE(check_op({xb}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }));
    EXPECT_TRUE(check_op({xb}, [](GraphBuilder& b, std::vector<V>& v) { return b.silu(v[0]); }));
    EXPECT_TRUE(check_op({xb}, [](GraphBuilder& b, std::vector<V>& v) { return b.neg(v[0]); }));
    EXPECT_TRUE(check_op(
        {xb}, [](GraphBuilder& b, std::vector<V>& v) { return b.rms_norm(v[0], nullptr); }));
    EXPECT_TRUE(check_op(
        {xb}, [](GraphBuilder& b, std::vector<V>& v) { return b.cast(v[0], DType::f32); }));
    EXPECT_TRUE(
        check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.cast(v[0], dt); }));
  }
  cpu::set_stream_min_bytes(saved);
}

// A big tensor through the default threshold (32.8 MiB of f32 out: streaming, many chunks).
// A batch dim of 0 broadcast against 1 stays 0 (numpy): an STFT of a signal shorter than its
// frame has no frames. The kernel had broadcast it to 1 and refused its own output; the reference
// had read past its empty operand.
TEST(KernelsCpu, MatMulWithAnEmptyBatch) {
  const std::vector<std::pair<Sizes, Sizes>> cases = {
      {{1, 0, 1, 6}, {6, 4}}, {{0, 3, 5}, {1, 5, 2}}, {{2, 1, 3, 5}, {0, 5, 2}}};
  for (const auto& [sa, sb] : cases) {
    GraphBuilder b;
    auto a = testing::in(b, "a", DType::f32, sa);
    auto w = testing::in(b, "b", DType::f32, sb);
    b.output("y", b.matmul(a, w));
    Graph g = b.build();
    std::map<std::string, Tensor> x{{"a", Tensor::random(f32, sa, 1)},
                                    {"b", Tensor::random(f32, sb, 2)}};
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      EXPECT_TRUE(testing::matches_reference(g, x, o)) << sizes_str(sa) << " x " << sizes_str(sb);
      EXPECT_EQ(compile(g, o).run(x).at("y").numel(), 0);
    }
  }
}

TEST(KernelsCpu, LargeTensor) {
  Tensor x = Tensor::random(DType::f32, {2048, 4100}, 16, -3, 3);
  EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.relu(v[0]); }));
}

TEST(KernelsCpu, UnaryAllDtypesAndSizes) { unary_all_dtypes_and_sizes(); }
TEST(KernelsCpu, BinaryBroadcastFloat) { binary_broadcast_float(); }
TEST(KernelsCpu, CompareAndWhere) { compare_and_where(); }
TEST(KernelsCpu, NormsSoftmaxReductions) { norms_softmax_reductions(); }
TEST(KernelsCpu, CastAllPairs) { cast_all_pairs(); }

// RNN, GRU and LSTM (hidden sizes off and on whole vectors, clipped, bidirectional, every
// activation, six batch entries of different lengths) against the reference: the step loops'
// blocks of entries and columns and their tails.
void recurrent_cells() {
  for (OpKind k : {OpKind::RNN, OpKind::GRU, OpKind::LSTM}) {
    for (int64_t H : {19, 40}) {
      // 13 entries: blocks of eight (AVX-512) and four and one alone in the step's product (three
      // blocks of four and one on AVX2); lengths 0 to 13.
      const int64_t G = k == OpKind::LSTM ? 4 : k == OpKind::GRU ? 3 : 1, S = 13, N = 13, I = 5;
      const int64_t per = k == OpKind::LSTM ? 3 : k == OpKind::GRU ? 2 : 1;
      // The gates' activation Sigmoid (others, mapping outside [0, 1], make GRU's and LSTM's
      // steps amplify rounding differences step after step); the others cycle through all five.
      std::vector<int64_t> acts;
      for (int64_t i = 0; i < 2 * per; i++)
        acts.push_back(i % per == 0 && k != OpKind::RNN ? 0 : (i + H) % 5);
      GraphBuilder b;
      std::vector<V> in{testing::in(b, "x", DType::f32, {S, N, I}),
                        testing::in(b, "w", DType::f32, {2, G * H, I}),
                        testing::in(b, "r", DType::f32, {2, G * H, H}),
                        testing::in(b, "bias", DType::f32, {2, 2 * G * H}),
                        b.constant(Tensor::from_floats(
                            DType::i32, {N}, {13, 7, 13, 1, 0, 12, 5, 13, 9, 2, 13, 11, 3}))};
      auto o = b.op_outputs(k, in,
                            {{"hidden_size", H},
                             {"direction", int64_t(2)},
                             {"clip", 2.5},
                             {"activations", acts},
                             {"optional", std::vector<int64_t>{3, 4}}},
                            k == OpKind::LSTM ? 3 : 2);
      b.output("y", o[0]);
      b.output("h", o[1]);
      Graph g = b.build();
      std::map<std::string, Tensor> x;
      uint64_t seed = 40;
      for (auto* v : g.inputs())
        x[v->name] = Tensor::random(v->dtype, static_sizes(v->shape), seed++);
      EXPECT_TRUE(testing::matches_reference(g, x, testing::eager_opts()))
          << op_name(k) << " hidden " << H;
    }
  }
}

TEST(KernelsCpu, RecurrentCells) { recurrent_cells(); }

// The kernels are compiled for several Highway targets (hwy_targets.h) and dispatched to the best
// one the CPU has; the others (AVX2 for machines without AVX-512, the portable scalar fallback)
// are forced here so they are tested too.
TEST(KernelsCpu, OtherHighwayTargets) {
  for (int64_t target : {int64_t(HWY_AVX2), int64_t(HWY_SCALAR)}) {
    if ((hwy::SupportedTargets() & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    unary_all_dtypes_and_sizes();
    binary_broadcast_float();
    compare_and_where();
    norms_softmax_reductions();
    cast_all_pairs();
    recurrent_cells();
    hwy::SetSupportedTargetsForTest(0);
  }
}

}  // namespace ubfuse::kernels_test
