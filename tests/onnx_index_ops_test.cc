// ONNX import of the index and scan ops through one-node models built here with ONNX's protobuf
// classes: what the backend node tests cannot reach (their CumSum tests are all float64, which
// ubfuse does not have) and the errors a converter gives.
#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::OneNode;
using testing::throws_with;
using testing::values;

using testing::kFloat;
using testing::kInt32;
using testing::kInt64;

TEST(OnnxIndexOps, CumSumWithAConstantAxis) {
  Graph g = OneNode("CumSum", 14)
                .input("x", kFloat, {-1, 3})
                .ints("axis", {}, {-2})
                .attr("exclusive", 1)
                .attr("reverse", 1)
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::from_floats(DType::f32, {2, 3}, {1, 2, 3, 10, 20, 30});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run({{"x", x}}).at("y");
    EXPECT_EQ(values(y), (std::vector<double>{10, 20, 30, 0, 0, 0}));
  }
  Graph gi = OneNode("CumSum", 14)
                 .input("x", kInt32, {4})
                 .ints("axis", {1}, {0})
                 .output("y", kInt32)
                 .import();
  Tensor xi = Tensor::from_floats(DType::i32, {4}, {3, -1, 4, 1});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(gi, opts).run({{"x", xi}}).at("y");
    EXPECT_EQ(y.dtype(), DType::i32);
    EXPECT_EQ(values(y), (std::vector<double>{3, 2, 6, 7}));
  }
}

// The axis a graph input: read and checked when the plan for a run is built, each value its own
// plan of one compiled model.
TEST(OnnxIndexOps, CumSumAxisAtRunTime) {
  Graph g = OneNode("CumSum", 14)
                .input("x", kFloat, {2, 3})
                .input("axis", kInt64, {})
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::from_floats(DType::f32, {2, 3}, {1, 2, 3, 10, 20, 30});
  auto axis = [](float a) { return Tensor::from_floats(DType::i64, {}, {a}); };
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    EXPECT_EQ(values(m.run({{"x", x}, {"axis", axis(0)}}).at("y")),
              (std::vector<double>{1, 2, 3, 11, 22, 33}));
    EXPECT_EQ(values(m.run({{"x", x}, {"axis", axis(-1)}}).at("y")),
              (std::vector<double>{1, 3, 6, 10, 30, 60}));
    EXPECT_EQ(m.stats().plan_builds, 2);
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", x}, {"axis", axis(2)}});
        },
        {"node 'node0' (CumSum)", "axis 2 is out of range", "[2,3]"}));
  }
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("CumSum", 14)
            .input("x", kFloat, {2, 3})
            .ints("axis", {}, {2})
            .output("y", kFloat)
            .import();
      },
      {"node 'node0' (CumSum)", "axis 2 is out of range for rank 2"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("CumSum", 14)
            .input("x", kFloat, {2, 3})
            .input("axis", kInt64, {2})
            .output("y", kFloat)
            .import();
      },
      {"node 'node0' (CumSum)", "axis must hold one value, got the shape [2]"}));
}

// One-node models whose axes, split sizes or repeats are graph inputs: each runs from one
// compiled model with two values against the double reference (their import goes through
// AxesShape, read when the plan for a run is built).
void expect_runs(const Graph& g, const std::vector<std::map<std::string, Tensor>>& runs) {
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (auto& in : runs) {
      auto want = ref::run_graph(g, in);
      auto got = m.run(in);
      for (auto& [name, w] : want) EXPECT_TRUE(testing::close_to_ref(got.at(name), w)) << name;
    }
    EXPECT_EQ(m.stats().plan_builds, int(runs.size()));
    EXPECT_EQ(m.stats().compilations, 1);
  }
}

Tensor i64s(std::vector<float> v) {
  return Tensor::from_floats(DType::i64, {int64_t(v.size())}, v);
}

TEST(OnnxIndexOps, UnsqueezeSqueezeAxesAtRunTime) {
  Graph u = OneNode("Unsqueeze", 13)
                .input("x", kFloat, {-1, 3})
                .input("axes", kInt64, {2})
                .output("y", kFloat)
                .import();
  EXPECT_EQ(u.outputs()[0].second->shape.size(), 4u);  // the number of axes gives the rank
  Tensor x = Tensor::random(DType::f32, {2, 3}, 1);
  expect_runs(u, {{{"x", x}, {"axes", i64s({0, 3})}}, {{"x", x}, {"axes", i64s({-1, 1})}}});
  CompiledModel m = compile(u, testing::graph_opts());
  EXPECT_EQ(m.run({{"x", x}, {"axes", i64s({0, 3})}}).at("y").sizes(), (Sizes{1, 2, 3, 1}));
  EXPECT_EQ(m.run({{"x", x}, {"axes", i64s({-1, 1})}}).at("y").sizes(), (Sizes{2, 1, 3, 1}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", x}, {"axes", i64s({2, -2})}});
      },
      {"node0", "Unsqueeze's axes [2,-2]", "[2,3]", "axis -2 repeats"}));

  Graph s = OneNode("Squeeze", 13)
                .input("x", kFloat, {1, 3, 1})
                .input("axes", kInt64, {1})
                .output("y", kFloat)
                .import();
  Tensor x3 = Tensor::random(DType::f32, {1, 3, 1}, 2);
  expect_runs(s, {{{"x", x3}, {"axes", i64s({0})}}, {{"x", x3}, {"axes", i64s({-1})}}});
  EXPECT_TRUE(throws_with(
      [&] {
        compile(s, testing::eager_opts()).run({{"x", x3}, {"axes", i64s({1})}});
      },
      {"node0", "Squeeze's axes [1]", "[1,3,1]", "axis 1 has size 3, not 1"}));
  // Constant axes naming a symbolic dim: whether it is 1 is the plan's to check, no --dim.
  Graph sym = OneNode("Squeeze", 13)
                  .input("x", kFloat, {-1, 3})
                  .ints("axes", {1}, {0})
                  .output("y", kFloat)
                  .import();
  expect_runs(sym, {{{"x", Tensor::random(DType::f32, {1, 3}, 3)}}});
}

TEST(OnnxIndexOps, ReduceAxesAtRunTime) {
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceL2"}) {
    for (int64_t keep : {0, 1}) {
      Graph g = OneNode(op, 18)
                    .input("x", kFloat, {2, 3, 4})
                    .input("axes", kInt64, {2})
                    .attr("keepdims", keep)
                    .output("y", kFloat)
                    .import();
      EXPECT_EQ(g.outputs()[0].second->shape.size(), keep ? 3u : 1u) << op;
      Tensor x = Tensor::random(DType::f32, {2, 3, 4}, 4);
      expect_runs(g, {{{"x", x}, {"axes", i64s({0, 2})}}, {{"x", x}, {"axes", i64s({-2, 0})}}});
      CompiledModel m = compile(g, testing::eager_opts());
      EXPECT_EQ(m.run({{"x", x}, {"axes", i64s({2, 0})}}).at("y").sizes(),
                keep ? Sizes({1, 3, 1}) : Sizes({3}));
      EXPECT_TRUE(throws_with(
          [&] {
            m.run({{"x", x}, {"axes", i64s({1, 3})}});
          },
          {"node0", "the reduced axes [1,3]", "[2,3,4]", "out of range"}));
    }
  }
  // An empty axes input (its length is known) reduces everything, or nothing with
  // noop_with_empty_axes.
  Graph all = OneNode("ReduceMean", 18)
                  .input("x", kFloat, {2, 3})
                  .input("axes", kInt64, {0})
                  .output("y", kFloat)
                  .import();
  std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {2, 3}, 5)}};
  for (const Value* v : all.inputs()) {
    if (v->name == "axes") in["axes"] = Tensor(DType::i64, {0});
  }
  expect_runs(all, {in});
  EXPECT_EQ(compile(all, testing::eager_opts()).run(in).at("y").sizes(), (Sizes{1, 1}));
}

// Integer reductions are exact (int64 sums past 2^53, where a float sum is not), over a symbolic
// axis and over two axes, keepdims or not, in both modes; those integers have no meaning for
// (ReduceMean, ReduceProd, ReduceL2, the logs) are refused naming the node.
TEST(OnnxIndexOps, IntegerReductionsAreExact) {
  const int64_t B = 2, S = 3, C = 4;
  for (int elem : {kInt32, kInt64}) {
    const DType t = elem == kInt32 ? DType::i32 : DType::i64;
    for (const char* op : {"ReduceSum", "ReduceSumSquare", "ReduceL1", "ReduceMax", "ReduceMin"}) {
      const std::string name = op;
      // Large enough that f32 (and for i64, double) sums would round, small enough that no sum
      // or square overflows.
      const int64_t base = name == "ReduceSumSquare"
                               ? (elem == kInt32 ? 1 << 13 : int64_t(1) << 29)
                               : (elem == kInt32 ? 1 << 26 : int64_t(1) << 60);
      Tensor x(t, {B, S, C});
      for (int64_t i = 0; i < x.numel(); i++) {
        const int64_t v = (i % 3 == 0 ? base : 0) + (i * 37 % 11) - 5;
        if (t == DType::i32) x.data_as<int32_t>()[i] = int32_t(v);
        if (t == DType::i64) x.data_as<int64_t>()[i] = v;
      }
      auto at = [&](int64_t b, int64_t s, int64_t c) {
        const int64_t i = (b * S + s) * C + c;
        return t == DType::i32 ? int64_t(x.data_as<int32_t>()[i]) : x.data_as<int64_t>()[i];
      };
      for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, {0, 2}}) {
        for (int64_t keep : {0, 1}) {
          SCOPED_TRACE(name + (elem == kInt32 ? " i32" : " i64") + " axes " +
                       std::to_string(axes.size()) + " keep " + std::to_string(keep));
          Graph g = OneNode(op, 18)
                        .input("x", elem, {B, -2, C})
                        .ints("axes", {int64_t(axes.size())}, axes)
                        .attr("keepdims", keep)
                        .output("y", elem)
                        .import();
          // The wanted values, row by row over the kept axes.
          std::vector<int64_t> want;
          const bool over_s = axes.size() == 1;
          for (int64_t o = 0; o < (over_s ? B * C : S); o++) {
            int64_t acc = 0;
            bool first = true;
            for (int64_t r = 0; r < (over_s ? S : B * C); r++) {
              const int64_t v = over_s ? at(o / C, r, o % C) : at(r / C, o, r % C);
              const int64_t term = name == "ReduceSumSquare" ? v * v
                                   : name == "ReduceL1"      ? std::abs(v)
                                                             : v;
              if (name == "ReduceMax") {
                acc = first ? v : std::max(acc, v);
              } else if (name == "ReduceMin") {
                acc = first ? v : std::min(acc, v);
              } else {
                acc += term;
              }
              first = false;
            }
            want.push_back(acc);
          }
          const Sizes sizes =
              over_s ? (keep ? Sizes{B, 1, C} : Sizes{B, C}) : (keep ? Sizes{1, S, 1} : Sizes{S});
          for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
            const Tensor y = compile(g, o).run({{"x", x}}).at("y");
            ASSERT_EQ(y.dtype(), t);
            ASSERT_EQ(y.sizes(), sizes);
            for (int64_t i = 0; i < y.numel(); i++) {
              const int64_t got =
                  t == DType::i32 ? int64_t(y.data_as<int32_t>()[i]) : y.data_as<int64_t>()[i];
              EXPECT_EQ(got, want[size_t(i)]) << i;
            }
          }
        }
      }
    }
  }
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ReduceMean", 18).input("x", kInt64, {2, 3}).output("y", kInt64).import();
      },
      {"node0", "ReduceMean", "an integer input (i64)", "needs float"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ReduceSum", 18)
            .input("x", testing::kBool, {2, 3})
            .output("y", testing::kBool)
            .import();
      },
      {"node0", "a bool input"}));
}

// Pad's pads a graph input, with opset 18's axes (a constant) picking the axes they pad.
TEST(OnnxIndexOps, PadPadsAtRunTime) {
  Graph g = OneNode("Pad", 18)
                .input("x", kFloat, {-1, 3, 2})
                .input("pads", kInt64, {4})
                .input("value", kFloat, {})
                .ints("axes", {2}, {-1, 0})
                .attr("mode", std::string("constant"))
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::random(DType::f32, {2, 3, 2}, 8);
  Tensor v = Tensor::from_floats(DType::f32, {}, {-4});
  expect_runs(g, {{{"x", x}, {"pads", i64s({1, 0, 2, 1})}, {"value", v}},
                  {{"x", x}, {"pads", i64s({0, 2, -1, 0})}, {"value", v}}});
  CompiledModel m = compile(g, testing::eager_opts());
  EXPECT_EQ(m.run({{"x", x}, {"pads", i64s({1, 0, 2, 1})}, {"value", v}}).at("y").sizes(),
            (Sizes{3, 3, 5}));
  Graph r = OneNode("Pad", 13)
                .input("x", kFloat, {3, 4})
                .input("pads", kInt64, {4})
                .attr("mode", std::string("reflect"))
                .output("y", kFloat)
                .import();
  Tensor x2 = Tensor::random(DType::f32, {3, 4}, 9);
  expect_runs(
      r, {{{"x", x2}, {"pads", i64s({0, 2, 1, 1})}}, {{"x", x2}, {"pads", i64s({2, 0, 0, 3})}}});
}

TEST(OnnxIndexOps, SplitSizesAndTileRepeatsAtRunTime) {
  Graph sp = OneNode("Split", 13)
                 .input("x", kFloat, {-1, 6})
                 .input("split", kInt64, {3})
                 .attr("axis", int64_t(1))
                 .output("a", kFloat)
                 .output("b", kFloat)
                 .output("c", kFloat)
                 .import();
  Tensor x = Tensor::random(DType::f32, {2, 6}, 6);
  expect_runs(sp, {{{"x", x}, {"split", i64s({1, 2, 3})}}, {{"x", x}, {"split", i64s({4, 1, 1})}}});
  CompiledModel m = compile(sp, testing::graph_opts());
  EXPECT_EQ(m.run({{"x", x}, {"split", i64s({4, 1, 1})}}).at("a").sizes(), (Sizes{2, 4}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", x}, {"split", i64s({4, 1, 2})}});
      },
      {"node0", "Split's sizes [4,1,2]", "add up to 7, not the size 6"}));

  Graph t = OneNode("Tile", 13)
                .input("x", kFloat, {-1, 3})
                .input("repeats", kInt64, {2})
                .output("y", kFloat)
                .import();
  Tensor x2 = Tensor::random(DType::f32, {2, 3}, 7);
  expect_runs(t, {{{"x", x2}, {"repeats", i64s({2, 1})}},
                  {{"x", x2}, {"repeats", i64s({1, 3})}},
                  {{"x", x2}, {"repeats", i64s({0, 2})}}});  // an empty result
  CompiledModel mt = compile(t, testing::eager_opts());
  EXPECT_EQ(mt.run({{"x", x2}, {"repeats", i64s({3, 2})}}).at("y").sizes(), (Sizes{6, 6}));
  EXPECT_TRUE(throws_with(
      [&] {
        mt.run({{"x", x2}, {"repeats", i64s({-1, 2})}});
      },
      {"node0", "Tile's repeats [-1,2]", "[2,3]", "negative"}));
}

// Constant sizes on a symbolic axis need no --dim: a Split's sizes are checked against the axis,
// and a Tile of a symbolic axis repeats it, when the plan is built.
TEST(OnnxIndexOps, SplitAndTileOfASymbolicAxisWithConstantSizes) {
  Graph sp = OneNode("Split", 13)
                 .input("x", kFloat, {-1, 2})
                 .ints("split", {2}, {3, 5})
                 .output("a", kFloat)
                 .output("b", kFloat)
                 .import();
  Tensor x = Tensor::random(DType::f32, {8, 2}, 6);
  expect_runs(sp, {{{"x", x}}});
  CompiledModel m = compile(sp, testing::graph_opts());
  EXPECT_EQ(m.run({{"x", x}}).at("b").sizes(), (Sizes{5, 2}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", Tensor::random(DType::f32, {7, 2}, 1)}});
      },
      {"node0", "Split's sizes [3,5]", "add up to 8, not the size 7"}));
  Graph t = OneNode("Tile", 13)
                .input("x", kFloat, {-1, 3})
                .ints("repeats", {2}, {3, 2})
                .output("y", kFloat)
                .import();
  Tensor x2 = Tensor::random(DType::f32, {2, 3}, 7);
  expect_runs(t, {{{"x", x2}}, {{"x", Tensor::random(DType::f32, {5, 3}, 8)}}});
  EXPECT_EQ(compile(t, testing::eager_opts()).run({{"x", x2}}).at("y").sizes(), (Sizes{6, 6}));
}

// Opset 18 Pad with its axes a graph input as well as its pads: AxesShape spreads them over the
// axes when the plan is built, and checks them.
TEST(OnnxIndexOps, PadAxesAndPadsAtRunTime) {
  Graph g = OneNode("Pad", 18)
                .input("x", kFloat, {-1, 3, 2})
                .input("pads", kInt64, {4})
                .input("value", kFloat, {})
                .input("axes", kInt64, {2})
                .attr("mode", std::string("constant"))
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::random(DType::f32, {2, 3, 2}, 8);
  Tensor v = Tensor::from_floats(DType::f32, {}, {-4});
  expect_runs(g, {{{"x", x}, {"pads", i64s({1, 0, 2, 1})}, {"value", v}, {"axes", i64s({-1, 0})}},
                  {{"x", x}, {"pads", i64s({0, 2, -1, 0})}, {"value", v}, {"axes", i64s({1, 2})}}});
  CompiledModel m = compile(g, testing::graph_opts());
  EXPECT_EQ(m.run({{"x", x}, {"pads", i64s({1, 0, 2, 1})}, {"value", v}, {"axes", i64s({-1, 0})}})
                .at("y")
                .sizes(),
            (Sizes{3, 3, 5}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", x}, {"pads", i64s({1, 0, 2, 1})}, {"value", v}, {"axes", i64s({3, 0})}});
      },
      {"Pad's axes, begins and ends", "axis 3 is out of range for rank 3"}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", x}, {"pads", i64s({1, 0, 2, 1})}, {"value", v}, {"axes", i64s({2, -1})}});
      },
      {"axis -1 repeats"}));
}

// K a graph input (opset 10 on): read when the plan for a run is built, each k its own plan.
TEST(OnnxIndexOps, TopKWithKAtRunTime) {
  Graph g = OneNode("TopK", 11)
                .input("x", kFloat, {-1, 5})
                .input("k", onnx::TensorProto::INT64, {1})
                .attr("largest", 0)
                .output("values", kFloat)
                .output("indices", onnx::TensorProto::INT64)
                .import();
  Tensor x = Tensor::from_floats(DType::f32, {2, 5}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  const std::vector<std::vector<double>> want_i = {{}, {1, 6}, {1, 3, 6, 9}, {1, 3, 0, 6, 9, 8}};
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (int64_t k = 0; k <= 3; k++) {
      auto out = m.run({{"x", x}, {"k", Tensor::from_floats(DType::i64, {1}, {float(k)})}});
      ASSERT_EQ(out.at("values").sizes(), (Sizes{2, k}));
      std::vector<double> iv = values(out.at("indices"));
      // Indices within each row, as flat positions of x for the comparison.
      for (size_t j = 0; j < iv.size(); j++) iv[j] += double(5 * (int64_t(j) / k));
      EXPECT_EQ(iv, want_i[size_t(k)]) << "k=" << k;
    }
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", x}, {"k", Tensor::from_floats(DType::i64, {1}, {6})}});
        },
        {"node 'node0' (TopK)", "k (6) exceeds the length 5 of axis 1"}));
  }
}

TEST(OnnxIndexOps, TopKOpset1TakesKAsAnAttribute) {
  Graph g = OneNode("TopK", 9)
                .input("x", kFloat, {4})
                .attr("k", 2)
                .output("values", kFloat)
                .output("indices", onnx::TensorProto::INT64)
                .import();
  Tensor x = Tensor::from_floats(DType::f32, {4}, {1, 8, -3, 8});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    auto out = compile(g, opts).run({{"x", x}});
    EXPECT_EQ(values(out.at("values")), (std::vector<double>{8, 8}));
    EXPECT_EQ(values(out.at("indices")), (std::vector<double>{1, 3}));
  }
}

TEST(OnnxIndexOps, GatherNDAndScatterErrorsNameTheNode) {
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("GatherND", 13)
            .input("x", kFloat, {2, 3})
            .input("i", kFloat, {1, 2})
            .output("y", kFloat)
            .import();
      },
      {"node 'node0' (GatherND)", "indices must be int64, got f32"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ScatterND", 16)
            .input("x", kFloat, {2, 3})
            .ints("i", {1, 1}, {0})
            .input("u", kInt32, {1, 3})
            .output("y", kFloat)
            .import();
      },
      {"node 'node0' (ScatterND)", "updates (i32) must have data's type (f32)"}));
  Graph g = OneNode("ScatterElements", 13)
                .input("x", kFloat, {2, 3})
                .ints("i", {1, 1}, {5})
                .input("u", kFloat, {1, 1})
                .output("y", kFloat)
                .import();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    EXPECT_TRUE(throws_with(
        [&] {
          compile(g, opts).run(
              {{"x", Tensor::zeros(DType::f32, {2, 3})}, {"u", Tensor::zeros(DType::f32, {1, 1})}});
        },
        {"node 'node0' (ScatterElements)", "index 5", "axis 0 (size 2)", "hint: "}));
  }
}

// ScatterElements' reduction max (opset 18) with a repeated, negative index, in both modes.
TEST(OnnxIndexOps, ScatterElementsMaxReduction) {
  Graph g = OneNode("ScatterElements", 18)
                .input("x", kFloat, {1, 4})
                .ints("i", {1, 3}, {1, -3, 3})
                .input("u", kFloat, {1, 3})
                .attr("axis", 1)
                .attr("reduction", "max")
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::from_floats(DType::f32, {1, 4}, {5, 5, 5, 5});
  Tensor u = Tensor::from_floats(DType::f32, {1, 3}, {7, 6, 1});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run({{"x", x}, {"u", u}}).at("y");
    EXPECT_EQ(values(y), (std::vector<double>{5, 7, 5, 5}));
  }
}

}  // namespace
}  // namespace ubfuse
