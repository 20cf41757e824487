// IR: builder, shape inference (static and symbolic), printer, verifier, user-error messages.
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;

TEST(Builder, SeedBlockTypes) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 2048, 4096});
  auto r = b.input("residual", f32, {"batch", 2048, 4096});
  auto w = b.input("w", f32, {4096});
  auto bias = b.input("b", f32, {4096});
  auto y = b.silu(b.layer_norm(b.add(x, r), w, bias, 1e-5));
  b.output("y", y);
  Graph g = b.build();
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[batch,2048,4096]");
  EXPECT_EQ(g.num_nodes(), 3);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%layernorm0 = LayerNorm(%add0, %w, %b) {eps=1e-05} : f32[batch,2048,4096]"),
            std::string::npos)
      << text;
}

// A run-time dim is named after its node's id; a clone (compile() works on one) keeps the ids,
// so the verifier's re-inference names it alike even after nodes were removed before it.
TEST(Graph, CloneKeepsNodeIdsOfRunTimeDims) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 2, "len"});
  b.neg(x);  // removed below: the Conv's id is no longer its topological position
  ConvOptions o;
  o.strides = {2};
  auto y = b.conv(x, b.constant(Tensor::random(f32, {3, 2, 3}, 1)), nullptr, o);
  b.output("y", y);
  Graph g = b.build();
  ASSERT_EQ(g.remove_dead_nodes(), 1);
  ASSERT_TRUE(!y->shape[2].is_static() && y->shape[2].str()[0] == '$') << shape_str(y->shape);
  Graph c = g.clone();
  EXPECT_NO_THROW(verify(c));
  EXPECT_EQ(shape_str(c.outputs()[0].second->shape), shape_str(y->shape));
}

TEST(Shape, BroadcastAndSymbols) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"b", 1, 8});
  auto y = b.input("y", f32, {"s", 8});
  EXPECT_EQ(shape_str(b.add(x, y)->shape), "[b,s,8]");
  auto z = b.reshape(x, {-1});
  EXPECT_EQ(shape_str(z->shape), "[8*b]");
  auto back = b.reshape(z, {-1, 8});
  EXPECT_EQ(shape_str(back->shape), "[b,8]");
  EXPECT_EQ(shape_str(b.reduce_sum(x, false)->shape), "[b,1]");
  EXPECT_EQ(shape_str(b.transpose(x, {2, 0, 1})->shape), "[8,b,1]");
  auto m = b.input("m", f32, {"b", 8, 16});
  EXPECT_EQ(shape_str(b.matmul(x, m)->shape), "[b,1,16]");
  EXPECT_EQ(shape_str(b.slice(m, {2}, {100}, {2}, {3})->shape), "[b,8,5]");
  EXPECT_EQ(shape_str(b.concat({m, m}, -1)->shape), "[b,8,32]");
}

TEST(Errors, ShapeMismatchNamesNodeOpShapes) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3});
  auto y = b.input("y", f32, {4});
  EXPECT_TRUE(throws_with([&] { b.add(x, y); },
                          {"node 'add0' (Add)", "cannot broadcast", "[2,3]", "[4]", "hint"}));
}

TEST(Errors, DtypeMismatch) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3});
  auto y = b.input("y", bf16, {2, 3});
  EXPECT_TRUE(
      throws_with([&] { b.mul(x, y); }, {"(Mul)", "dtype mismatch", "f32 vs bf16", "Cast"}));
}

TEST(Errors, WrongArity) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3});
  EXPECT_TRUE(throws_with([&] { b.op(OpKind::Add, {x}); }, {"(Add)", "takes 2 input(s), got 1"}));
}

TEST(Errors, BadAttribute) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::Gelu, {x}, {{"approximate", std::string("fast")}});
      },
      {"(Gelu)", "approximate", "\"fast\""}));
  EXPECT_TRUE(
      throws_with([&] { b.layer_norm(x, nullptr, nullptr, -1.0); }, {"(LayerNorm)", "eps"}));
  EXPECT_TRUE(throws_with([&] { b.transpose(x, {0, 0}); }, {"(Transpose)", "not a permutation"}));
  auto w = b.input("w", f32, {5});
  EXPECT_TRUE(throws_with([&] { b.layer_norm(x, w, nullptr); },
                          {"(LayerNorm)", "weight must have shape [3]", "[5]"}));
  EXPECT_TRUE(throws_with([&] { b.reshape(x, {4, -1}); }, {"(Reshape)", "cannot reshape"}));
}

TEST(Errors, RunTimeInputs) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 4});
  auto r = b.input("r", f32, {"batch", 4});
  b.output("y", b.add(x, r));
  Graph g = b.build();
  auto m = compile(g, testing::eager_opts());
  Tensor a = Tensor::zeros(f32, {2, 4}), c = Tensor::zeros(f32, {3, 4});
  EXPECT_TRUE(throws_with([&] { m.run({{"x", a}}); }, {"missing input 'r'", "f32[batch,4]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", a}, {"r", a}, {"q", a}});
      },
      {"unknown input 'q'", "x, r"}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", a}, {"r", c}});
      },
      {"symbol 'batch'", "input 'x' dim 0", "input 'r' dim 0"}));
  Tensor h = Tensor::zeros(f16, {2, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", a}, {"r", h}});
      },
      {"input 'r' has dtype f16", "expects f32"}));
  Tensor w = Tensor::zeros(f32, {2, 5});
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", a}, {"r", w}});
      },
      {"input 'r' dim 1 is 5", "expects 4"}));
}

TEST(Errors, UnknownOptionListsValidOnes) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.output("y", b.relu(x));
  Graph g = b.build();
  EXPECT_TRUE(throws_with(
      [&] {
        compile(g, {{"ge.exec.enableOperatorFusionn", "1"}});
      },
      {"unknown option 'ge.exec.enableOperatorFusionn'", "ge.exec.enableOperatorFusion",
       "ub_bytes"}));
  EXPECT_TRUE(throws_with(
      [&] {
        compile(g, {{"ge.exec.enableOperatorFusion", "yes"}});
      },
      {"bad value 'yes'", "valid: 0, 1"}));
}

TEST(Graph, CloneAndDce) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.exp(x);  // dead
  b.output("y", b.relu(x));
  Graph g = b.build();
  Graph c = g.clone();
  EXPECT_EQ(c.num_nodes(), 2);
  EXPECT_EQ(c.remove_dead_nodes(), 1);
  EXPECT_EQ(g.num_nodes(), 2);
}

// Run-time dims are named after their node's id, so a clone (compile's first step) keeps the ids:
// renumbered after a removed node, re-inferring a Range over a run-time length named another dim.
TEST(Graph, CloneKeepsNodeIds) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.exp(x);  // dead: removed below, a gap in the ids
  auto n = b.input("n", i64, {});
  auto i64_scalar = [&](float v) { return b.constant(Tensor::from_floats(i64, {}, {v})); };
  b.output("y", b.cast(b.range(i64_scalar(0), n, i64_scalar(1)), f32));
  b.output("x2", b.relu(x));
  Graph g = b.build();
  EXPECT_EQ(g.remove_dead_nodes(), 1);
  Graph c = g.clone();
  EXPECT_NO_THROW(verify(c));
  for (Node* node : g.topo_order()) EXPECT_EQ(c.node_by_name(node->name)->id, node->id);
  auto out = compile(g, {{"ge.exec.enableOperatorFusion", "1"}})
                 .run({{"x", Tensor::from_floats(f32, {4}, {1, -2, 3, -4})},
                       {"n", Tensor::from_floats(i64, {}, {5})}});
  EXPECT_EQ(out.at("y").numel(), 5);
}

TEST(DType, HalfConversionsRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1e-5f, 5.96e-8f, 1e-3f, 3.14159f}) {
    EXPECT_NEAR(f16_to_f32(f32_to_f16(v)), v, std::fabs(v) * 1e-3 + 6e-8) << v;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);  // tie rounds to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

}  // namespace
}  // namespace ubfuse
