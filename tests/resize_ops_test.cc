// Resize beyond the conformance cases (ops_conformance_test.cc): values worked out by hand, scales
// given at run time (one compiled model, two output sizes), a symbolic length times a whole scale,
// the errors for bad attributes and operands, at build time and at run time, and the ONNX import
// of what the backend node tests (test_resize_*) do not reach: opset 18's axes and
// keep_aspect_ratio_policy, Upsample's linear mode, opset 10, and the converter's errors.
#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::OneNode;
using testing::throws_with;
using testing::values;
using Ints = std::vector<int64_t>;
using testing::kFloat;

Tensor floats(const Sizes& s, std::vector<float> v) { return Tensor::from_floats(f32, s, v); }

TEST(ResizeOps, NearestAndLinearByHand) {
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    {  // nearest, asymmetric, floor: each element repeated twice along both axes
      GraphBuilder b;
      b.output("y", b.op(OpKind::Resize,
                         {b.input("x", f32, {1, 1, 2, 2}), b.constant(floats({4}, {1, 1, 2, 2}))},
                         {{"coordinate_transformation_mode", std::string("asymmetric")},
                          {"nearest_mode", std::string("floor")}}));
      Tensor y = compile(b.build(), o).run({{"x", floats({1, 1, 2, 2}, {1, 2, 3, 4})}}).at("y");
      EXPECT_EQ(y.sizes(), (Sizes{1, 1, 4, 4}));
      EXPECT_EQ(values(y), (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
    }
    {  // linear, half_pixel: coordinates -0.25, 0.25, 0.75, 1.25 over [0, 4], edges clamped
      GraphBuilder b;
      b.output("y", b.op(OpKind::Resize, {b.input("x", f32, {2}), b.constant(floats({1}, {2}))},
                         {{"mode", std::string("linear")}}));
      Tensor y = compile(b.build(), o).run({{"x", floats({2}, {0, 4})}}).at("y");
      EXPECT_EQ(values(y), (std::vector<double>{0, 1, 3, 4}));
    }
    {  // tf_crop_and_resize: roi [-1, 1] of [10, 20]: coordinates -1 (outside), 0, 1
      GraphBuilder b;
      b.output("y", b.op(OpKind::Resize,
                         {b.input("x", f32, {2}), b.constant(Tensor::from_floats(i64, {1}, {3})),
                          b.constant(floats({2}, {-1, 1}))},
                         {{"mode", std::string("linear")},
                          {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                          {"extrapolation_value", 7.0}}));
      Tensor y = compile(b.build(), o).run({{"x", floats({2}, {10, 20})}}).at("y");
      EXPECT_EQ(values(y), (std::vector<double>{7, 10, 20}));
    }
  }
}

TEST(ResizeOps, ScalesAtRunTimeOneModelTwoSizes) {
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    GraphBuilder b;
    auto y = b.op(OpKind::Resize, {b.input("x", f32, {1, 3}), b.input("scales", f32, {2})},
                  {{"coordinate_transformation_mode", std::string("asymmetric")},
                   {"nearest_mode", std::string("floor")}},
                  "rs");
    b.output("y", y);
    // An elementwise consumer of the run-time sized output (a fused kernel in graph mode).
    b.output("z", b.relu(b.add(y, b.constant(floats({1}, {-2})))));
    CompiledModel m = compile(b.build(), o);
    const Tensor x = floats({1, 3}, {1, 2, 3});
    auto r2 = m.run({{"x", x}, {"scales", floats({2}, {1, 2})}});
    EXPECT_EQ(values(r2.at("y")), (std::vector<double>{1, 1, 2, 2, 3, 3}));
    EXPECT_EQ(values(r2.at("z")), (std::vector<double>{0, 0, 0, 0, 1, 1}));
    Tensor y3 = m.run({{"x", x}, {"scales", floats({2}, {2, 1})}}).at("y");
    EXPECT_EQ(y3.sizes(), (Sizes{2, 3}));
    EXPECT_EQ(values(y3), (std::vector<double>{1, 2, 3, 1, 2, 3}));
    // A scale the plan reads is checked there, naming the node.
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", x}, {"scales", floats({2}, {1, 0})}});
        },
        {"'rs' (Resize)", "not positive and finite", "hint:"}));
  }
}

TEST(ResizeOps, SymbolicLengthTimesWholeScaleStaysPolynomial) {
  GraphBuilder b;
  b.output("y", b.op(OpKind::Resize,
                     {b.input("x", f32, Shape{Dim(int64_t(1)), Dim("n")}),
                      b.constant(floats({2}, {1, 2}))},
                     {{"mode", std::string("linear")}}));
  Graph g = b.build();
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[1,2*n]");
  Tensor y = compile(g, testing::eager_opts()).run({{"x", floats({1, 3}, {0, 3, 6})}}).at("y");
  EXPECT_EQ(y.sizes(), (Sizes{1, 6}));
}

TEST(ResizeOps, SizesFromAnotherTensorsShapeKeepItsSymbols) {
  // Resize x to the size of y (a UNet's skip connection): sizes are Shape(y), whose dims are known
  GraphBuilder b;
  auto y = b.input("y", f32, Shape{Dim(int64_t(2)), Dim("m")});
  b.output("z",
           b.op(OpKind::Resize,
                {b.input("x", f32, Shape{Dim(int64_t(1)), Dim("n")}), b.op(OpKind::Shape, {y})},
                {{"mode", std::string("linear")}}));
  Graph g = b.build();
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[2,m]");
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor z = compile(g, o)
                   .run({{"x", floats({1, 2}, {0, 4})}, {"y", Tensor::zeros(f32, {2, 4})}})
                   .at("z");
    // half_pixel at scale 2 on each row: [0, 1, 3, 4]; rows at scale 2 from one row
    EXPECT_EQ(values(z), (std::vector<double>{0, 1, 3, 4, 0, 1, 3, 4}));
  }
}

TEST(ResizeOps, BadAttributesAndOperandsNameNodeOpAndHint) {
  auto resize = [](Sizes s, Tensor v, Attrs a) {
    GraphBuilder b;
    b.output("y", b.op(OpKind::Resize, {b.input("x", f32, to_shape(s)), b.constant(v)},
                       std::move(a), "rs"));
  };
  const Tensor two = floats({2}, {2, 2});
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, two, {{"mode", std::string("bicubic")}});
      },
      {"'rs' (Resize)", "mode must be nearest, linear or cubic", "\"bicubic\"", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, two, {{"coordinate_transformation_mode", std::string("corners")}});
      },
      {"'rs' (Resize)", "\"corners\"", "hint: half_pixel"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, two, {{"nearest_mode", std::string("up")}});
      },
      {"'rs' (Resize)", "nearest_mode \"up\"", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, two, {{"keep_aspect_ratio_policy", std::string("fit")}});
      },
      {"'rs' (Resize)", "keep_aspect_ratio_policy \"fit\"", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({1, 2, 3}, two, {});
      },
      {"'rs' (Resize)", "scales must hold 3 values", "[2]", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, floats({2}, {1, -0.5f}), {});
      },
      {"'rs' (Resize)", "scales [1,-0.5]", "not positive and finite", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, Tensor::from_floats(i64, {2}, {3, -1}), {});
      },
      {"'rs' (Resize)", "negative size", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, two, {{"axes", Ints{1, -1}}});
      },
      {"'rs' (Resize)", "repeat axis 1", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, floats({2}, {1, 1e30f}), {});
      },
      {"'rs' (Resize)", "longer than 2^62", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({0, 2}, Tensor::from_floats(i64, {2}, {3, 2}), {});
      },
      {"'rs' (Resize)", "empty axis 0", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        resize({2, 2}, Tensor::from_floats(bf16, {2}, {2, 2}), {});
      },
      {"'rs' (Resize)", "scales (f32) or sizes (i64)", "bf16", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        GraphBuilder b;
        b.output("y", b.op(OpKind::Resize, {b.input("x", i64, {2}), b.constant(floats({1}, {2}))},
                           {}, "rs"));
      },
      {"'rs' (Resize)", "hint:"}));
}

TEST(ResizeOps, OnnxAxesKeepAspectRatioUpsampleAndOpset10) {
  // opset 18: sizes [6, 6] of axes 2, 3 not larger than asked: one scale min(6/2, 6/4) = 1.5
  Graph g18 = OneNode("Resize", 18)
                  .input("x", kFloat, {-1, 1, 2, 4})
                  .skip()
                  .skip()
                  .ints("sizes", {2}, {6, 6})
                  .attr("axes", Ints{2, 3})
                  .attr("keep_aspect_ratio_policy", std::string("not_larger"))
                  .output("y", kFloat)
                  .import();
  // Upsample (opset 9), linear: asymmetric coordinates 0, 0.5, 1, 1.5 over [0, 4]
  Graph g9 = OneNode("Upsample", 9)
                 .input("x", kFloat, {1, 2})
                 .init("scales", kFloat, {2}, {1, 2})
                 .attr("mode", std::string("linear"))
                 .output("y", kFloat)
                 .import();
  // Resize-10 shrinking by constant scales: nearest takes the element right of x / scale
  Graph g10c = OneNode("Resize", 10)
                   .input("x", kFloat, {1, 1, 2, 4})
                   .init("scales", kFloat, {4}, {1, 1, 0.6f, 0.6f})
                   .output("y", kFloat)
                   .import();
  // Resize-10 with its scales a graph input: nearest takes the element left of x / scale
  Graph g10 = OneNode("Resize", 10)
                  .input("x", kFloat, {1, 3})
                  .input("scales", kFloat, {2})
                  .output("y", kFloat)
                  .import();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    std::vector<float> v(16);
    for (size_t i = 0; i < v.size(); i++) v[i] = float(i);
    Tensor y = compile(g18, o).run({{"x", floats({2, 1, 2, 4}, v)}}).at("y");
    EXPECT_EQ(y.sizes(), (Sizes{2, 1, 3, 6}));
    Tensor u = compile(g9, o).run({{"x", floats({1, 2}, {0, 4})}}).at("y");
    EXPECT_EQ(values(u), (std::vector<double>{0, 2, 4, 4}));
    Tensor r = compile(g10, o)
                   .run({{"x", floats({1, 3}, {1, 2, 3})}, {"scales", floats({2}, {1, 1.5f})}})
                   .at("y");
    // coordinates 0, 2/3, 4/3, 2
    EXPECT_EQ(values(r), (std::vector<double>{1, 1, 2, 3}));
    // [1, 1, 1, 2]: row 0, columns at 0 and 5/3
    Tensor c10 =
        compile(g10c, o).run({{"x", floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}}).at("y");
    EXPECT_EQ(values(c10), (std::vector<double>{1, 3}));
  }
}

TEST(ResizeOps, OnnxConverterErrorsNameNodeOpAndHint) {
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Resize", 13)
            .input("x", kFloat, {1, 2})
            .skip()
            .init("scales", kFloat, {2}, {1, 2})
            .ints("sizes", {2}, {1, 4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "Resize", "takes scales or sizes, not both", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Resize", 13)
            .input("x", kFloat, {1, 2})
            .input("roi", kFloat, {4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "Resize", "needs scales or sizes", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Resize", 13)
            .input("x", kFloat, {1, 2})
            .skip()
            .init("scales", kFloat, {3}, {1, 2, 2})
            .output("y", kFloat)
            .import();
      },
      {"node0", "Resize", "scales must hold 2 values", "[3]", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Resize", 13)
            .input("x", kFloat, {1, 2})
            .skip()
            .init("scales", kFloat, {2}, {1, 2})
            .attr("mode", std::string("area"))
            .output("y", kFloat)
            .import();
      },
      {"node0", "Resize", "\"area\"", "hint:"}));
}

}  // namespace
}  // namespace ubfuse
