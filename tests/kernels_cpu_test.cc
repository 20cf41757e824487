// Eager CPU kernels (src/kernels/cpu) against the double-precision reference (ref::eval_node),
// op by op: f32 / bf16 / f16 storage, sizes 1, 3 and 4097 (vector tails), size-1 and broadcast
// dims, threaded sizes, the non-temporal-store path, and the user errors the kernels raise.
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
#include "runtime/thread_pool.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse {
namespace {

using testing::close_to_ref;
using testing::throws_with;
using V = GraphBuilder::V;

ThreadPool& pool2() { return ThreadPool::with_threads(2); }

// One op built by `make` from fresh graph inputs of the given tensors' dtypes and sizes; checks
// the eager kernel against the reference. `scale` widens the dtype tolerance.
::testing::AssertionResult check_op(const std::vector<Tensor>& ins,
                                    const std::function<V(GraphBuilder&, std::vector<V>&)>& make,
                                    double scale = 1.0, ThreadPool* pool = nullptr) {
  GraphBuilder b;
  std::vector<V> vs;
  for (size_t i = 0; i < ins.size(); ++i) {
    vs.push_back(b.input("in" + std::to_string(i), ins[i].dtype(), to_shape(ins[i].sizes())));
  }
  V y = make(b, vs);
  b.output("y", y);
  Graph g = b.build();
  const Node& n = *y->producer;
  // Inputs made by Constant nodes inside `make` (e.g. prepacked weights) come from their payload.
  std::vector<Tensor> kin;
  std::vector<ref::RefTensor> rin;
  size_t next = 0;
  for (const Value* v : n.inputs) {
    if (v->producer && v->producer->op == OpKind::Constant) {
      kin.push_back(v->producer->payload);
    } else {
      kin.push_back(ins.at(next++));
    }
    rin.push_back(ref::from_tensor(kin.back()));
  }
  ref::RefTensor want = ref::eval_node(n, rin).at(0);
  Tensor got(n.out()->dtype, want.sizes);
  std::vector<Tensor> outs{got};
  auto k = cpu::make_op_kernel(n);
  k->run(kin, outs, pool ? *pool : pool2());
  auto r = close_to_ref(got, want, scale);
  if (!r)
    r << " [" << n.describe() << " on " << ins.size() << " input(s), first "
      << sizes_str(ins.empty() ? Sizes{} : ins[0].sizes()) << "]";
  return r;
}

const std::vector<DType> kFloats = {DType::f32, DType::bf16, DType::f16};
const std::vector<Sizes> kSizes = {{1}, {3}, {4097}, {2, 1, 3}, {7, 4097}};

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

// Runs the shape-keeping op f(x) through its eager kernel on x; its constants (weights made with
// b.constant) come from the node.
Tensor run_eager_op(const std::function<V(GraphBuilder&, V)>& f, const Tensor& x) {
  GraphBuilder b;
  V y = f(b, b.input("x", x.dtype(), to_shape(x.sizes())));
  b.output("y", y);
  Graph g = b.build();
  Tensor out(y->dtype, x.sizes());
  std::vector<Tensor> outs{out};
  cpu::make_op_kernel(*y->producer)->run({x}, outs, pool2());
  return out;
}

// |got - want| in ulps of want rounded to f32.
double ulps_off(float got, double want) {
  const float wf = float(want);
  const double ulp = std::nextafter(std::fabs(wf), INFINITY) - std::fabs(wf);
  return std::fabs(double(got) - want) / ulp;
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

// Softmax over rows (0, v): exp's error (ExpNonPositiveF on AVX-512, ExpF elsewhere) plus the sum,
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
// that compute-bound ops (SiLU) keep past it, and threading over many blocks.
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
  for (DType dt : {DType::f32, DType::bf16}) {  // aligned rows: Softmax's pipelined streaming loop
    Tensor xa = Tensor::random(dt, {40, 1024}, 17, -3, 3);
    EXPECT_TRUE(check_op({xa}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }));
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
TEST(KernelsCpu, LargeTensor) {
  Tensor x = Tensor::random(DType::f32, {2048, 4100}, 16, -3, 3);
  EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.relu(v[0]); }));
}

// ---------------------------------------------------------------------------------------------
// Binary with broadcasting

struct ShapePair {
  Sizes a, b;
};

const std::vector<ShapePair> kBroadcasts = {
    {{1}, {1}},
    {{3}, {3}},
    {{4097}, {4097}},
    {{4097}, {1}},
    {{1}, {4097}},
    {{5, 4097}, {4097}},
    {{5, 4097}, {5, 1}},
    {{5, 1}, {5, 4097}},
    {{2, 3, 4}, {4}},
    {{2, 3, 4}, {3, 1}},
    {{2, 1, 4}, {1, 3, 1}},
    {{5, 1}, {1, 7}},
    {{2, 1, 3, 1}, {1, 4, 1, 5}},
    {{}, {3, 2}},
    {{3, 2}, {}},
    {{64, 1024}, {1024}},
    {{1, 3, 1}, {2, 3, 4097}},
};

void binary_broadcast_float() {
  using Fn = std::function<V(GraphBuilder&, V, V)>;
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add", [](GraphBuilder& b, V x, V y) { return b.add(x, y); }},
      {"sub", [](GraphBuilder& b, V x, V y) { return b.sub(x, y); }},
      {"mul", [](GraphBuilder& b, V x, V y) { return b.mul(x, y); }},
      {"div", [](GraphBuilder& b, V x, V y) { return b.div(x, y); }},
      {"max", [](GraphBuilder& b, V x, V y) { return b.max(x, y); }},
      {"min", [](GraphBuilder& b, V x, V y) { return b.min(x, y); }},
  };
  uint64_t seed = 100;
  for (auto& [name, fn] : ops) {
    auto& f = fn;  // clang 14 cannot capture a structured binding in a lambda
    for (DType dt : kFloats) {
      for (const auto& sp : kBroadcasts) {
        Tensor a = Tensor::random(dt, sp.a, seed++, -2, 2);
        Tensor bb = Tensor::random(dt, sp.b, seed++, 0.5, 2);  // keeps Div finite
        EXPECT_TRUE(
            check_op({a, bb}, [&](GraphBuilder& b, std::vector<V>& v) { return f(b, v[0], v[1]); }))
            << name << " " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      }
    }
  }
}

TEST(KernelsCpu, BinaryMaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::from_floats(DType::f32, {3}, {nan, 1.0f, 2.0f});
  Tensor bb = Tensor::from_floats(DType::f32, {3}, {1.0f, nan, 3.0f});
  EXPECT_TRUE(
      check_op({a, bb}, [](GraphBuilder& b, std::vector<V>& v) { return b.max(v[0], v[1]); }));
  EXPECT_TRUE(
      check_op({a, bb}, [](GraphBuilder& b, std::vector<V>& v) { return b.min(v[0], v[1]); }));
}

TEST(KernelsCpu, BinaryInteger) {
  uint64_t seed = 300;
  for (DType dt : {DType::i32, DType::i64}) {
    for (const auto& sp : kBroadcasts) {
      Tensor a = Tensor::random(dt, sp.a, seed++, -50, 50);
      Tensor bb = Tensor::random(dt, sp.b, seed++, 1, 9);
      for (int op = 0; op < 6; ++op) {
        EXPECT_TRUE(check_op({a, bb},
                             [&](GraphBuilder& b, std::vector<V>& v) {
                               switch (op) {
                                 case 0:
                                   return b.add(v[0], v[1]);
                                 case 1:
                                   return b.sub(v[0], v[1]);
                                 case 2:
                                   return b.mul(v[0], v[1]);
                                 case 3:
                                   return b.div(v[0], v[1]);
                                 case 4:
                                   return b.max(v[0], v[1]);
                                 default:
                                   return b.min(v[0], v[1]);
                               }
                             }))
            << op << " " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      }
    }
  }
}

TEST(KernelsCpu, IntegerDivisionByZeroIsAnError) {
  GraphBuilder b;
  V x = b.input("x", DType::i64, {3});
  V y = b.input("y", DType::i64, {3});
  V z = b.div(x, y);
  b.name_last("div_by_zero");
  b.output("z", z);
  Graph g = b.build();
  Tensor tx = Tensor::from_floats(DType::i64, {3}, {1, 2, 3});
  Tensor ty = Tensor::from_floats(DType::i64, {3}, {1, 0, 3});
  Tensor out(DType::i64, {3});
  std::vector<Tensor> outs{out};
  auto k = cpu::make_op_kernel(*z->producer);
  EXPECT_TRUE(throws_with(
      [&] {
        k->run({tx, ty}, outs, pool2());
      },
      {"div_by_zero", "Div", "division by zero"}));
}

void compare_and_where() {
  uint64_t seed = 500;
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32}) {
    for (const auto& sp : kBroadcasts) {
      // Few distinct values so Equal is true sometimes.
      Tensor a = Tensor::random(dt, sp.a, seed++, -2, 3);
      Tensor bb = Tensor::random(dt, sp.b, seed++, -2, 3);
      if (is_float(dt)) {
        for (int64_t i = 0; i < a.numel(); ++i) a.set(i, std::round(a.get(i)));
        for (int64_t i = 0; i < bb.numel(); ++i) bb.set(i, std::round(bb.get(i)));
      }
      for (int op = 0; op < 3; ++op) {
        EXPECT_TRUE(check_op({a, bb},
                             [&](GraphBuilder& b, std::vector<V>& v) {
                               return op == 0   ? b.equal(v[0], v[1])
                                      : op == 1 ? b.less(v[0], v[1])
                                                : b.greater(v[0], v[1]);
                             }))
            << op << " " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      }
      Tensor c = Tensor::random(DType::boolean, sp.a, seed++, 0, 2);
      EXPECT_TRUE(
          check_op({c, a, bb},
                   [&](GraphBuilder& b, std::vector<V>& v) { return b.where(v[0], v[1], v[2]); }))
          << "where " << dtype_name(dt) << " " << sizes_str(sp.a) << " x " << sizes_str(sp.b);
      Tensor c2 = Tensor::random(DType::boolean, sp.b, seed++, 0, 2);
      EXPECT_TRUE(
          check_op({c2, bb, a},
                   [&](GraphBuilder& b, std::vector<V>& v) { return b.where(v[0], v[1], v[2]); }))
          << "where " << dtype_name(dt) << " " << sizes_str(sp.b) << " x " << sizes_str(sp.a);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Row ops

const std::vector<Sizes> kRowSizes = {{1}, {3}, {4097}, {3, 1}, {3, 4097}, {2, 3, 17}, {64, 1000}};

void norms_softmax_reductions() {
  uint64_t seed = 700;
  for (DType dt : kFloats) {
    for (const Sizes& s : kRowSizes) {
      const int64_t c = s.back();
      Tensor x = Tensor::random(dt, s, seed++, -3, 3);
      Tensor w = Tensor::random(dt, {c}, seed++, 0.5, 1.5);
      Tensor bias = Tensor::random(dt, {c}, seed++, -1, 1);
      auto ctx = std::string(dtype_name(dt)) + " " + sizes_str(s);
      EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], nullptr, nullptr, 1e-5);
      })) << ctx;
      EXPECT_TRUE(check_op({x, w}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], v[1], nullptr, 1e-5);
      })) << ctx;
      EXPECT_TRUE(check_op({x, w, bias}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], v[1], v[2], 1e-3);
      })) << ctx;
      EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.rms_norm(v[0], nullptr, 1e-6);
      })) << ctx;
      EXPECT_TRUE(check_op({x, w}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.rms_norm(v[0], v[1], 1e-6);
      })) << ctx;
      EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }))
          << ctx;
      for (bool keep : {true, false}) {
        // Sums of many bf16/f16 values: the output rounding dominates, scale the tolerance.
        const double sc = dt == DType::f32 ? 1.0 + double(c) / 1000.0 : 1.0;
        EXPECT_TRUE(check_op(
            {x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.reduce_sum(v[0], keep); }, sc))
            << ctx;
        EXPECT_TRUE(check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) {
          return b.reduce_mean(v[0], keep);
        })) << ctx;
        EXPECT_TRUE(check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) {
          return b.reduce_max(v[0], keep);
        })) << ctx;
      }
    }
  }
}

TEST(KernelsCpu, RowOpsNumericallySane) {
  // Large common offset, tiny spread: a one-pass E[x^2] - E[x]^2 variance would lose everything.
  Sizes s{4, 4096};
  Tensor x = Tensor::random(DType::f32, s, 77, 1000.0, 1000.01);
  EXPECT_TRUE(check_op(
      {x},
      [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], nullptr, nullptr, 1e-12);
      },
      2.0));
  // Softmax of large logits: exp would overflow without the max subtraction.
  Tensor big = Tensor::random(DType::f32, s, 78, 500, 1000);
  EXPECT_TRUE(check_op({big}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }));
}

// ---------------------------------------------------------------------------------------------
// MatMul

struct MM {
  Sizes a, b;
};

TEST(KernelsCpu, MatMulShapesAndDtypes) {
  const std::vector<MM> cases = {
      {{3, 5}, {5, 7}},       {{1, 1}, {1, 1}},        {{64, 96}, {96, 33}},
      {{2, 3, 5}, {2, 5, 4}}, {{2, 3, 5}, {5, 4}},     {{2, 1, 3, 5}, {3, 5, 4}},
      {{5}, {5, 4}},          {{3, 5}, {5}},           {{5}, {5}},
      {{1, 3, 5}, {4, 5, 2}}, {{4, 17, 64}, {64, 48}},
  };
  uint64_t seed = 900;
  for (DType dt : kFloats) {
    for (const auto& c : cases) {
      Tensor a = Tensor::random(dt, c.a, seed++, -1, 1);
      Tensor bb = Tensor::random(dt, c.b, seed++, -1, 1);
      const int64_t K = c.a.back();
      EXPECT_TRUE(check_op(
          {a, bb}, [](GraphBuilder& b, std::vector<V>& v) { return b.matmul(v[0], v[1]); },
          1.0 + double(K) / 16.0))
          << dtype_name(dt) << " " << sizes_str(c.a) << " x " << sizes_str(c.b);
    }
  }
}

TEST(KernelsCpu, MatMulConstantWeightsArePrepacked) {
  uint64_t seed = 950;
  for (DType dt : kFloats) {
    Tensor w = Tensor::random(dt, {256, 320}, seed++, -1, 1);
    // One kernel (weights packed once), run at several M, from several threads at once.
    GraphBuilder b;
    V x = b.input("x", dt, {"m", 256});
    V y = b.matmul(x, b.constant(w, "w"));
    b.output("y", y);
    Graph g = b.build();
    const Node& n = *y->producer;
    auto k = cpu::make_op_kernel(n);
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < 3; ++t) {
      ts.emplace_back([&, t] {
        for (int64_t m : {1, 7, 64, 300}) {
          Tensor a = Tensor::random(dt, {m, 256}, uint64_t(1000 + t * 10 + m), -1, 1);
          auto want = ref::eval_node(n, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
          Tensor got(dt, {m, 320});
          std::vector<Tensor> outs{got};
          k->run({a, w}, outs, pool2());
          if (!close_to_ref(got, want, 17.0)) bad++;
        }
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_EQ(bad.load(), 0) << dtype_name(dt);
  }
}

// ---------------------------------------------------------------------------------------------
// Data movement, gather, cast

TEST(KernelsCpu, ReshapeTransposeExpand) {
  uint64_t seed = 1100;
  for (DType dt : {DType::f32, DType::bf16, DType::i64, DType::boolean}) {
    Tensor x = Tensor::random(dt, {2, 3, 4, 5}, seed++, -5, 5);
    EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.reshape(v[0], {6, -1});
    }));
    for (std::vector<int64_t> perm : std::vector<std::vector<int64_t>>{
             {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {0, 1, 3, 2}, {2, 0, 3, 1}, {1, 0, 2, 3}}) {
      EXPECT_TRUE(check_op(
          {x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.transpose(v[0], perm); }))
          << dtype_name(dt) << " perm " << sizes_str(perm);
    }
    Tensor big = Tensor::random(dt, {67, 130, 3}, seed++, -5, 5);
    EXPECT_TRUE(check_op({big}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.transpose(v[0], {1, 0, 2});
    }));
    EXPECT_TRUE(check_op({big}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.transpose(v[0], {2, 1, 0});
    }));
    Tensor col = Tensor::random(dt, {3, 1}, seed++, -5, 5);
    EXPECT_TRUE(check_op({col}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.expand(v[0], {2, 3, 4097});
    }));
    Tensor row = Tensor::random(dt, {1, 5}, seed++, -5, 5);
    EXPECT_TRUE(check_op({row}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.expand(v[0], {4, 1, 5});
    }));
  }
  // Large blocked transpose (threaded).
  Tensor m = Tensor::random(DType::f32, {1000, 777}, 5, -1, 1);
  EXPECT_TRUE(check_op({m}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.transpose(v[0], {1, 0});
  }));
}

TEST(KernelsCpu, SliceStepsAndClamping) {
  Tensor x = Tensor::random(DType::f32, {6, 7, 9}, 31, -5, 5);
  struct S {
    std::vector<int64_t> st, en, ax, sp;
  };
  const std::vector<S> cases = {
      {{1}, {4}, {0}, {}},
      {{0, 2}, {6, 100}, {0, 2}, {2, 3}},
      {{-1}, {-100}, {1}, {-1}},   // reverse a whole dim
      {{5}, {1}, {2}, {-2}},       // reversed with step
      {{-3}, {1000}, {-1}, {1}},   // negative start, clamped end
      {{3}, {3}, {0}, {1}},        // empty
      {{100}, {-100}, {0}, {-3}},  // clamped start, reversed
      {{0, 0, 0}, {1, 1, 1}, {0, 1, 2}, {}},
  };
  for (DType dt : {DType::f32, DType::f16, DType::i32}) {
    Tensor xt = Tensor::random(dt, {6, 7, 9}, 32, -5, 5);
    for (const auto& c : cases) {
      EXPECT_TRUE(
          check_op({xt}, [&](GraphBuilder& b,
                             std::vector<V>& v) { return b.slice(v[0], c.st, c.en, c.ax, c.sp); }))
          << sizes_str(c.st) << " " << sizes_str(c.en) << " " << sizes_str(c.ax) << " "
          << sizes_str(c.sp);
    }
  }
}

TEST(KernelsCpu, Concat) {
  for (DType dt : {DType::f32, DType::bf16, DType::i64}) {
    Tensor a = Tensor::random(dt, {2, 3, 4}, 41, -5, 5);
    Tensor b2 = Tensor::random(dt, {2, 1, 4}, 42, -5, 5);
    Tensor c = Tensor::random(dt, {2, 5, 4}, 43, -5, 5);
    EXPECT_TRUE(check_op({a, b2, c}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.concat({v[0], v[1], v[2]}, 1);
    }));
    EXPECT_TRUE(check_op({a, a}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.concat({v[0], v[1]}, 0);
    }));
    EXPECT_TRUE(check_op({a, a}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.concat({v[0], v[1]}, -1);
    }));
  }
  Tensor big = Tensor::random(DType::f32, {300, 4097}, 44, -1, 1);
  EXPECT_TRUE(check_op({big, big}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.concat({v[0], v[1]}, 1);
  }));
}

TEST(KernelsCpu, Gather) {
  Tensor data = Tensor::random(DType::f32, {5, 4, 3}, 51, -5, 5);
  Tensor idx = Tensor::from_floats(DType::i64, {2, 3}, {0, 4, -1, 2, -5, 3});
  Tensor idx32 = Tensor::from_floats(DType::i32, {4}, {3, 0, -2, 1});
  EXPECT_TRUE(check_op({data, idx},
                       [](GraphBuilder& b, std::vector<V>& v) { return b.gather(v[0], v[1], 0); }));
  EXPECT_TRUE(check_op({data, idx32},
                       [](GraphBuilder& b, std::vector<V>& v) { return b.gather(v[0], v[1], 1); }));
  Tensor idx_last = Tensor::from_floats(DType::i32, {4}, {2, 0, -3, 1});
  EXPECT_TRUE(check_op({data, idx_last}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.gather(v[0], v[1], -1);
  }));
  Tensor emb = Tensor::random(DType::bf16, {1000, 512}, 52, -1, 1);
  Tensor tok = Tensor::random(DType::i64, {64, 33}, 53, 0, 1000);
  EXPECT_TRUE(check_op({emb, tok},
                       [](GraphBuilder& b, std::vector<V>& v) { return b.gather(v[0], v[1], 0); }));
}

TEST(KernelsCpu, GatherOutOfRangeNamesNodeAndIndex) {
  GraphBuilder b;
  V d = b.input("d", DType::f32, {5, 3});
  V i = b.input("i", DType::i64, {2});
  V y = b.gather(d, i, 0);
  b.name_last("embed");
  b.output("y", y);
  Graph g = b.build();
  Tensor td = Tensor::random(DType::f32, {5, 3}, 1, -1, 1);
  Tensor ti = Tensor::from_floats(DType::i64, {2}, {1, 7});
  Tensor out(DType::f32, {2, 3});
  std::vector<Tensor> outs{out};
  auto k = cpu::make_op_kernel(*y->producer);
  EXPECT_TRUE(throws_with(
      [&] {
        k->run({td, ti}, outs, pool2());
      },
      {"embed", "Gather", "index 7", "size 5"}));
  Tensor tn = Tensor::from_floats(DType::i64, {2}, {-6, 0});
  EXPECT_TRUE(throws_with([&] { k->run({td, tn}, outs, pool2()); }, {"embed", "index -6"}));
}

void cast_all_pairs() {
  const std::vector<DType> all = {DType::f32, DType::bf16, DType::f16,
                                  DType::i64, DType::i32,  DType::boolean};
  std::vector<float> vals;
  for (int i = 0; i < 4097; ++i) {
    const float v = float((i % 41) - 20) * 0.37f;  // fractions, negatives, zeros
    vals.push_back(v);
  }
  for (DType from : all) {
    Tensor x = Tensor::from_floats(from, {4097}, vals);
    for (DType to : all) {
      EXPECT_TRUE(
          check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.cast(v[0], to); }))
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
  // bf16 rounds to nearest even (not truncation), f16 too; float -> bool is != 0.
  Tensor f = Tensor::from_floats(DType::f32, {4}, {1.00390625f, 1.01171875f, 0.0f, -0.0f});
  GraphBuilder b;
  V in = b.input("x", DType::f32, {4});
  V yb = b.cast(in, DType::bf16);
  V yo = b.cast(in, DType::boolean);
  b.output("yb", yb);
  b.output("yo", yo);
  Graph g = b.build();
  Tensor ob(DType::bf16, {4}), oo(DType::boolean, {4});
  std::vector<Tensor> o1{ob}, o2{oo};
  cpu::make_op_kernel(*yb->producer)->run({f}, o1, pool2());
  cpu::make_op_kernel(*yo->producer)->run({f}, o2, pool2());
  EXPECT_EQ(ob.data_as<uint16_t>()[0], 0x3f80);  // 1 + 2^-8: tie -> even (1.0)
  EXPECT_EQ(ob.data_as<uint16_t>()[1], 0x3f82);  // 1 + 3*2^-8: tie -> even (1 + 2^-6)
  EXPECT_EQ(oo.data_as<uint8_t>()[0], 1);
  EXPECT_EQ(oo.data_as<uint8_t>()[2], 0);
  EXPECT_EQ(oo.data_as<uint8_t>()[3], 0);
}

// Runs the row op f on x ([rows, cols] f32) and on each row alone: the pipelined row loops
// (Softmax: three rows' passes in one loop; LayerNorm and RMSNorm: two rows' output passes with
// the next two rows' statistics) must give each row exactly what it gives alone. Returns the
// output of the whole tensor.
Tensor expect_rows_as_alone(const std::function<V(GraphBuilder&, V)>& f, const Tensor& x) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  Tensor all = run_eager_op(f, x);
  const float* p = x.data_as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    Tensor alone =
        run_eager_op(f, Tensor::from_floats(DType::f32, {1, cols},
                                            std::vector<float>(p + r * cols, p + (r + 1) * cols)));
    for (int64_t c = 0; c < cols; ++c) {
      const float a = all.data_as<float>()[r * cols + c], e = alone.data_as<float>()[c];
      EXPECT_TRUE(a == e || (std::isnan(a) && std::isnan(e))) << "row " << r << " col " << c;
    }
  }
  return all;
}

TEST(KernelsCpu, SoftmaxRowsStayIndependent) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t rows = 6, cols = 37;
  Tensor x = Tensor::random(DType::f32, {rows, cols}, 62, -3, 3);
  float* p = x.data_as<float>();
  p[1 * cols + 5] = std::nanf("");
  for (int64_t c = 0; c < cols; ++c) p[2 * cols + c] = -inf;
  p[3 * cols + 36] = inf;
  p[4 * cols + 0] = -inf;
  Tensor out = expect_rows_as_alone([](GraphBuilder& b, V v) { return b.softmax(v); }, x);
  const float* o = out.data_as<float>();
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_TRUE(std::isnan(o[1 * cols + c])) << c;  // the NaN row
    EXPECT_TRUE(std::isnan(o[2 * cols + c])) << c;  // all -inf: 0 / 0, as in PyTorch
    EXPECT_TRUE(std::isnan(o[3 * cols + c])) << c;  // +inf: inf - inf, and the sum spreads it
  }
  EXPECT_EQ(o[4 * cols + 0], 0.0f);
}

// Rows whose squares overflow f32 are normalized alone at a rescaled size: one among the rows the
// pipelined loop computes statistics for (row 5), one in the last group (row 8), a NaN row
// (row 2), next to ordinary rows.
TEST(KernelsCpu, NormRowsStayIndependent) {
  const int64_t rows = 9, cols = 1031;
  Tensor x = Tensor::random(DType::f32, {rows, cols}, 63, -3, 3);
  float* p = x.data_as<float>();
  for (int64_t c = 0; c < cols; ++c) p[5 * cols + c] *= 1e25f;
  p[8 * cols + 7] = 3e38f;
  p[2 * cols + 9] = std::nanf("");
  Tensor w = Tensor::random(DType::f32, {cols}, 64, 0.5, 1.5);
  Tensor bias = Tensor::random(DType::f32, {cols}, 65, -1, 1);
  Tensor ln = expect_rows_as_alone(
      [&](GraphBuilder& b, V v) {
        return b.layer_norm(v, b.constant(w, "w"), b.constant(bias, "b"), 1e-5);
      },
      x);
  expect_rows_as_alone([&](GraphBuilder& b, V v) { return b.rms_norm(v, b.constant(w, "w")); }, x);
  EXPECT_TRUE(std::isfinite(ln.data_as<float>()[5 * cols]));  // rescaled, not overflowed
  EXPECT_TRUE(std::isnan(ln.data_as<float>()[2 * cols]));
  EXPECT_TRUE(std::isfinite(ln.data_as<float>()[3 * cols]));
}

// One thread and several threads give identical results (chunking never changes the math of
// elementwise ops and rows are never split).
TEST(KernelsCpu, ThreadCountDoesNotChangeResults) {
  ThreadPool one(1), three(3);
  Tensor x = Tensor::random(DType::f32, {300, 1000}, 61, -3, 3);
  for (int op = 0; op < 3; ++op) {
    GraphBuilder b;
    V in = b.input("x", DType::f32, {300, 1000});
    V y = op == 0 ? b.gelu(in) : op == 1 ? b.softmax(in) : b.layer_norm(in, nullptr, nullptr);
    b.output("y", y);
    Graph g = b.build();
    auto k = cpu::make_op_kernel(*y->producer);
    Tensor o1(DType::f32, {300, 1000}), o3(DType::f32, {300, 1000});
    std::vector<Tensor> v1{o1}, v3{o3};
    k->run({x}, v1, one);
    k->run({x}, v3, three);
    EXPECT_EQ(std::memcmp(o1.data(), o3.data(), o1.nbytes()), 0) << op;
  }
}

TEST(KernelsCpu, UnaryAllDtypesAndSizes) { unary_all_dtypes_and_sizes(); }
TEST(KernelsCpu, BinaryBroadcastFloat) { binary_broadcast_float(); }
TEST(KernelsCpu, CompareAndWhere) { compare_and_where(); }
TEST(KernelsCpu, NormsSoftmaxReductions) { norms_softmax_reductions(); }
TEST(KernelsCpu, CastAllPairs) { cast_all_pairs(); }

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
    hwy::SetSupportedTargetsForTest(0);
  }
}

}  // namespace
}  // namespace ubfuse
