// Shape values at run time (ir/values.h, compiler/shape_values.h): targets and bounds that are
// graph inputs or computed, run on the host while a plan is built, the plan cache keyed on
// their contents, and errors that name the node, the value and the shape.
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;

Tensor ints(std::vector<float> v) {
  return Tensor::from_floats(DType::i64, {int64_t(v.size())}, v);
}

TEST(ShapeValues, ReshapeTargetFromAGraphInputKeysThePlanCache) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 6});
  auto t = b.input("target", DType::i64, {2});
  b.output("y", b.neg(b.reshape(x, t)));
  Graph g = b.build();
  Tensor xv = Tensor::random(DType::f32, {2, 6}, 1);
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    const size_t kernels = m.kernels().size();
    for (auto target : {std::vector<float>{3, 4}, {12, 1}, {3, 4}, {-1, 2}, {3, 4}}) {
      auto y = m.run({{"x", xv}, {"target", ints(target)}}).at("y");
      Sizes want{int64_t(target[0]), int64_t(target[1])};
      if (want[0] < 0) want[0] = 6;
      ASSERT_EQ(y.sizes(), want);
      for (int64_t i = 0; i < y.numel(); i++) ASSERT_EQ(y.get(i), -xv.get(i));
    }
    // Three distinct targets, three plans; the repeats hit the cache; nothing recompiled.
    EXPECT_EQ(m.stats().plan_builds, 3);
    EXPECT_EQ(m.stats().plan_cache_hits, 2);
    EXPECT_EQ(m.kernels().size(), kernels);
  }
}

TEST(ShapeValues, AnInvalidValueNamesTheNodeTheValueAndTheShape) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 6});
  auto t = b.input("target", DType::i64, {2});
  b.output("y", b.reshape(x, t));
  b.name_last("to_target");
  Graph g = b.build();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    Tensor xv = Tensor::random(DType::f32, {2, 6}, 1);
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", xv}, {"target", ints({5, 5})}});
        },
        {"node 'to_target' (Reshape)", "[5,5]", "[2,6]"}));
    EXPECT_TRUE(throws_with([&] { m.run({{"x", xv}}); }, {"missing input 'target'"}));
  }
}

TEST(ShapeValues, RangeFromThePastLengthNeedsNoDim) {
  // A decoder's positions: arange(past, past + seq) from the sizes of its inputs alone.
  GraphBuilder b;
  auto past = b.input("past", DType::f32, {"batch", "past_len", 4});
  auto x = b.input("x", DType::f32, {"batch", "seq", 4});
  auto p = b.reshape(b.shape_of(past, 1, 2), b.constant(Tensor(DType::i64, {0})));
  auto s = b.reshape(b.shape_of(x, 1, 2), b.constant(Tensor(DType::i64, {0})));
  auto one = b.constant(Tensor::from_floats(DType::i64, {}, {1}));
  auto pos = b.cast(b.range(p, b.add(p, s), one), DType::f32);  // [seq]
  b.output("y", b.add(x, b.reshape(pos, {-1, 1})));
  Graph g = b.build();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (int64_t pl : {0, 3, 9}) {
      for (int64_t sl : {1, 4}) {
        std::map<std::string, Tensor> in{{"past", Tensor::random(DType::f32, {2, pl, 4}, 1)},
                                         {"x", Tensor::random(DType::f32, {2, sl, 4}, 2)}};
        Tensor y = m.run(in).at("y");
        for (int64_t i = 0; i < y.numel(); i++) {
          ASSERT_FLOAT_EQ(y.get(i), in["x"].get(i) + float(pl + (i / 4) % sl)) << pl << "," << sl;
        }
      }
    }
  }
}

// Rotary positions as exporters write them: arange over a length read from a shape and cast to
// float first. The Range has that length (the symbol), so the rotary's Mul and Add fuse with
// the [batch, seq, 4] values they meet instead of stopping at a run-time dim.
TEST(ShapeValues, FloatRangeOverACastShapeKeepsTheSymbol) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"batch", "seq", 4});
  auto len =
      b.cast(b.reshape(b.shape_of(x, 1, 2), b.constant(Tensor(DType::i64, {0}))), DType::f32);
  auto zero = b.constant(Tensor::from_floats(DType::f32, {}, {0}));
  auto one = b.constant(Tensor::from_floats(DType::f32, {}, {1}));
  auto positions = b.range(zero, len, one);
  auto pos = b.reshape(positions, {-1, 1});  // [seq, 1]
  auto c = b.cos(b.mul(pos, b.input("freq", DType::f32, {4})));
  b.output("y", b.add(b.mul(x, c), x));
  Graph g = b.build();
  EXPECT_EQ(shape_str(positions->shape), "[seq]");
  CompiledModel m = compile(g, testing::graph_opts());
  for (const auto& d : m.decisions()) {
    EXPECT_NE(d.reason, FusionReason::DynamicShape) << d.message;
  }
  for (int64_t sl : {1, 5}) {
    std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {2, sl, 4}, 1)},
                                     {"freq", Tensor::random(DType::f32, {4}, 2)}};
    EXPECT_TRUE(testing::matches_reference(g, in, testing::graph_opts())) << sl;
  }
}

TEST(ShapeValues, SliceBoundsFromAGraphInput) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"n", 3});
  auto st = b.input("starts", DType::i64, {1});
  auto en = b.input("ends", DType::i64, {1});
  b.output("y", b.slice(x, st, en, b.constant(ints({0})), b.constant(ints({1}))));
  Graph g = b.build();
  Tensor xv = Tensor::random(DType::f32, {7, 3}, 4);
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (auto [s, e] : std::vector<std::pair<float, float>>{{1, 4}, {-3, 100}, {5, 2}}) {
      std::map<std::string, Tensor> in{{"x", xv}, {"starts", ints({s})}, {"ends", ints({e})}};
      EXPECT_TRUE(testing::matches_reference(g, in, opts)) << s << ":" << e;
    }
  }
}

// Plans are cached per value, the least recently used evicted past 256: a loop over ever new
// values keeps the cache bounded and still hits on the recent ones.
TEST(ShapeValues, ThePlanCacheKeepsTheMostRecentPlans) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {400, 3});
  auto en = b.input("ends", DType::i64, {1});
  auto zero = b.constant(ints({0}));
  b.output("y", b.slice(x, zero, en, zero, b.constant(ints({1}))));
  Graph g = b.build();
  CompiledModel m = compile(g, testing::eager_opts());
  Tensor xv = Tensor::random(DType::f32, {400, 3}, 4);
  auto run = [&](int e) {
    Tensor y = m.run({{"x", xv}, {"ends", ints({float(e)})}}).at("y");
    ASSERT_EQ(y.sizes(), (Sizes{e, 3}));
  };
  for (int e = 1; e <= 300; e++) run(e);
  EXPECT_EQ(m.stats().plan_builds, 300);
  run(300);  // recent: cached
  EXPECT_EQ(m.stats().plan_builds, 300);
  run(1);  // evicted: built again
  EXPECT_EQ(m.stats().plan_builds, 301);
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

std::shared_ptr<const Graph> scaled(double k, const Shape& s) {
  GraphBuilder g;
  g.output("y", g.mul(g.input("x", DType::f32, s), k));
  return std::make_shared<const Graph>(g.build());
}

// An If condition computed from a small graph input's data runs on the host while planning (the
// input's contents key the plan); from a large one it is a compile error naming the value.
TEST(ShapeValues, AnIfConditionFromTensorData) {
  for (int64_t n : {3, 5000}) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {n});
    auto cond = b.greater(b.reduce_sum(x), b.constant(Tensor::from_floats(DType::f32, {1}, {0})));
    b.output("y", b.if_(cond, scaled(2, {n}), scaled(-1, {n}), {x})[0]);
    Graph g = b.build();
    if (n > 4096) {
      EXPECT_TRUE(throws_with([&] { compile(g, testing::graph_opts()); }, {"'x'", "4096"}));
      continue;
    }
    for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
      CompiledModel m = compile(g, opts);
      Tensor pos = Tensor::from_floats(DType::f32, {3}, {1, 2, 3});
      Tensor neg = Tensor::from_floats(DType::f32, {3}, {-1, -2, 1});
      EXPECT_EQ(m.run({{"x", pos}}).at("y").get(2), 6.0);
      EXPECT_EQ(m.run({{"x", neg}}).at("y").get(2), -1.0);
    }
  }
}

}  // namespace
}  // namespace ubfuse
