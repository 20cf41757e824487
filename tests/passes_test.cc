// The simplify pass: constant folding (with its caps), scalar identities, no-op casts, reshapes,
// transposes and expands; what must NOT be simplified (x*0, broadcasting identities); graph
// output names kept; numbers checked against the double reference of the original graph. The
// cse pass: what merges and what does not.
#include <cmath>

#include "passes_test_util.h"

namespace ubfuse {
namespace {

using testing::count_op;
using testing::eager_opts;
using testing::graph_opts;
using testing::matches_reference;
using testing::random_inputs;
using testing::same_as_original;
using testing::simplified;

Tensor full(DType t, Sizes s, double v) {
  Tensor x(t, s);
  for (int64_t i = 0; i < x.numel(); i++) x.set(i, v);
  return x;
}

TEST(Simplify, FoldsConstantSubgraph) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 8});
  auto c = b.mul(b.sqrt(b.scalar(2.0)), b.scalar(3.0));  // all-constant: folds to one scalar
  b.output("y", b.add(x, c));
  Graph g = b.build();
  Graph s = simplified(g);
  EXPECT_EQ(s.num_nodes(), 2) << print_graph(s);
  EXPECT_EQ(count_op(s, OpKind::Constant), 1);
  EXPECT_EQ(count_op(s, OpKind::Add), 1);
  Node* k = s.outputs()[0].second->producer->inputs[1]->producer;
  ASSERT_EQ(k->op, OpKind::Constant);
  EXPECT_EQ(k->payload.get(0), double(float(3 * std::sqrt(2.0))));
  EXPECT_TRUE(same_as_original(g, s, random_inputs(g, 1)));
}

TEST(Simplify, FoldRoundsToTheDtype) {
  GraphBuilder b;
  auto x = b.input("x", bf16, {8});
  b.output("y", b.add(x, b.sqrt(b.scalar(2.0, bf16))));
  Graph s = simplified(b.build());
  Node* k = s.outputs()[0].second->producer->inputs[1]->producer;
  ASSERT_EQ(k->op, OpKind::Constant);
  EXPECT_EQ(k->payload.dtype(), bf16);
  EXPECT_EQ(k->payload.get(0), double(bf16_to_f32(f32_to_bf16(float(std::sqrt(2.0))))));
}

TEST(Simplify, FoldCapsKeepBigBroadcastsUnfolded) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1024, 1024});
  auto small = b.expand(b.scalar(0.5), {1024});      // 1K elements: folds
  auto big = b.expand(b.scalar(2.0), {1024, 1024});  // 1M elements from 1: stays an Expand
  b.output("y", b.add(b.mul(x, big), b.reshape(small, {1024, 1})));
  Graph s = simplified(b.build());
  EXPECT_EQ(count_op(s, OpKind::Expand), 1) << print_graph(s);
  EXPECT_EQ(count_op(s, OpKind::Reshape), 0) << print_graph(s);
}

TEST(Simplify, IntegerDivisionByZeroIsNotFolded) {
  GraphBuilder b;
  auto q = b.div(b.constant(full(i64, {2}, 7)), b.constant(full(i64, {2}, 0)));
  auto r = b.div(b.constant(full(i64, {2}, 7)), b.constant(full(i64, {2}, 2)));
  b.output("q", q);
  b.output("r", r);
  Graph s = simplified(b.build());
  EXPECT_EQ(count_op(s, OpKind::Div), 1) << print_graph(s);
  Node* k = s.outputs()[1].second->producer;
  ASSERT_EQ(k->op, OpKind::Constant);
  EXPECT_EQ(k->payload.get(0), 3.0);  // truncating integer division, as the reference does
}

TEST(Simplify, ScalarIdentitiesVanish) {
  GraphBuilder b;
  auto x = b.input("x", f32, {3, 5});
  auto y = b.mul(x, 1.0);
  y = b.mul(b.scalar(1.0), y);
  y = b.add(y, 0.0);
  y = b.add(b.scalar(0.0), y);
  y = b.sub(y, 0.0);
  y = b.div(y, 1.0);
  y = b.pow(y, 1.0);
  y = b.neg(b.neg(y));
  y = b.cast(y, f32);
  b.output("y", y);
  Graph g = b.build();
  Graph s = simplified(g);
  EXPECT_EQ(s.num_nodes(), 0) << print_graph(s);
  ASSERT_EQ(s.outputs().size(), 1u);
  EXPECT_EQ(s.outputs()[0].first, "y");
  EXPECT_EQ(s.outputs()[0].second, s.inputs()[0]);
  // The runtime returns an input as an output by copying it.
  auto in = random_inputs(g, 3);
  EXPECT_TRUE(matches_reference(g, in, graph_opts()));
  EXPECT_TRUE(matches_reference(g, in, eager_opts()));
}

TEST(Simplify, NanAndInfSensitiveFormsStay) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.output("zero", b.mul(x, 0.0));  // NaN * 0 is NaN, Inf * 0 is NaN
  b.output("self", b.sub(x, x));    // Inf - Inf is NaN
  b.output("ratio", b.div(x, x));   // 0 / 0 is NaN
  b.output("two", b.mul(x, 2.0));   // not an identity
  Graph g = b.build();
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, OpKind::Mul), 2) << print_graph(s);
  EXPECT_EQ(count_op(s, OpKind::Sub), 1);
  EXPECT_EQ(count_op(s, OpKind::Div), 1);
  auto in = random_inputs(g, 4);
  in["x"].set(0, NAN);
  in["x"].set(1, INFINITY);
  EXPECT_TRUE(same_as_original(g, s, in));
}

TEST(Simplify, BroadcastingIdentityIsNotANoOp) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.output("y", b.mul(x, b.constant(full(f32, {3, 4}, 1.0))));  // [4] * ones[3,4] -> [3,4]
  Graph s = simplified(b.build());
  EXPECT_EQ(count_op(s, OpKind::Mul), 1) << print_graph(s);
  EXPECT_EQ(shape_str(s.outputs()[0].second->shape), "[3,4]");
}

TEST(Simplify, CastToSameDtypeOnly) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.output("same", b.cast(x, f32));
  b.output("narrow", b.cast(x, bf16));
  Graph s = simplified(b.build());
  EXPECT_EQ(count_op(s, OpKind::Cast), 1) << print_graph(s);
  EXPECT_EQ(s.outputs()[0].second, s.inputs()[0]);
  EXPECT_EQ(s.outputs()[1].second->dtype, bf16);
}

TEST(Simplify, ReshapeChainsCollapseWithSymbols) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 4, 8});
  auto r1 = b.reshape(x, {-1, 8});     // [4*batch, 8]
  auto r2 = b.reshape(r1, {0, 2, 4});  // [4*batch, 2, 4]
  b.output("flat", r2);
  b.output("back", b.reshape(b.reshape(x, {-1, 8}), {-1, 4, 8}));  // [batch, 4, 8]: a no-op
  b.output("same", b.reshape(x, {0, 4, 8}));
  Graph g = b.build();
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, OpKind::Reshape), 1) << print_graph(s);
  Node* flat = s.outputs()[0].second->producer;
  ASSERT_EQ(flat->op, OpKind::Reshape);
  EXPECT_EQ(flat->inputs[0], s.inputs()[0]);
  EXPECT_EQ(shape_str(flat->out()->shape), shape_str(r2->shape));
  EXPECT_EQ(s.outputs()[1].second, s.inputs()[0]);
  EXPECT_EQ(s.outputs()[2].second, s.inputs()[0]);
  for (int64_t batch : {1, 3}) {
    std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {batch, 4, 8}, 5)}};
    EXPECT_TRUE(same_as_original(g, s, in));
    EXPECT_TRUE(matches_reference(g, in, graph_opts()));
  }
}

TEST(Simplify, TransposesAndExpandsThatDoNothing) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3, 4});
  auto id = b.transpose(x, {0, 1, 2});
  auto there = b.transpose(id, {2, 0, 1});
  auto back = b.transpose(there, {1, 2, 0});  // composes with `there` to the identity
  auto rot = b.transpose(b.transpose(x, {1, 0, 2}), {0, 2, 1});
  b.output("back", b.expand(back, {2, 3, 4}));
  b.output("rot", rot);
  Graph g = b.build();
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, OpKind::Expand), 0) << print_graph(s);
  EXPECT_EQ(count_op(s, OpKind::Transpose), 1) << print_graph(s);
  EXPECT_EQ(s.outputs()[0].second, s.inputs()[0]);
  EXPECT_EQ(s.outputs()[1].second->producer->attr_ints("perm"), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_TRUE(same_as_original(g, s, random_inputs(g, 6)));
}

// Gathers of one index each from a Transpose that only they read (a fused QKV split) gather from
// the Transpose's input instead, each behind its own smaller Transpose; a Transpose with another
// reader, or a Gather of several indices, stays as it was.
TEST(Simplify, ScalarGathersSinkBelowTheirTranspose) {
  for (int form = 0; form < 3; form++) {  // 0: all parts; 1: the Transpose also an output; 2: a
                                          // Gather of two indices among them
    GraphBuilder b;
    auto x = b.input("x", f32, {2, 5, 3, 2, 4});
    auto t = b.transpose(x, {2, 0, 3, 1, 4});  // [3, 2, 2, 5, 4]
    auto i64 = [&](std::vector<int64_t> v, Sizes s) {
      Tensor c(DType::i64, s);
      for (size_t i = 0; i < v.size(); i++) c.set(int64_t(i), double(v[i]));
      return b.constant(c);
    };
    b.output("q", b.gather(t, i64({0}, {}), 0));
    b.output("k", b.gather(t, i64({1}, {}), 0));
    b.output("v", form == 2 ? b.gather(t, i64({2, 0}, {2}), 0) : b.gather(t, i64({-1}, {}), 0));
    if (form == 1) b.output("t", t);
    Graph g = b.build();
    Graph s = simplified(g);
    const std::string where = "form " + std::to_string(form) + "\n" + print_graph(s);
    if (form == 0) {
      EXPECT_EQ(count_op(s, OpKind::Transpose), 3) << where;
      for (int i = 0; i < 3; i++) {
        const Node* tr = s.outputs()[size_t(i)].second->producer;
        ASSERT_EQ(tr->op, OpKind::Transpose) << where;
        EXPECT_EQ(tr->attr_ints("perm"), (std::vector<int64_t>{0, 2, 1, 3})) << where;
        EXPECT_EQ(tr->inputs[0]->producer->attr_int("axis", -1), 2) << where;
      }
    } else {
      EXPECT_EQ(count_op(s, OpKind::Transpose), 1) << where;
    }
    EXPECT_TRUE(same_as_original(g, s, random_inputs(g, 7))) << where;
  }
}

TEST(Simplify, RowOpBetweenRowRegroupingReshapes) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 3, 16});
  auto w = b.input("w", f32, {16});
  auto flat = b.reshape(x, {-1, 16});
  b.output("sm", b.reshape(b.softmax(flat), {-1, 3, 16}));      // sinks: Softmax(x)
  b.output("ln", b.reshape(b.rms_norm(flat, w), {-1, 3, 16}));  // sinks: RMSNorm(x, w)
  auto wide = b.reshape(x, {-1, 48});                           // changes the rows: stays
  b.output("wide", b.reshape(b.softmax(wide), {-1, 3, 16}));
  auto kept = b.softmax(flat);  // also read as 2-D: stays
  b.output("kept2d", kept);
  b.output("kept", b.reshape(kept, {-1, 3, 16}));
  Graph g = b.build();
  Graph s = simplified(g);
  EXPECT_EQ(s.outputs()[0].second->producer->op, OpKind::Softmax);
  EXPECT_EQ(s.outputs()[0].second->producer->inputs[0], s.inputs()[0]);
  EXPECT_EQ(s.outputs()[1].second->producer->op, OpKind::RMSNorm);
  EXPECT_EQ(s.outputs()[1].second->producer->inputs[0], s.inputs()[0]);
  EXPECT_EQ(s.outputs()[2].second->producer->op, OpKind::Reshape);
  EXPECT_EQ(s.outputs()[4].second->producer->op, OpKind::Reshape);
  EXPECT_EQ(count_op(s, OpKind::Reshape), 4) << print_graph(s);  // flat, wide and two inverses
  std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {2, 3, 16}, 8)},
                                   {"w", Tensor::random(f32, {16}, 9)}};
  EXPECT_TRUE(same_as_original(g, s, in));
}

TEST(Simplify, KeepsOutputNamesAndNodeNames) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  auto y = b.add(b.mul(x, 1.0), b.add(b.scalar(1.0), b.scalar(2.0)));
  b.name_last("sum");
  b.output("out", y);
  b.output("also", b.cast(y, f32));
  Graph s = simplified(b.build());
  ASSERT_EQ(s.outputs().size(), 2u);
  EXPECT_EQ(s.outputs()[0].first, "out");
  EXPECT_EQ(s.outputs()[1].first, "also");
  EXPECT_EQ(s.outputs()[0].second->name, "sum");
  EXPECT_EQ(s.outputs()[1].second->name, "sum");
  EXPECT_NE(print_graph(s).find("%sum = Add(%x, %"), std::string::npos) << print_graph(s);
}

TEST(Simplify, GraphOptimizerOptionSwitchesPassesOff) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4});
  b.output("y", b.mul(x, 1.0));
  Graph g = b.build();
  auto on = compile(g, graph_opts());
  EXPECT_EQ(count_op(on.graph(), OpKind::Mul), 0) << print_graph(on.graph());
  Options off = graph_opts();
  off["ge.common_graph_optimizer"] = "0";
  EXPECT_EQ(count_op(compile(g, off).graph(), OpKind::Mul), 1);
}

Graph cse(const Graph& g) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_cse_pass());
  return testing::run_passes(g, std::move(p));
}

TEST(Cse, SameComputationsMerge) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 8});
  auto z = b.input("z", f32, {4, 8});
  // exp(x) twice (and the Adds reading them, once merged), two Transposes of other perms, a
  // graph output that repeats another node, two Host callbacks (side effects: both stay), equal
  // scalar constants (merged) and equal [4, 32] ones (not compared: weights).
  auto e1 = b.exp(x), e2 = b.exp(x);
  auto sum = b.add(b.add(e1, z), b.add(e2, z));
  auto t1 = b.transpose(x, {1, 0}), t2 = b.transpose(x, {1, 0});
  b.output("y", b.mul(sum, b.transpose(b.add(t1, t2), {1, 0})));
  b.output("tanh1", b.tanh(z));
  b.output("tanh2", b.tanh(z));
  int calls = 0;
  b.output("h", b.add(b.host(x, [&](Tensor&) { calls++; }), b.host(x, [&](Tensor&) { calls++; })));
  b.output("c", b.add(b.mul(x, 3.0), b.mul(x, 3.0)));
  const Tensor w = Tensor::random(f32, {8, 32}, 3);
  b.output("w", b.add(b.matmul(x, b.constant(w)), b.matmul(x, b.constant(w))));
  Graph g = b.build();
  Graph s = cse(g);
  EXPECT_EQ(count_op(s, OpKind::Exp), 1) << print_graph(s);
  EXPECT_EQ(count_op(s, OpKind::Transpose), 2) << print_graph(s);  // t1 = t2, and the outer one
  EXPECT_EQ(count_op(s, OpKind::Tanh), 2) << print_graph(s);       // both graph outputs
  EXPECT_EQ(count_op(s, OpKind::Host), 2) << print_graph(s);
  EXPECT_EQ(count_op(s, OpKind::Mul), 2) << print_graph(s);  // the 3s merged, then x * 3; y's
  EXPECT_EQ(count_op(s, OpKind::MatMul), 2) << print_graph(s);
  // (e1 + z) = (e2 + z), their sum, t1 + t1, the Hosts' sum, c's and w's.
  EXPECT_EQ(count_op(s, OpKind::Add), 6) << print_graph(s);
  EXPECT_TRUE(same_as_original(g, s, random_inputs(g, 5)));
}

}  // namespace
}  // namespace ubfuse
