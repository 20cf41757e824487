// MaxPool, AveragePool and ReduceProd beyond the conformance cases (ops_conformance_test.cc):
// values worked out by hand for ceil_mode, count_include_pad and MaxPool's indices, a symbolic
// length through run-time planning, and the errors for bad attributes and operands.
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;
using testing::values;
using Ints = std::vector<int64_t>;

Tensor run_one(const Graph& g, const Options& o, const Tensor& x, const std::string& out = "y") {
  return compile(g, o).run({{"x", x}}).at(out);
}

// x = 0..15 as [1, 1, 4, 4].
Tensor iota16() {
  std::vector<float> v(16);
  for (size_t i = 0; i < v.size(); i++) v[i] = float(i);
  return Tensor::from_floats(f32, {1, 1, 4, 4}, v);
}

TEST(PoolOps, CeilModeAndCountIncludePadByHand) {
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    {  // 3x3 windows at stride 2 over 4x4: ceil_mode adds the windows starting at 2
      GraphBuilder b;
      b.output(
          "y",
          b.op(OpKind::AveragePool, {b.input("x", f32, {1, 1, 4, 4})},
               {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}}));
      // windows rows/cols {0,1,2} and {2,3}: means of 9, 6, 6 and 4 elements
      EXPECT_EQ(values(run_one(b.build(), o, iota16())), (std::vector<double>{5, 6.5, 11, 12.5}));
    }
    {  // pads of 1 counted in the divisor: the corner window holds 0, 1, 4, 5 and five pads
      GraphBuilder b;
      b.output("y", b.op(OpKind::AveragePool, {b.input("x", f32, {1, 1, 4, 4})},
                         {{"kernel_shape", Ints{3, 3}},
                          {"strides", Ints{2, 2}},
                          {"pads", Ints{1, 1, 1, 1}},
                          {"count_include_pad", int64_t(1)}}));
      EXPECT_NEAR(values(run_one(b.build(), o, iota16()))[0], 10.0 / 9, 1e-6);
    }
  }
}

TEST(PoolOps, MaxPoolIndicesRowAndColumnMajor) {
  for (int64_t order : {0, 1}) {
    GraphBuilder b;
    auto vi = b.op_outputs(
        OpKind::MaxPool, {b.input("x", f32, {1, 1, 4, 4})},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"storage_order", order}}, 2);
    b.output("y", vi[0]);
    b.output("i", vi[1]);
    Graph g = b.build();
    auto r = compile(g, testing::eager_opts()).run({{"x", iota16()}});
    EXPECT_EQ(values(r.at("y")), (std::vector<double>{5, 7, 13, 15}));
    // the max of each window is its bottom right element: (1, 1), (1, 3), (3, 1), (3, 3)
    EXPECT_EQ(values(r.at("i")), order == 0 ? (std::vector<double>{5, 7, 13, 15})
                                            : (std::vector<double>{5, 13, 7, 15}));
    EXPECT_EQ(r.at("i").dtype(), i64);
  }
}

TEST(PoolOps, SymbolicLengthPlansPerRun) {
  GraphBuilder b;
  auto x = b.input("x", f32, Shape{1, 2, "len"});
  b.output("y", b.op(OpKind::MaxPool, {x},
                     {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}));
  b.output("p", b.op(OpKind::ReduceProd, {x}, {{"keepdims", int64_t(0)}}));
  Graph g = b.build();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, o);
    for (int64_t len : {1, 2, 9}) {
      std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {1, 2, len}, 5, 0.5, 1.5)}};
      auto want = ref::run_graph(g, in);
      auto got = m.run(in);
      for (auto& [name, w] : want) EXPECT_TRUE(testing::close_to_ref(got.at(name), w)) << len;
    }
  }
}

TEST(PoolOps, BadAttributesAndOperandsNameNodeOpAndHint) {
  auto pool = [](OpKind k, DType t, Sizes s, Attrs a) {
    GraphBuilder b;
    b.output("y", b.op(k, {b.input("x", t, to_shape(s))}, std::move(a), "pool1"));
  };
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::MaxPool, f32, {1, 2, 5}, {});
      },
      {"'pool1' (MaxPool)", "missing attribute 'kernel_shape'", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::MaxPool, f32, {1, 2, 5, 5}, {{"kernel_shape", Ints{3}}});
      },
      {"'pool1' (MaxPool)", "kernel_shape", "expected 2", "[1,2,5,5] f32", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::AveragePool, f32, {1, 2, 5},
             {{"kernel_shape", Ints{2}}, {"pads", Ints{2, 0}}});
      },
      {"'pool1' (AveragePool)", "pads [2,0] reach past the window [2]", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::AveragePool, f32, {1, 2, 2}, {{"kernel_shape", Ints{3}}});
      },
      {"'pool1' (AveragePool)", "gives no output", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::MaxPool, f32, {1, 2, 5},
             {{"kernel_shape", Ints{2}}, {"pads", Ints{1, 1}}, {"auto_pad", std::string("VALID")}});
      },
      {"'pool1' (MaxPool)", "explicit pads [1,1] with auto_pad VALID", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::MaxPool, f32, {1, 2, 5},
             {{"kernel_shape", Ints{2}}, {"ceil_mode", int64_t(2)}});
      },
      {"'pool1' (MaxPool)", "ceil_mode must be 0 or 1"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::MaxPool, f32, {2, 5}, {{"kernel_shape", Ints{2}}});
      },
      {"'pool1' (MaxPool)", "1 to 3 spatial axes, got rank 2"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::AveragePool, i64, {1, 2, 5}, {{"kernel_shape", Ints{2}}});
      },
      {"'pool1' (AveragePool)", "must be f32, bf16 or f16, got i64", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pool(OpKind::ReduceProd, i32, {3, 4}, {});
      },
      {"'pool1' (ReduceProd)", "i32"}));
}

// 8-bit integers pool exactly (a max moves one of its inputs).
TEST(PoolOps, MaxPoolOnUint8) {
  GraphBuilder b;
  b.output("y", b.op(OpKind::MaxPool, {b.input("x", u8, {1, 1, 4})}, {{"kernel_shape", Ints{2}}}));
  Graph g = b.build();
  Tensor x(u8, {1, 1, 4});
  const uint8_t v[4] = {3, 250, 7, 9};
  for (int i = 0; i < 4; i++) x.set(i, v[i]);
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = run_one(g, o, x);
    EXPECT_EQ(y.dtype(), u8);
    EXPECT_EQ(values(y), (std::vector<double>{250, 250, 9}));
  }
}

}  // namespace
}  // namespace ubfuse
