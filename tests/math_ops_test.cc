// The elementwise math ops ONNX models use beyond arithmetic and activations (Sin, Cos, Floor,
// Ceil, Round, Sign, IsNaN, IsInf, Mod, Fmod, PowTensor): special values in every float dtype,
// eager and graph mode (tile interpreter and generated C++) against the reference, the integer
// forms against hand-computed results, their errors, and that they fuse.
#include <cmath>
#include <limits>

#include "kernels/reference/reference.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::engine_opts;
using testing::throws_with;
using V = GraphBuilder::V;

using testing::kInf;
using testing::kNaN;

using testing::kEngines;

// Values where the ops' special cases are: signed zeros and infinities, NaN, halves (Round's
// ties), the edges of f32's integers, subnormals, multiples of pi/2 and a sin/cos argument past
// the fast reduction.
std::vector<float> special_values() {
  return {0.0f,   -0.0f,      kInf,        -kInf,      kNaN,        0.5f,   1.5f,    2.5f,
          -0.5f,  -2.5f,      0.49999997f, 8388609.0f, -8388607.5f, 1e-40f, -1e-40f, 1e30f,
          -3e38f, 1.5707964f, 3.1415927f,  300000.0f,  -123456.7f,  7.0f,   -7.0f,   3.0f};
}

Tensor tensor_of(DType t, const std::vector<float>& v) {
  return Tensor::from_floats(t, {int64_t(v.size())}, v);
}

::testing::AssertionResult all_engines_match(const Graph& g,
                                             const std::map<std::string, Tensor>& in) {
  for (const std::string& e : kEngines) {
    auto r = testing::matches_reference(g, in, engine_opts(e));
    if (!r) return r << " (" << e << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(MathOps, UnarySpecialValues) {
  using F = V (GraphBuilder::*)(V);
  const std::vector<std::pair<const char*, F>> ops = {
      {"sin", &GraphBuilder::sin},       {"cos", &GraphBuilder::cos},
      {"floor", &GraphBuilder::floor},   {"ceil", &GraphBuilder::ceil},
      {"round", &GraphBuilder::round},   {"sign", &GraphBuilder::sign},
      {"is_nan", &GraphBuilder::is_nan}, {"is_inf", &GraphBuilder::is_inf},
  };
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (const auto& [name, f] : ops) {
      GraphBuilder b;
      b.output("y", (b.*f)(b.input("x", t, {24})));
      EXPECT_TRUE(all_engines_match(b.build(), {{"x", tensor_of(t, special_values())}}))
          << name << " " << dtype_name(t);
    }
  }
}

TEST(MathOps, RoundTiesToEvenAndSignedZeros) {
  GraphBuilder b;
  V x = b.input("x", DType::f32, {8});
  b.output("round", b.round(x));
  b.output("sin", b.sin(x));
  b.output("sign", b.sign(x));
  Graph g = b.build();
  const Tensor in =
      tensor_of(DType::f32, {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0.49999997f, -0.0f, 0.0f});
  for (const std::string& e : kEngines) {
    auto out = compile(g, engine_opts(e)).run({{"x", in}});
    const std::vector<float> want = {0, 2, 2, -0.0f, -2, 0, -0.0f, 0};
    for (int64_t i = 0; i < 8; i++) {
      EXPECT_EQ(out.at("round").get(i), want[size_t(i)]) << e << " " << i;
      EXPECT_EQ(std::signbit(out.at("round").get(i)), std::signbit(want[size_t(i)]))
          << e << " " << i;
    }
    EXPECT_TRUE(std::signbit(out.at("sin").get(6))) << e << ": sin(-0) is -0";
    EXPECT_TRUE(std::signbit(out.at("sign").get(6))) << e << ": sign(-0) is -0";
  }
}

// Each pair of special values as (a, b), for the binary ops.
TEST(MathOps, BinarySpecialValues) {
  const std::vector<float> sv = special_values();
  std::vector<float> av, bv;
  for (float a : sv) {
    for (float c : sv) {
      av.push_back(a);
      bv.push_back(c);
    }
  }
  // Integral exponents across the squaring bound, with negative bases.
  for (float a : {-3.0f, -1.0f, 1.0001f, 2.0f, -0.5f}) {
    for (float c : {-65.0f, -64.0f, -3.0f, 0.0f, 5.0f, 63.0f, 64.0f, 65.0f, 2.5f}) {
      av.push_back(a);
      bv.push_back(c);
    }
  }
  const int64_t n = int64_t(av.size());
  using F = V (GraphBuilder::*)(V, V);
  const std::vector<std::pair<const char*, F>> ops = {{"mod", &GraphBuilder::mod},
                                                      {"fmod", &GraphBuilder::fmod},
                                                      {"pow_tensor", &GraphBuilder::pow_tensor}};
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (const auto& [name, f] : ops) {
      GraphBuilder b;
      b.output("y", (b.*f)(b.input("a", t, {n}), b.input("b", t, {n})));
      EXPECT_TRUE(all_engines_match(b.build(), {{"a", tensor_of(t, av)}, {"b", tensor_of(t, bv)}}))
          << name << " " << dtype_name(t);
    }
  }
}

// fmod is exact however far apart a and b are (several reduction steps), and so is mod.
TEST(MathOps, FmodIsExact) {
  const std::vector<float> av = {3e38f, -3e38f, 1e30f, 123456789.0f, 1e-30f, 5e-39f, 7.5f, -7.5f};
  const std::vector<float> bv = {1e-38f, 3.0f, 1e-45f, 0.1f, 3e-45f, 1.1e-38f, 2.0f, 2.0f};
  GraphBuilder b;
  V a = b.input("a", DType::f32, {8}), d = b.input("b", DType::f32, {8});
  b.output("fmod", b.fmod(a, d));
  b.output("mod", b.mod(a, d));
  Graph g = b.build();
  for (const std::string& e : kEngines) {
    auto out = compile(g, engine_opts(e))
                   .run({{"a", tensor_of(DType::f32, av)}, {"b", tensor_of(DType::f32, bv)}});
    for (size_t i = 0; i < av.size(); i++) {
      const float want = std::fmod(av[i], bv[i]);
      EXPECT_EQ(out.at("fmod").get(int64_t(i)), want) << e << " " << av[i] << " " << bv[i];
      float m = want;
      if (m != 0 && (m < 0) != (bv[i] < 0)) m += bv[i];
      EXPECT_EQ(out.at("mod").get(int64_t(i)), m) << e << " " << av[i] << " " << bv[i];
    }
  }
}

TEST(MathOps, IntegerForms) {
  for (DType t : {DType::i32, DType::i64}) {
    GraphBuilder b;
    V a = b.input("a", t, {8}), d = b.input("b", t, {8});
    b.output("mod", b.mod(a, d));
    b.output("fmod", b.fmod(a, d));
    b.output("pow", b.pow_tensor(a, d));
    b.output("sign", b.sign(a));
    Graph g = b.build();
    const Tensor ta = Tensor::from_floats(t, {8}, {-7, 7, -7, 7, 2, -3, -1, 0});
    const Tensor tb = Tensor::from_floats(t, {8}, {3, -3, -3, 3, 10, 3, -3, 5});
    const std::vector<double> mod = {2, -2, -1, 1, 2, 0, -1, 0};
    const std::vector<double> fmod = {-1, 1, -1, 1, 2, 0, -1, 0};
    const std::vector<double> pow = {-343, 0, 0, 343, 1024, -27, -1, 0};
    const std::vector<double> sign = {-1, 1, -1, 1, 1, -1, -1, 0};
    for (const std::string& e : kEngines) {
      auto out = compile(g, engine_opts(e)).run({{"a", ta}, {"b", tb}});
      for (int64_t i = 0; i < 8; i++) {
        EXPECT_EQ(out.at("mod").get(i), mod[size_t(i)]) << e << " " << i;
        EXPECT_EQ(out.at("fmod").get(i), fmod[size_t(i)]) << e << " " << i;
        EXPECT_EQ(out.at("pow").get(i), pow[size_t(i)]) << e << " " << i;
        EXPECT_EQ(out.at("sign").get(i), sign[size_t(i)]) << e << " " << i;
      }
      EXPECT_EQ(out.at("mod").dtype(), t);
    }
  }
  // Wrapping, as the other integer arithmetic; the least i32 mod -1.
  GraphBuilder b;
  V a = b.input("a", DType::i32, {2}), d = b.input("b", DType::i32, {2});
  b.output("pow", b.pow_tensor(a, d));
  b.output("mod", b.mod(a, d));
  Graph g = b.build();
  auto out = compile(g, testing::eager_opts())
                 .run({{"a", Tensor::from_floats(DType::i32, {2}, {-2147483648.0f, 3})},
                       {"b", Tensor::from_floats(DType::i32, {2}, {-1, 21})}});
  EXPECT_EQ(out.at("mod").get(0), 0);
  EXPECT_EQ(out.at("pow").get(1), double(int32_t(uint32_t(10460353203ull))));  // 3^21 wrapped
}

TEST(MathOps, IntegerErrorsNameTheNode) {
  for (OpKind k : {OpKind::Mod, OpKind::Fmod, OpKind::PowTensor}) {
    GraphBuilder b;
    V a = b.input("a", DType::i64, {3}), d = b.input("b", DType::i64, {3});
    b.output("y", b.op(k, {a, d}));
    b.name_last("my_op");
    Graph g = b.build();
    // Mod and Fmod by 0; PowTensor: 0 to the power -1.
    const Tensor ta = Tensor::from_floats(DType::i64, {3}, {1, 0, 3});
    const Tensor tb =
        Tensor::from_floats(DType::i64, {3}, {1, k == OpKind::PowTensor ? -1.0f : 0.0f, 3});
    for (const std::string& e : kEngines) {
      EXPECT_TRUE(throws_with(
          [&] {
            compile(g, engine_opts(e)).run({{"a", ta}, {"b", tb}});
          },
          {"my_op", std::string(op_name(k)),
           k == OpKind::PowTensor ? "negative power" : "division by zero"}))
          << e;
    }
  }
}

TEST(MathOps, FloatOnlyOpsRejectIntegers) {
  for (OpKind k : {OpKind::Sin, OpKind::Floor, OpKind::IsNaN}) {
    GraphBuilder b;
    EXPECT_TRUE(throws_with([&] { b.op(k, {b.input("x", DType::i64, {3})}); },
                            {std::string(op_name(k)), "floating-point input", "Cast"}));
  }
}

// A rotary-embedding-like chain (positions * frequencies, cos, sin, products) with the rounding
// ops, and a chain of the binary ops and the tests, each fuse into one kernel (kMaxGroupOps
// bounds one group).
TEST(MathOps, FuseWithTheirNeighbours) {
  std::vector<Graph> graphs;
  {
    GraphBuilder b;
    V pos = b.input("pos", DType::f32, {64, 32});
    V freq = b.input("freq", DType::f32, {32});
    V x = b.input("x", DType::f32, {64, 32});
    V ang = b.mul(pos, freq);
    // One node per statement where two are arguments: evaluation order is the compiler's, and
    // the asan stage (clang) must find the kernels ctest's stage (GCC) compiled.
    V sn = b.sin(ang);
    V rot = b.mul(b.neg(x), sn);
    V y = b.add(b.mul(x, b.cos(ang)), rot);
    y = b.add(y, b.floor(b.mul(x, 3.0)));
    y = b.add(y, b.round(b.ceil(x)));
    b.output("y", b.add(y, b.sign(x)));
    graphs.push_back(b.build());
  }
  {
    GraphBuilder b;
    b.input("pos", DType::f32, {64, 32});
    V freq = b.input("freq", DType::f32, {32});
    V x = b.input("x", DType::f32, {64, 32});
    V md = b.mod(x, freq);
    V y = b.add(b.fmod(x, freq), md);
    y = b.add(y, b.pow_tensor(b.abs(x), freq));
    y = b.where(b.is_nan(y), x, y);
    b.output("y", b.where(b.is_inf(y), x, y));
    graphs.push_back(b.build());
  }
  std::map<std::string, Tensor> in = {{"pos", Tensor::random(DType::f32, {64, 32}, 1, 0, 4096)},
                                      {"freq", Tensor::random(DType::f32, {32}, 2, 0.1, 1)},
                                      {"x", Tensor::random(DType::f32, {64, 32}, 3, -2, 2)}};
  for (const Graph& g : graphs) {
    for (const char* e : {"interpreter", "cpp"}) {
      EXPECT_EQ(compile(g, engine_opts(e)).kernels().size(), 1u) << e;
      EXPECT_TRUE(testing::matches_reference(g, in, engine_opts(e))) << e;
    }
  }
}

}  // namespace
}  // namespace ubfuse
