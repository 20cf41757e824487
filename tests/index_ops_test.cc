// The ops that index or scan along an axis (GatherElements, ArgMax/ArgMin, CumSum, ...), in eager
// and graph mode: exact results on small cases (ties, wrap-around, negative indices) and bad input
// as an error naming the node, the op, the shapes and a hint.
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;
using testing::values;

TEST(IndexOps, GatherElementsIndexOutOfRangeNamesTheNode) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto i = b.input("i", DType::i64, {2, 2});
  b.output("y", b.op(OpKind::GatherElements, {x, i}, {{"axis", int64_t(1)}}, "pick"));
  Graph g = b.build();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    Tensor xv = Tensor::random(DType::f32, {2, 3}, 1);
    Tensor ok = Tensor::from_floats(DType::i64, {2, 2}, {2, -3, 0, 1});
    Tensor y = m.run({{"x", xv}, {"i", ok}}).at("y");
    EXPECT_EQ(y.get(0), xv.get(2));
    EXPECT_EQ(y.get(1), xv.get(0));
    EXPECT_EQ(y.get(3), xv.get(4));
    Tensor bad = Tensor::from_floats(DType::i64, {2, 2}, {0, 3, 0, 0});
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", xv}, {"i", bad}});
        },
        {"node 'pick' (GatherElements)", "index 3", "size 3"}));
  }
  GraphBuilder r;
  EXPECT_TRUE(throws_with(
      [&] {
        r.op(OpKind::GatherElements,
             {r.input("x", DType::f32, {2, 3}), r.input("i", DType::i64, {6})}, {}, "flat");
      },
      {"node 'flat' (GatherElements)", "rank of data"}));
}

TEST(IndexOps, ArgTiesPickTheFirstOrTheLast) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {1, 5});
  b.output("first", b.op(OpKind::ArgMax, {x}, {{"axis", int64_t(1)}}));
  b.output("last",
           b.op(OpKind::ArgMin, {x}, {{"axis", int64_t(1)}, {"select_last_index", int64_t(1)}}));
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(DType::f32, {1, 5}, {1, 4, -2, 4, -2});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    auto out = compile(g, opts).run({{"x", xv}});
    EXPECT_EQ(out.at("first").get(0), 1);
    EXPECT_EQ(out.at("last").get(0), 4);
  }
  GraphBuilder e;
  EXPECT_TRUE(throws_with(
      [&] {
        e.op(OpKind::ArgMax, {e.input("x", DType::f32, {int64_t(0), 3})}, {}, "am");
      },
      {"node 'am' (ArgMax)", "empty"}));
}

// The reference sizes its result from the input, not from the graph's (symbolic) shape.
TEST(IndexOps, ArgWithoutKeepdimsOverSymbolicDims) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"n", 4});
  b.output("y", b.op(OpKind::ArgMax, {x}, {{"axis", int64_t(0)}, {"keepdims", int64_t(0)}}));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {5, 4}, 3)}};
  EXPECT_TRUE(testing::matches_reference(g, in, testing::eager_opts()));
  EXPECT_TRUE(testing::matches_reference(g, in, testing::graph_opts()));
}

// Runs g in eager and in graph mode; fn checks each run's outputs.
template <typename F>
void both_modes(const Graph& g, const std::map<std::string, Tensor>& in, F fn) {
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    SCOPED_TRACE(opts.begin()->second == "0" ? "eager" : "graph");
    fn(compile(g, opts).run(in));
  }
}

TEST(IndexOps, CumSumExclusiveReverseAndAxis) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    GraphBuilder b;
    auto x = b.input("x", t, {2, 4});
    auto cs = [&](int64_t axis, int64_t excl, int64_t rev) {
      return b.op(OpKind::CumSum, {x}, {{"axis", axis}, {"exclusive", excl}, {"reverse", rev}});
    };
    b.output("inc", cs(1, 0, 0));
    b.output("exc", cs(-1, 1, 0));
    b.output("rev", cs(1, 0, 1));
    b.output("rev_exc", cs(1, 1, 1));
    b.output("down", cs(0, 0, 0));
    Graph g = b.build();
    Tensor xv = Tensor::from_floats(t, {2, 4}, {1, 2, 3, 4, -1, 0, 5, 2});
    both_modes(g, {{"x", xv}}, [&](const std::map<std::string, Tensor>& out) {
      EXPECT_EQ(values(out.at("inc")), (std::vector<double>{1, 3, 6, 10, -1, -1, 4, 6}));
      EXPECT_EQ(values(out.at("exc")), (std::vector<double>{0, 1, 3, 6, 0, -1, -1, 4}));
      EXPECT_EQ(values(out.at("rev")), (std::vector<double>{10, 9, 7, 4, 6, 7, 7, 2}));
      EXPECT_EQ(values(out.at("rev_exc")), (std::vector<double>{9, 7, 4, 0, 7, 7, 2, 0}));
      EXPECT_EQ(values(out.at("down")), (std::vector<double>{1, 2, 3, 4, 0, 2, 8, 6}));
      EXPECT_EQ(out.at("inc").dtype(), t);
    });
  }
}

TEST(IndexOps, CumSumIntegersWrapAndFloatsSumInDouble) {
  GraphBuilder b;
  auto x = b.input("x", DType::i32, {3});
  auto f = b.input("f", DType::f32, {3});
  b.output("y", b.op(OpKind::CumSum, {x}));
  b.output("g", b.op(OpKind::CumSum, {f}));
  Graph g = b.build();
  Tensor xv(DType::i32, {3});
  xv.data_as<int32_t>()[0] = INT32_MAX;
  xv.data_as<int32_t>()[1] = 1;
  xv.data_as<int32_t>()[2] = 5;
  // 2^24 + 1 is not an f32, but 2^24 + 1 - 1 is: a double sum gets it exactly.
  Tensor fv = Tensor::from_floats(DType::f32, {3}, {16777216.0f, 1.0f, -1.0f});
  both_modes(g, {{"x", xv}, {"f", fv}}, [&](const std::map<std::string, Tensor>& out) {
    const int32_t* y = out.at("y").data_as<int32_t>();
    EXPECT_EQ(y[0], INT32_MAX);
    EXPECT_EQ(y[1], INT32_MIN);
    EXPECT_EQ(y[2], INT32_MIN + 5);
    EXPECT_EQ(out.at("g").get(2), 16777216.0);
  });
}

TEST(IndexOps, CumSumBadInputNamesTheNode) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::CumSum, {x}, {{"axis", int64_t(2)}}, "cs");
      },
      {"node 'cs' (CumSum)", "axis 2 is out of range for rank 2", "[2,3] f32", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::CumSum, {x}, {{"exclusive", int64_t(2)}}, "cs2");
      },
      {"node 'cs2' (CumSum)", "'exclusive' must be 0 or 1"}));
  auto flag = b.input("flag", DType::boolean, {4});
  EXPECT_TRUE(throws_with([&] { b.op(OpKind::CumSum, {flag}, {}, "cs3"); },
                          {"node 'cs3' (CumSum)", "bool", "[4] bool", "hint: Cast"}));
  auto s = b.input("s", DType::f32, {});
  EXPECT_TRUE(throws_with([&] { b.op(OpKind::CumSum, {s}, {}, "cs4"); },
                          {"node 'cs4' (CumSum)", "at least 1 dim", "hint: "}));
}

Tensor int64_tensor(std::vector<float> v) {
  return Tensor::from_floats(DType::i64, {int64_t(v.size())}, v);
}

TEST(IndexOps, TopKTiesGoToTheLowerIndexAndNaNRanksHighest) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 5});
  auto k2 = b.constant(int64_tensor({2}));
  auto big = b.top_k(x, k2);
  auto small = b.top_k(x, k2, 1, false);
  b.output("big", big[0]);
  b.output("big_i", big[1]);
  b.output("small", small[0]);
  b.output("small_i", small[1]);
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(DType::f32, {2, 5}, {1, 3, 3, -2, 3, 0, NAN, -1, -1, 7});
  both_modes(g, {{"x", xv}}, [&](const std::map<std::string, Tensor>& out) {
    EXPECT_EQ(values(out.at("big_i")), (std::vector<double>{1, 2, 1, 4}));
    EXPECT_EQ(out.at("big").get(0), 3);
    EXPECT_TRUE(std::isnan(out.at("big").get(2)));
    EXPECT_EQ(out.at("big").get(3), 7);
    EXPECT_EQ(values(out.at("small_i")), (std::vector<double>{3, 0, 2, 3}));
    EXPECT_EQ(values(out.at("small")), (std::vector<double>{-2, 1, -1, -1}));
    EXPECT_EQ(out.at("big_i").dtype(), DType::i64);
  });
}

// k a graph input: its value is read when the plan is built (a new k, a new plan), and the
// outputs' axis has a run-time length.
TEST(IndexOps, TopKWithKAtRunTime) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {3, "n"});
  auto k = b.input("k", DType::i64, {1});
  auto vi = b.top_k(x, k, 1, true);
  b.output("v", b.mul(vi[0], 2.0));
  b.output("i", vi[1]);
  Graph g = b.build();
  EXPECT_EQ(vi[0]->shape[1], vi[1]->shape[1]);
  EXPECT_TRUE(vi[0]->shape[1].str().rfind("$", 0) == 0) << vi[0]->shape[1].str();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (int64_t n : {1, 6, 40}) {
      for (int64_t kv : {int64_t(0), int64_t(1), n}) {
        std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {3, n}, uint64_t(n))},
                                         {"k", int64_tensor({float(kv)})}};
        auto got = m.run(in);
        auto want = ref::run_graph(g, in);
        ASSERT_EQ(got.at("v").sizes(), (Sizes{3, kv}));
        EXPECT_TRUE(testing::close_to_ref(got.at("v"), want.at("v")));
        EXPECT_TRUE(testing::close_to_ref(got.at("i"), want.at("i")));
      }
      std::map<std::string, Tensor> bad{{"x", Tensor::random(DType::f32, {3, n}, 1)},
                                        {"k", int64_tensor({float(n + 1)})}};
      EXPECT_TRUE(throws_with(
          [&] { m.run(bad); },
          {"(TopK)", "k (" + std::to_string(n + 1) + ") exceeds the length " + std::to_string(n),
           "hint: "}));
    }
  }
}

// k from x's own sizes (Shape arithmetic) is a known dim: the outputs keep the symbol.
TEST(IndexOps, TopKWithKFromAShapeKeepsTheSymbol) {
  GraphBuilder b;
  auto x = b.input("x", DType::bf16, {"n", 4});
  auto vi = b.top_k(x, b.shape_of(x, 0, 1), 0, false);
  b.output("v", vi[0]);
  Graph g = b.build();
  EXPECT_EQ(shape_str(vi[0]->shape), "[n,4]");
  Tensor xv = Tensor::random(DType::bf16, {7, 4}, 3);
  both_modes(g, {{"x", xv}}, [&](const std::map<std::string, Tensor>& out) {
    EXPECT_TRUE(testing::close_to_ref(out.at("v"), ref::run_graph(g, {{"x", xv}}).at("v")));
  });
}

TEST(IndexOps, TopKBadInputNamesTheNode) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto top = [&](std::vector<GraphBuilder::V> in, Attrs a = {}) {
    Node* n = b.graph().add_node(OpKind::TopK, std::move(in), std::move(a), "tk", 2);
    try {
      infer_node(*n);
    } catch (...) {
      b.graph().remove_node(n);
      throw;
    }
    b.graph().remove_node(n);
  };
  EXPECT_TRUE(throws_with(
      [&] {
        top({x, b.constant(int64_tensor({4}))});
      },
      {"node 'tk' (TopK)", "k (4) exceeds the length 3 of axis 1", "[2,3] f32", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        top({x, b.constant(int64_tensor({-1}))});
      },
      {"node 'tk' (TopK)", "below 0", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        top({x, b.constant(int64_tensor({1, 2}))});
      },
      {"node 'tk' (TopK)", "one value", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        top({x, b.constant(Tensor::from_floats(DType::f32, {1}, {1}))});
      },
      {"node 'tk' (TopK)", "k must be i64, got f32", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        top({x, b.constant(int64_tensor({1}))}, {{"axis", int64_t(-3)}});
      },
      {"node 'tk' (TopK)", "axis -3 is out of range for rank 2", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::TopK, {x, b.constant(int64_tensor({1}))}, {}, "one");
      },
      {"node 'one' (TopK)", "has 2 outputs", "hint: "}));
  auto flag = b.input("flag", DType::boolean, {3});
  EXPECT_TRUE(throws_with(
      [&] {
        top({flag, b.constant(int64_tensor({1}))});
      },
      {"node 'tk' (TopK)", "bool", "hint: "}));
}

// ONNX's GatherND examples: tuples into the whole of data, and with batch_dims 1.
TEST(IndexOps, GatherNDTuplesAndBatchDims) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 2, 2});
  auto i = b.input("i", DType::i64, {2, 2});
  auto ib = b.input("ib", DType::i64, {2, 1});
  b.output("y", b.op(OpKind::GatherND, {x, i}));
  b.output("yb", b.op(OpKind::GatherND, {x, ib}, {{"batch_dims", int64_t(1)}}));
  Graph g = b.build();
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[2,2]");
  EXPECT_EQ(shape_str(g.outputs()[1].second->shape), "[2,2]");
  Tensor xv = Tensor::from_floats(DType::f32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor iv = Tensor::from_floats(DType::i64, {2, 2}, {0, 1, -1, 0});
  Tensor ibv = Tensor::from_floats(DType::i64, {2, 1}, {1, 0});
  both_modes(g, {{"x", xv}, {"i", iv}, {"ib", ibv}}, [&](const std::map<std::string, Tensor>& o) {
    EXPECT_EQ(values(o.at("y")), (std::vector<double>{2, 3, 4, 5}));
    EXPECT_EQ(values(o.at("yb")), (std::vector<double>{2, 3, 4, 5}));
  });
  Tensor bad = Tensor::from_floats(DType::i64, {2, 2}, {0, 1, 2, 0});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    EXPECT_TRUE(throws_with(
        [&] {
          compile(g, opts).run({{"x", xv}, {"i", bad}, {"ib", ibv}});
        },
        {"(GatherND)", "index 2", "dim 0 (size 2)", "[2,2,2] f32", "hint: "}));
  }
}

TEST(IndexOps, ScatterNDRepeatedIndicesApplyInOrder) {
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    GraphBuilder b;
    auto x = b.input("x", DType::i64, {4, 2});
    auto i = b.input("i", DType::i64, {3, 1});
    auto u = b.input("u", DType::i64, {3, 2});
    b.output("y", b.op(OpKind::ScatterND, {x, i, u}, {{"reduction", std::string(red)}}));
    Graph g = b.build();
    Tensor xv = Tensor::from_floats(DType::i64, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    Tensor iv = Tensor::from_floats(DType::i64, {3, 1}, {1, -3, 3});  // row 1 twice
    Tensor uv = Tensor::from_floats(DType::i64, {3, 2}, {10, -1, 20, 2, 30, 3});
    const std::map<std::string, std::vector<double>> want{{"none", {1, 2, 20, 2, 5, 6, 30, 3}},
                                                          {"add", {1, 2, 33, 5, 5, 6, 37, 11}},
                                                          {"mul", {1, 2, 600, -8, 5, 6, 210, 24}},
                                                          {"max", {1, 2, 20, 4, 5, 6, 30, 8}},
                                                          {"min", {1, 2, 3, -1, 5, 6, 7, 3}}};
    both_modes(g, {{"x", xv}, {"i", iv}, {"u", uv}}, [&](const std::map<std::string, Tensor>& o) {
      EXPECT_EQ(values(o.at("y")), want.at(red)) << red;
    });
  }
}

TEST(IndexOps, ScatterElementsReductionsAndNegativeIndices) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto i = b.input("i", DType::i32, {2, 2});
  auto u = b.input("u", DType::f32, {2, 2});
  b.output("set", b.op(OpKind::ScatterElements, {x, i, u}, {{"axis", int64_t(1)}}));
  b.output("add", b.op(OpKind::ScatterElements, {x, i, u},
                       {{"axis", int64_t(1)}, {"reduction", std::string("add")}}));
  b.output("mul", b.op(OpKind::ScatterElements, {x, i, u},
                       {{"axis", int64_t(-1)}, {"reduction", std::string("mul")}}));
  Graph g = b.build();
  Tensor xv = Tensor::from_floats(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor iv = Tensor::from_floats(DType::i32, {2, 2}, {-1, 2, 0, 1});  // row 0: index 2 twice
  Tensor uv = Tensor::from_floats(DType::f32, {2, 2}, {10, 20, 30, 40});
  both_modes(g, {{"x", xv}, {"i", iv}, {"u", uv}}, [&](const std::map<std::string, Tensor>& o) {
    EXPECT_EQ(values(o.at("set")), (std::vector<double>{1, 2, 20, 30, 40, 6}));
    EXPECT_EQ(values(o.at("add")), (std::vector<double>{1, 2, 33, 34, 45, 6}));
    EXPECT_EQ(values(o.at("mul")), (std::vector<double>{1, 2, 600, 120, 200, 6}));
  });
  Tensor bad = Tensor::from_floats(DType::i32, {2, 2}, {0, -4, 0, 0});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    EXPECT_TRUE(throws_with(
        [&] {
          compile(g, opts).run({{"x", xv}, {"i", bad}, {"u", uv}});
        },
        {"(ScatterElements)", "index -4", "axis 1 (size 3)", "[2,3] f32", "hint: "}));
  }
}

TEST(IndexOps, GatherNDAndScattersBadShapesNameTheNode) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto i3 = b.input("i3", DType::i64, {4, 3});
  auto i1 = b.input("i1", DType::i64, {4, 1});
  auto fi = b.input("fi", DType::f32, {4, 1});
  auto u = b.input("u", DType::f32, {4, 2});
  auto ub = b.input("ub", DType::bf16, {4, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::GatherND, {x, i3}, {}, "g1");
      },
      {"node 'g1' (GatherND)", "tuples of 3", "rank 2", "[2,3] f32, [4,3] i64", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::GatherND, {x, fi}, {}, "g2");
      },
      {"node 'g2' (GatherND)", "indices must be i64 or i32, got f32", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::GatherND, {x, i1}, {{"batch_dims", int64_t(2)}}, "g3");
      },
      {"node 'g3' (GatherND)", "batch_dims 2", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::GatherND, {x, i1}, {{"batch_dims", int64_t(1)}}, "g4");
      },
      {"node 'g4' (GatherND)", "batch dim 0 differs: 2 in data, 4 in indices", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterND, {x, i1, u}, {}, "s1");
      },
      {"node 's1' (ScatterND)", "updates must have the shape [4,3], got [4,2]", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterND, {x, i1, b.input("uu", DType::f32, {4, 3})},
             {{"reduction", std::string("sum")}}, "s2");
      },
      {"node 's2' (ScatterND)", "reduction must be none, add, mul, max or min"}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterND, {x, i1, ub}, {}, "s3");
      },
      {"node 's3' (ScatterND)", "dtype mismatch", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterElements, {x, i1, u}, {}, "e1");
      },
      {"node 'e1' (ScatterElements)", "differ in dim 1", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterElements, {x, i3, b.input("u3", DType::f32, {4, 3})},
             {{"axis", int64_t(1)}}, "e2");
      },
      {"node 'e2' (ScatterElements)", "indices dim 0 (4) exceeds data's (2)", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterElements,
             {x, b.input("iv", DType::i64, {2}), b.input("uv", DType::f32, {2})}, {}, "e3");
      },
      {"node 'e3' (ScatterElements)", "rank of data", "hint: "}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.op(OpKind::ScatterElements,
             {x, b.input("ia", DType::i64, {2, 3}), b.input("ua", DType::f32, {2, 3})},
             {{"axis", int64_t(2)}}, "e4");
      },
      {"node 'e4' (ScatterElements)", "axis 2 is out of range for rank 2", "hint: "}));
}

// A small graph in both modes: the index ops run as their own kernels between fused groups.
TEST(IndexOps, IndexOpsBetweenFusedGroups) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {3, 8});
  auto h = b.mul(b.add(x, 1.0), 2.0);
  auto cs = b.op(OpKind::CumSum, {h}, {{"axis", int64_t(1)}});
  auto vi = b.top_k(b.neg(cs), b.constant(int64_tensor({3})), 1, false);
  auto rows = b.constant(Tensor::from_floats(DType::i64, {2, 1}, {2, 0}));
  auto g2 = b.op(OpKind::GatherND, {b.exp(vi[0]), rows});
  auto sc = b.op(OpKind::ScatterND, {b.sigmoid(vi[0]), rows, b.tanh(g2)},
                 {{"reduction", std::string("add")}});
  auto se = b.op(OpKind::ScatterElements, {b.sigmoid(h), vi[1], b.mul(sc, 3.0)},
                 {{"axis", int64_t(1)}, {"reduction", std::string("max")}});
  b.output("y", b.softmax(se));
  Graph g = b.build();
  std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {3, 8}, 5, -0.1, 0.1)}};
  EXPECT_TRUE(testing::matches_reference(g, in, testing::eager_opts()));
  EXPECT_TRUE(testing::matches_reference(g, in, testing::graph_opts()));
  EXPECT_LT(compile(g, testing::graph_opts()).kernels().size(),
            compile(g, testing::eager_opts()).kernels().size());
}

}  // namespace
}  // namespace ubfuse
