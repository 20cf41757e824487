// GatherElements and ArgMax/ArgMin: bad input is an error naming the node; ties and the
// select_last_index choice.
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;

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

}  // namespace
}  // namespace ubfuse
