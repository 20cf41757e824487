// Shape values at run time (ir/values.h, compiler/shape_values.h): targets and bounds that are
// graph inputs or computed, run on the host while a plan is built, the plan cache keyed on
// their contents, and errors that name the node, the value and the shape.
#include "plan/plan.h"
#include "runtime/executor.h"
#include "test_util.h"
#include "ubfuse/onnx.h"

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

// Plans reuse what earlier plans inferred per node (PlanMemo): a decode loop's plans for past
// lengths 1..80 and back, built through the memo, equal plans built from nothing in every size,
// symbol, shape value and operand. Nodes that never see the past are reused; the others (which
// miss every time, and are then tried only now and then) are inferred afresh.
TEST(PlanMemo, ReusedInferenceEqualsAFreshPlanAtEveryDecodeLength) {
  CompiledModel m = compile(
      import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/kv_decoder_with_past.onnx"),
      testing::eager_opts());
  const Executor& exe = m.executor();
  auto same_ref = [](const BufferRef& a, const BufferRef& b) {
    return a.kind == b.kind && a.index == b.index && a.offset == b.offset && a.dtype == b.dtype &&
           *a.sizes == *b.sizes &&
           (a.kind != BufferRef::Kind::Constant || a.constant->sizes() == b.constant->sizes());
  };
  std::vector<int64_t> pasts;
  for (int64_t p = 1; p <= 80; p++) pasts.push_back(p);
  for (int64_t p : {3, 50, 3, 1, 79}) pasts.push_back(p);
  for (int64_t past : pasts) {
    SCOPED_TRACE("past " + std::to_string(past));
    SymbolBindings b{
        {"batch_size", 1}, {"sequence_length", past % 3 ? 1 : 2}, {"past_sequence_length", past}};
    auto memo = exe.build_plan(b);
    auto fresh = build_plan(exe.plan_spec(), b, {}, nullptr);
    ASSERT_EQ(memo->symbols, fresh->symbols);
    ASSERT_EQ(memo->sizes, fresh->sizes);
    ASSERT_EQ(memo->arena_bytes, fresh->arena_bytes);
    ASSERT_EQ(memo->values.size(), fresh->values.size());
    for (auto& [v, t] : fresh->values) {
      const Tensor& u = memo->values.at(v);
      ASSERT_EQ(u.sizes(), t.sizes()) << v->name;
      for (int64_t i = 0; i < t.numel(); i++) ASSERT_EQ(u.get(i), t.get(i)) << v->name;
    }
    ASSERT_EQ(memo->steps.size(), fresh->steps.size());
    for (size_t k = 0; k < fresh->steps.size(); k++) {
      for (size_t i = 0; i < fresh->steps[k].inputs.size(); i++) {
        ASSERT_TRUE(same_ref(memo->steps[k].inputs[i], fresh->steps[k].inputs[i])) << k;
      }
      for (size_t i = 0; i < fresh->steps[k].outputs.size(); i++) {
        ASSERT_TRUE(same_ref(memo->steps[k].outputs[i], fresh->steps[k].outputs[i])) << k;
      }
    }
  }
  CompileStats st = m.stats();
  const int64_t nodes = int64_t(exe.plan_spec().order.size());
  EXPECT_EQ(st.plan_nodes_reused + st.plan_nodes_inferred, nodes * int64_t(pasts.size()));
  EXPECT_GT(st.plan_nodes_reused, st.plan_nodes_inferred);   // most nodes never see the past
  EXPECT_GT(st.plan_nodes_inferred, int64_t(pasts.size()));  // the ones that do, every time
}

// The memo compares the contents of the values a node reads, not just their sizes: one Reshape
// node fed targets of equal size and different contents infers each, and a binding that breaks
// an op is still an error after the memo has seen good ones.
TEST(PlanMemo, ContentsAndBadBindingsAreNeverReusedWrongly) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"n"});
  auto t = b.input("target", DType::i64, {2});
  b.output("y", b.reshape(b.add(x, b.constant(Tensor::random(DType::f32, {12}, 2))), t));
  b.name_last("to_target");
  Graph g = b.build();
  CompiledModel m = compile(g, testing::eager_opts());
  Tensor xv = Tensor::random(DType::f32, {12}, 1);
  for (auto target : {std::vector<float>{3, 4}, {4, 3}, {2, 6}, {6, 2}, {3, 4}, {12, 1}}) {
    auto y = m.run({{"x", xv}, {"target", ints(target)}}).at("y");
    ASSERT_EQ(y.sizes(), (Sizes{int64_t(target[0]), int64_t(target[1])}));
  }
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", Tensor::random(DType::f32, {5}, 1)}, {"target", ints({3, 4})}});
      },
      {"cannot broadcast", "[5]", "[12]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", xv}, {"target", ints({5, 5})}});
      },
      {"node 'to_target' (Reshape)", "[5,5]"}));
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

namespace ubfuse {
namespace {

// One compiled model run on `in`, every output checked against the double reference.
::testing::AssertionResult runs_like_reference(const CompiledModel& m, const Graph& g,
                                               const std::map<std::string, Tensor>& in) {
  auto want = ref::run_graph(g, in);
  auto got = m.run(in);
  for (auto& [name, w] : want) {
    auto r = testing::close_to_ref(got.at(name), w);
    if (!r) return r << " (output '" << name << "')";
  }
  return ::testing::AssertionSuccess();
}

GraphBuilder::V axes_shape(GraphBuilder& b, GraphBuilder::V x, GraphBuilder::V v,
                           const std::string& mode, int64_t axis = 0) {
  Attrs a{{"mode", mode}};
  if (mode == "split") a["axis"] = axis;
  return b.op(OpKind::AxesShape, {b.shape_of(x), v}, a);
}

// Unsqueeze then Squeeze with the axes a graph input (how ONNX's opset 13 forms import): the
// number of axes is the input's length, so the rank is known; which dims move is each plan's.
// One compiled model serves every value, its fused kernels compiled once.
TEST(ShapeValuesAxes, UnsqueezeAndSqueezeAxesFromAGraphInput) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto axes = b.input("axes", DType::i64, {2});
  auto u = b.reshape(x, axes_shape(b, x, axes, "unsqueeze"), true);  // rank 4
  auto e = b.add(b.mul(b.exp(u), 2.0), 1.0);
  auto s = b.reshape(e, axes_shape(b, e, axes, "squeeze"), true);  // rank 2 again
  b.output("u", e);
  b.output("s", b.neg(s));
  Graph g = b.build();
  EXPECT_EQ(g.outputs()[0].second->shape.size(), 4u);
  Tensor xv = Tensor::random(DType::f32, {2, 3}, 1);
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    const size_t kernels = m.kernels().size();
    const std::vector<std::pair<std::vector<float>, Sizes>> cases = {{{0, 1}, {1, 1, 2, 3}},
                                                                     {{-1, 1}, {2, 1, 3, 1}},
                                                                     {{3, 0}, {1, 2, 3, 1}},
                                                                     {{0, 1}, {1, 1, 2, 3}}};
    for (auto& [a, want] : cases) {
      std::map<std::string, Tensor> in{{"x", xv}, {"axes", ints(a)}};
      EXPECT_EQ(m.run(in).at("u").sizes(), want);
      EXPECT_EQ(m.run(in).at("s").sizes(), (Sizes{2, 3}));
      EXPECT_TRUE(runs_like_reference(m, g, in)) << a[0] << "," << a[1];
    }
    EXPECT_EQ(m.stats().plan_builds, 3);
    EXPECT_EQ(m.stats().compilations, 1);
    EXPECT_EQ(m.kernels().size(), kernels);
  }
}

// A reduction over axes given at run time: Transpose by AxesShape's perm (the value form), the
// reduced axes merged last, a last-axis ReduceSum, and the kept dims (keepdims) or not.
TEST(ShapeValuesAxes, ReduceAxesFromAGraphInput) {
  for (bool keep : {true, false}) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {2, 3, 5});
    auto axes = b.input("axes", DType::i64, {2});
    auto perm = axes_shape(b, x, axes, "reduce_perm");
    auto moved = b.op(OpKind::Transpose, {x, perm});
    auto merged = b.reshape(moved, axes_shape(b, x, axes, "reduce_merged"), true);
    auto red = b.reduce_sum(b.mul(merged, 0.5));
    b.output("y",
             b.reshape(red, axes_shape(b, x, axes, keep ? "reduce_keep" : "reduce_drop"), true));
    Graph g = b.build();
    Tensor xv = Tensor::random(DType::f32, {2, 3, 5}, 2);
    for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
      CompiledModel m = compile(g, opts);
      const size_t kernels = m.kernels().size();
      const std::vector<std::pair<std::vector<float>, Sizes>> cases = {
          {{0, 2}, keep ? Sizes{1, 3, 1} : Sizes{3}},
          {{-1, 1}, keep ? Sizes{2, 1, 1} : Sizes{2}},
          {{1, 0}, keep ? Sizes{1, 1, 5} : Sizes{5}}};
      for (auto& [a, want] : cases) {
        std::map<std::string, Tensor> in{{"x", xv}, {"axes", ints(a)}};
        EXPECT_EQ(m.run(in).at("y").sizes(), want);
        EXPECT_TRUE(runs_like_reference(m, g, in)) << a[0] << "," << a[1] << " keep=" << keep;
      }
      EXPECT_EQ(m.stats().plan_builds, 3);
      EXPECT_EQ(m.kernels().size(), kernels);
    }
  }
}

// Tile's repeats and Split's sizes as graph inputs, and CumSum's axis.
TEST(ShapeValuesAxes, TileRepeatsSplitSizesAndCumSumAxisFromGraphInputs) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"n", 3});
  auto reps = b.input("repeats", DType::i64, {2});
  auto sizes = b.input("sizes", DType::i64, {2});
  auto axis = b.input("axis", DType::i64, {});
  auto grid = b.expand(b.reshape(x, {1, -1, 1, 3}), axes_shape(b, x, reps, "tile"));
  auto tiled = b.reshape(grid, axes_shape(b, x, reps, "tiled"), true);
  auto off = axes_shape(b, x, sizes, "split", 1);
  auto part = [&](int64_t i) {
    auto st = b.slice(off, {i}, {i + 1}, {0}, {1});
    auto en = b.slice(off, {i + 1}, {i + 2}, {0}, {1});
    return b.slice(x, st, en, b.constant(ints({1})), b.constant(ints({1})));
  };
  b.output("tiled", b.mul(tiled, 3.0));
  b.output("p0", part(0));
  b.output("p1", b.add(part(1), 1.0));
  b.output("c", b.op(OpKind::CumSum, {x, axis}, {{"exclusive", int64_t(1)}}));
  Graph g = b.build();
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (int64_t n : {2, 5}) {
      Tensor xv = Tensor::random(DType::f32, {n, 3}, uint64_t(n));
      for (auto [r0, r1, s0, ax] :
           std::vector<std::array<float, 4>>{{2, 1, 1, 0}, {1, 3, 3, 1}, {3, 2, 0, -1}}) {
        std::map<std::string, Tensor> in{{"x", xv},
                                         {"repeats", ints({r0, r1})},
                                         {"sizes", ints({s0, 3 - s0})},
                                         {"axis", Tensor::from_floats(DType::i64, {}, {ax})}};
        auto got = m.run(in);
        EXPECT_EQ(got.at("tiled").sizes(), (Sizes{n * int64_t(r0), 3 * int64_t(r1)}));
        EXPECT_EQ(got.at("p0").sizes(), (Sizes{n, int64_t(s0)}));
        EXPECT_EQ(got.at("p1").sizes(), (Sizes{n, 3 - int64_t(s0)}));
        EXPECT_TRUE(runs_like_reference(m, g, in)) << n << ": " << r0 << "," << r1 << " " << s0;
      }
    }
  }
}

// Pad's pads a graph input ((x, value, pads)): each value its own plan, a crop below 0 an error
// naming the node, the pads and the shape.
TEST(ShapeValuesAxes, PadPadsFromAGraphInput) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"n", 3});
  auto pads = b.input("pads", DType::i64, {4});
  auto v = b.constant(Tensor::from_floats(DType::f32, {}, {1.5}));
  b.output("y", b.mul(b.op(OpKind::Pad, {x, v, pads}, {{"mode", std::string("constant")}}), 2.0));
  b.name_last("y");
  Graph g = b.build();
  Tensor xv = Tensor::random(DType::f32, {4, 3}, 9);
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (auto p : std::vector<std::vector<float>>{{1, 0, 0, 2}, {0, -1, 2, 1}, {1, 0, 0, 2}}) {
      std::map<std::string, Tensor> in{{"x", xv}, {"pads", ints(p)}};
      EXPECT_EQ(m.run(in).at("y").sizes(),
                (Sizes{4 + int64_t(p[0] + p[2]), 3 + int64_t(p[1] + p[3])}));
      EXPECT_TRUE(runs_like_reference(m, g, in));
    }
    EXPECT_EQ(m.stats().plan_builds, 2);
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", xv}, {"pads", ints({0, -2, 0, -2})}});
        },
        {"(Pad)", "pads [0,-2,0,-2] crop axis 1 of length 3 below 0"}));
  }
}

// Values that make a shape invalid are errors when the plan is built, naming the node, the
// values and the shape, in both modes (the same kernel checks them).
TEST(ShapeValuesAxes, InvalidAxesSizesAndRepeatsNameTheNodeTheValueAndTheShape) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3});
  auto axes = b.input("axes", DType::i64, {2});
  auto one = b.input("one_axis", DType::i64, {1});
  auto reps = b.input("repeats", DType::i64, {2});
  auto sizes = b.input("sizes", DType::i64, {2});
  auto axis = b.input("axis", DType::i64, {1});
  b.output("u", b.reshape(x, axes_shape(b, x, axes, "unsqueeze"), true));
  b.name_last("unsq");
  auto x1 = b.reshape(x, {2, 1, 3});
  b.output("s", b.reshape(x1, axes_shape(b, x1, one, "squeeze"), true));
  b.output("t", b.expand(b.reshape(x, {1, 2, 1, 3}), axes_shape(b, x, reps, "tile")));
  auto off = axes_shape(b, x, sizes, "split", 1);
  b.output("p", b.slice(x, b.slice(off, {0}, {1}, {0}, {1}), b.slice(off, {1}, {2}, {0}, {1}),
                        b.constant(ints({1})), b.constant(ints({1}))));
  b.output("c", b.op(OpKind::CumSum, {x, axis}, {}, "scan"));
  Graph g = b.build();
  const std::map<std::string, Tensor> ok{{"x", Tensor::random(DType::f32, {2, 3}, 1)},
                                         {"axes", ints({0, 1})},
                                         {"one_axis", ints({1})},
                                         {"repeats", ints({1, 2})},
                                         {"sizes", ints({1, 2})},
                                         {"axis", ints({1})}};
  auto with = [&](const std::string& k, Tensor v) {
    auto in = ok;
    in[k] = std::move(v);
    return in;
  };
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    auto run = [&m](std::map<std::string, Tensor> in) { return [&m, in] { m.run(in); }; };
    EXPECT_TRUE(throws_with(run(with("axes", ints({1, 1}))),
                            {"(AxesShape)", "Unsqueeze's axes [1,1]", "[2,3]", "axis 1 repeats"}));
    EXPECT_TRUE(throws_with(run(with("axes", ints({0, 4}))),
                            {"Unsqueeze's axes [0,4]", "[2,3]", "out of range for rank 4"}));
    EXPECT_TRUE(throws_with(run(with("one_axis", ints({0}))),
                            {"Squeeze's axes [0]", "[2,1,3]", "axis 0 has size 2, not 1"}));
    EXPECT_TRUE(throws_with(run(with("repeats", ints({1, -2}))),
                            {"Tile's repeats [1,-2]", "[2,3]", "axis 1 is negative"}));
    EXPECT_TRUE(
        throws_with(run(with("repeats", ints({1, 4e18f}))),
                    {"Tile's repeats [1,", "[2,3]", "the repeat of axis 1 overflows its size"}));
    EXPECT_TRUE(throws_with(run(with("sizes", ints({1, 1}))),
                            {"Split's sizes [1,1]", "[2,3]", "add up to 2, not the size 3"}));
    EXPECT_TRUE(
        throws_with(run(with("axis", ints({2}))), {"node 'scan' (CumSum)", "axis 2", "[2,3]"}));
  }
  // Known when the model is built, the same checks are compile errors.
  GraphBuilder c;
  auto cx = c.input("x", DType::f32, {2, 3});
  EXPECT_TRUE(throws_with(
      [&] {
        c.op(OpKind::AxesShape, {c.shape_of(cx), c.constant(ints({1, -3}))},
             {{"mode", std::string("unsqueeze")}});
      },
      {"(AxesShape)", "Unsqueeze's axes [1,-3]", "axis -3 repeats"}));
  EXPECT_TRUE(throws_with(
      [&] {
        c.op(OpKind::CumSum, {cx, c.constant(ints({-3}))});
      },
      {"(CumSum)", "axis -3 is out of range for the input shape [2,3]"}));
}

}  // namespace
}  // namespace ubfuse
