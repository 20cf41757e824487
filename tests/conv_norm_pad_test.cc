// Conv (1 to 3 spatial axes), GroupNorm and Pad beyond the conformance cases
// (ops_conformance_test.cc): symbolic lengths through shape inference and run-time planning, the
// errors for bad attributes and operands, integer Pad, and the ONNX importer's forms (opset 18 Pad
// axes, per-group GroupNormalization).
#include <fstream>

#include "test_util.h"
#include "ubfuse/npy.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::throws_with;

// Runs one compiled model at each binding of its inputs, every output against the reference.
void expect_matches_at(const Graph& g, const Options& opts,
                       const std::vector<std::map<std::string, Sizes>>& bindings) {
  CompiledModel m = compile(g, opts);
  for (auto& sizes : bindings) {
    std::map<std::string, Tensor> in;
    uint64_t seed = 3;
    for (auto& [name, s] : sizes) in[name] = Tensor::random(f32, s, seed++, -2, 2);
    auto want = ref::run_graph(g, in);
    auto got = m.run(in);
    for (auto& [name, w] : want) {
      EXPECT_TRUE(testing::close_to_ref(got.at(name), w))
          << name << " at " << sizes.begin()->first << sizes_str(sizes.begin()->second);
    }
  }
}

bool is_runtime(const Dim& d) { return !d.is_static() && d.str()[0] == '$'; }

TEST(ConvShapes, SymbolicLengthsStayPolynomials) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 4, "len"});
  auto w = b.constant(Tensor::random(f32, {6, 4, 3}, 1));
  ConvOptions same;
  same.pads = {1, 1};
  ConvOptions dilated;
  dilated.dilations = {2};
  dilated.pads = {0, 1};
  ConvOptions same_upper;
  same_upper.auto_pad = "SAME_UPPER";
  auto y_same = b.conv(x, w, nullptr, same);
  auto y_valid = b.conv(x, w, nullptr);
  auto y_dil = b.conv(x, w, nullptr, dilated);
  auto y_auto = b.conv(x, w, nullptr, same_upper);
  EXPECT_EQ(shape_str(y_same->shape), "[1,6,len]");
  EXPECT_EQ(shape_str(y_valid->shape), "[1,6,len-2]");
  EXPECT_EQ(shape_str(y_dil->shape), "[1,6,len-3]");  // len + 1 - 5 + 1
  EXPECT_EQ(shape_str(y_auto->shape), "[1,6,len]");
  // Stride 2 over an even symbolic length: floor((2n + 2 - 3) / 2) + 1 = n.
  auto x2 = b.input("x2", f32, {1, 4, "2*n"});
  ConvOptions s2 = same;
  s2.strides = {2};
  auto y_even = b.conv(x2, w, nullptr, s2);
  EXPECT_EQ(shape_str(y_even->shape), "[1,6,n]");
  // Over a length the stride does not divide no polynomial states the result: a run-time dim.
  auto y_odd = b.conv(x, w, nullptr, s2);
  EXPECT_TRUE(is_runtime(y_odd->shape[2])) << shape_str(y_odd->shape);
  ConvOptions s3_same;
  s3_same.strides = {3};
  s3_same.auto_pad = "SAME_LOWER";
  auto y_ceil = b.conv(x, w, nullptr, s3_same);  // ceil(len / 3)
  EXPECT_TRUE(is_runtime(y_ceil->shape[2])) << shape_str(y_ceil->shape);
  for (auto y : {y_same, y_valid, y_dil, y_auto, y_even, y_odd, y_ceil}) {
    b.output("y" + std::to_string(b.graph().outputs().size()), y);
  }
  Graph g = b.build();
  for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
    expect_matches_at(g, opts,
                      {{{"x", {1, 4, 7}}, {"x2", {1, 4, 10}}},
                       {{"x", {1, 4, 12}}, {"x2", {1, 4, 4}}},
                       {{"x", {1, 4, 7}}, {"x2", {1, 4, 2}}}});
  }
}

TEST(ConvShapes, Conv2dSymbolicHeightAndWidthAndDepthwise) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 3, "h", "w"});
  ConvOptions o;
  o.pads = {1, 1, 1, 1};
  o.group = 3;
  auto y = b.conv(x, b.constant(Tensor::random(f32, {6, 1, 3, 3}, 2)),
                  b.constant(Tensor::random(f32, {6}, 3)), o);
  EXPECT_EQ(shape_str(y->shape), "[batch,6,h,w]");
  b.output("y", y);
  Graph g = b.build();
  for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
    expect_matches_at(g, opts, {{{"x", {2, 3, 5, 9}}}, {{"x", {1, 3, 1, 1}}}});
  }
}

// Empty tensors: no batch, no input channels (each output is its bias), an empty axis padded.
TEST(ConvShapes, EmptyBatchNoChannelsAndEmptyAxes) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"n", "c", 5});
  auto w = b.input("w", f32, {6, "c", 3});
  auto bias = b.input("bias", f32, {6});
  b.output("conv", b.conv(x, w, bias));
  b.output("gn", b.group_norm(b.input("g", f32, {2, 6, "s"}), nullptr, nullptr, 3));
  b.output("pad", b.pad(b.input("p", f32, {"r", 3}), {1, 0, 0, 2}, "constant"));
  Graph g = b.build();
  for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
    expect_matches_at(
        g, opts,
        {{{"x", {0, 4, 5}}, {"w", {6, 4, 3}}, {"bias", {6}}, {"g", {2, 6, 0}}, {"p", {0, 3}}},
         {{"x", {2, 0, 5}}, {"w", {6, 0, 3}}, {"bias", {6}}, {"g", {2, 6, 1}}, {"p", {2, 3}}}});
  }
}

// A pad wider than the kernel's reach (outputs that see only padding), on one side, along one
// axis, over 1 to 3 spatial axes and with groups: equal to the reference, also with a NaN weight.
// Padding is zero-valued input, so a tap of a NaN weight on it gives NaN (ONNX; oneDNN's kernels),
// where the reference had skipped such taps (fuzz_onnx found it: a 3-D conv, NaN in channel 0).
TEST(ConvShapes, PadsWiderThanTheKernel) {
  struct Case {
    Sizes x, w;
    std::vector<int64_t> pads;
    int64_t group;
  };
  const Case cases[] = {{{2, 4, 5}, {6, 2, 3}, {8, 0}, 2},
                        {{2, 4, 5, 4}, {6, 2, 3, 3}, {0, 8, 0, 0}, 2},
                        {{2, 4, 4, 5, 4}, {6, 2, 3, 3, 3}, {0, 0, 8, 0, 0, 0}, 2},
                        {{1, 3, 4, 5, 6}, {2, 3, 2, 2, 2}, {5, 0, 0, 0, 7, 6}, 1}};
  for (const Case& k : cases) {
    for (bool nan : {false, true}) {
      GraphBuilder b;
      auto x = testing::in(b, "x", DType::f32, k.x);
      Tensor wt = Tensor::random(DType::f32, k.w, 3);
      if (nan) wt.set(5, std::nan(""));
      auto w = b.constant(wt);
      auto bias = b.constant(Tensor::random(DType::f32, {k.w[0]}, 4));
      ConvOptions o;
      o.pads = k.pads;
      o.group = k.group;
      b.output("y", b.conv(x, w, bias, o));
      Graph g = b.build();
      std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, k.x, 5)}};
      for (const Options& opts : {testing::eager_opts(), testing::graph_opts()}) {
        EXPECT_TRUE(testing::matches_reference(g, in, opts))
            << sizes_str(k.x) << " pads " << sizes_str(k.pads) << (nan ? " NaN weight" : "");
      }
    }
  }
}

TEST(GroupNormShapes, SymbolicPositions) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 6, "len"});
  auto y = b.group_norm(x, b.constant(Tensor::random(f32, {6}, 4)),
                        b.constant(Tensor::random(f32, {6}, 5)), 2);
  EXPECT_EQ(shape_str(y->shape), "[batch,6,len]");
  b.output("y", y);
  Graph g = b.build();
  for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
    expect_matches_at(g, opts, {{{"x", {2, 6, 33}}}, {{"x", {1, 6, 1}}}, {{"x", {3, 6, 4100}}}});
  }
}

// Values near 1e20 square past f32's range: the statistics are redone on scaled values.
TEST(GroupNormShapes, HugeValuesDoNotOverflow) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 4, 37});
  b.output("y", b.group_norm(x, nullptr, nullptr, 2));
  Graph g = b.build();
  Tensor xt = Tensor::random(f32, {1, 4, 37}, 6, -1, 1);
  for (int64_t i = 0; i < xt.numel(); i++) xt.set(i, xt.get(i) * 1e20 + 3e20);
  EXPECT_TRUE(testing::matches_reference(g, {{"x", xt}}, testing::eager_opts()));
}

TEST(PadShapes, SymbolicAxisGrowsByItsPads) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, "len"});
  auto y = b.pad(x, {0, 2, 1, 3}, "reflect");
  EXPECT_EQ(shape_str(y->shape), "[3,len+5]");
  auto z = b.pad(x, {0, -1, 0, 0}, "edge");
  EXPECT_EQ(shape_str(z->shape), "[2,len-1]");
  b.output("y", y);
  b.output("z", z);
  Graph g = b.build();
  for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
    expect_matches_at(g, opts, {{{"x", {2, 1}}}, {{"x", {2, 6}}}, {{"x", {2, 70000}}}});
  }
}

// Pad moves bytes: integer and bool tensors pad like floats, exactly.
TEST(PadShapes, IntegerAndBoolDtypes) {
  for (DType t : {i64, i32, boolean}) {
    for (const char* mode : {"constant", "reflect", "edge"}) {
      GraphBuilder b;
      auto x = b.input("x", t, {3, 4});
      auto v = std::string(mode) == "constant" && t != boolean
                   ? b.constant(Tensor::from_floats(t, {}, {-7}))
                   : nullptr;
      b.output("y", b.pad(x, {1, 5, 2, -1}, mode, v));
      Graph g = b.build();
      Tensor xt(t, {3, 4});
      for (int64_t i = 0; i < xt.numel(); i++) xt.set(i, t == boolean ? i % 3 == 0 : 1000 * i - 5);
      for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
        EXPECT_TRUE(testing::matches_reference(g, {{"x", xt}}, opts))
            << dtype_name(t) << " " << mode;
      }
    }
  }
}

// --- Conv's epilogue: the elementwise ops (and row reductions) after a Conv run in its kernel,
// on its output while it is in cache.

// x [2, 8, len] -> Conv1d (k 3, pads 1) -> + bias [16, 1] -> GELU.
Graph conv_bias_gelu(DType t, const Dim& len, bool conv_out_too = false) {
  GraphBuilder b;
  auto x = b.input("x", t, {2, 8, len});
  ConvOptions o;
  o.pads = {1, 1};
  auto c = b.conv(x, b.constant(Tensor::random(t, {16, 8, 3}, 1, -0.5, 0.5)), nullptr, o);
  auto y = b.gelu(b.add(c, b.constant(Tensor::random(t, {16, 1}, 2))));
  b.output("y", y);
  if (conv_out_too) b.output("conv", c);
  return b.build();
}

TEST(ConvFusion, BiasAddGeluIsOneKernel) {
  for (DType t : {f32, bf16, f16}) {
    for (const char* engine : {"cpp", "interpreter"}) {
      Graph g = conv_bias_gelu(t, "len");
      CompiledModel m = compile(g, testing::engine_opts(engine));
      ASSERT_EQ(m.kernels().size(), 1u) << dtype_name(t) << " " << engine;
      EXPECT_EQ(m.kernels()[0].name, "FusedConvAddGelu");
      bool fused_by_rule = false;
      for (const FusionDecision& d : m.decisions()) {
        fused_by_rule |= d.reason == FusionReason::Fused &&
                         d.message.find("ConvEpilogueFusion") != std::string::npos;
      }
      EXPECT_TRUE(fused_by_rule);
      for (int64_t len : {1, 7, 3000}) {
        std::map<std::string, Tensor> in{{"x", Tensor::random(t, {2, 8, len}, 5)}};
        auto want = ref::run_graph(g, in);
        EXPECT_TRUE(testing::close_to_ref(m.run(in).at("y"), want.at("y")))
            << dtype_name(t) << " " << engine << " len " << len;
      }
    }
    EXPECT_TRUE(testing::matches_reference(
        conv_bias_gelu(t, "len"), {{"x", Tensor::random(t, {2, 8, 9}, 6)}}, testing::eager_opts()));
  }
}

// The Conv's output also leaves the group: the kernel writes it to the caller's buffer, and the
// epilogue reads it from there.
TEST(ConvFusion, ConvOutputNeededOutsideIsAlsoWritten) {
  Graph g = conv_bias_gelu(f32, Dim(int64_t(37)), true);
  CompiledModel m = compile(g, testing::graph_opts());
  ASSERT_EQ(m.kernels().size(), 1u);
  EXPECT_TRUE(testing::matches_reference(g, {{"x", Tensor::random(f32, {2, 8, 37}, 7)}},
                                         testing::graph_opts()));
}

// A row reduction over the Conv's last axis joins the epilogue too (the whole output is there).
TEST(ConvFusion, SoftmaxOverPositionsJoinsTheEpilogue) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 4, 2, 33});
  ConvOptions o;
  o.auto_pad = "SAME_UPPER";
  auto c = b.conv(x, b.constant(Tensor::random(f32, {6, 4, 3, 3}, 1)), nullptr, o);
  b.output("y", b.softmax(b.mul(c, 0.5)));
  Graph g = b.build();
  CompiledModel m = compile(g, testing::graph_opts());
  ASSERT_EQ(m.kernels().size(), 1u);
  EXPECT_EQ(m.kernels()[0].name, "FusedConvMulSoftmax");
  EXPECT_TRUE(testing::matches_reference(g, {{"x", Tensor::random(f32, {1, 4, 2, 33}, 8)}},
                                         testing::graph_opts()));
}

// A video transformer's patch embedding: Conv3d with kernel = stride (tubelets of 2 frames of
// 4 x 4 pixels), its bias and a GELU in one kernel, at frame counts given at run time.
TEST(ConvFusion, Conv3dPatchEmbeddingEpilogueIsOneKernel) {
  for (DType t : {f32, bf16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {1, 3, "frames", 8, 12});
    ConvOptions o;
    o.strides = {2, 4, 4};
    auto c = b.conv(x, b.constant(Tensor::random(t, {16, 3, 2, 4, 4}, 3, -0.3, 0.3)), nullptr, o);
    b.output("y", b.gelu(b.add(c, b.constant(Tensor::random(t, {16, 1, 1, 1}, 4)))));
    Graph g = b.build();
    for (const char* engine : {"cpp", "interpreter"}) {
      CompiledModel m = compile(g, testing::engine_opts(engine));
      ASSERT_EQ(m.kernels().size(), 1u) << dtype_name(t) << " " << engine;
      EXPECT_EQ(m.kernels()[0].name, "FusedConvAddGelu");
      for (int64_t frames : {2, 5, 16}) {
        std::map<std::string, Tensor> in{{"x", Tensor::random(t, {1, 3, frames, 8, 12}, 5)}};
        auto want = ref::run_graph(g, in);
        Tensor y = m.run(in).at("y");
        EXPECT_EQ(y.sizes(), (Sizes{1, 16, frames / 2, 2, 3}));
        EXPECT_TRUE(testing::close_to_ref(y, want.at("y")))
            << dtype_name(t) << " " << engine << " frames " << frames;
      }
    }
  }
}

// --- A Conv whose kernel tiles its input (stride = kernel, no padding, one group: a ViT's patch
// embedding) runs as a MatMul of its patches (conv_dnnl.cc, PatchMatMul): 1 to 3 spatial axes,
// lengths the kernel does not divide (the rest is not read), one patch, batches, with and without
// the bias input, auto_pad VALID, at sizes given at run time, in both modes; weights given at run
// time take oneDNN's convolution and agree.
TEST(ConvPatches, MatMulOfPatchesMatchesTheReference) {
  struct Case {
    Shape x;
    Sizes w;
    std::vector<std::map<std::string, Sizes>> bindings;
  };
  const std::vector<Case> cases = {
      {{"n", 3, "len"}, {5, 3, 4}, {{{"x", {1, 3, 16}}}, {{"x", {2, 3, 13}}}, {{"x", {3, 3, 4}}}}},
      {{"n", 3, "h", "w"},
       {12, 3, 4, 3},
       {{{"x", {1, 3, 8, 9}}}, {{"x", {2, 3, 11, 10}}}, {{"x", {1, 3, 4, 3}}}}},
      {{1, 2, "t", 8, 9}, {7, 2, 2, 4, 3}, {{{"x", {1, 2, 2, 8, 9}}}, {{"x", {1, 2, 5, 8, 9}}}}},
      // 70 patches of 48 inputs onto 100 channels: the MatMul past its few-row loop, two panels.
      {{"n", 3, 40, 56}, {100, 3, 4, 4}, {{{"x", {1, 3, 40, 56}}}, {{"x", {3, 3, 40, 56}}}}},
  };
  for (const Case& c : cases) {
    for (bool bias : {false, true}) {
      for (const char* pad : {"NOTSET", "VALID"}) {
        GraphBuilder b;
        auto x = b.input("x", f32, c.x);
        ConvOptions o;
        o.strides.assign(c.w.begin() + 2, c.w.end());
        o.auto_pad = pad;
        auto w = b.constant(Tensor::random(f32, c.w, 7, -0.5, 0.5));
        auto bv = bias ? b.constant(Tensor::random(f32, {c.w[0]}, 8)) : nullptr;
        b.output("y", b.conv(x, w, bv, o));
        Graph g = b.build();
        for (const Options& opts : {testing::eager_opts(), testing::graph_opts()}) {
          SCOPED_TRACE(sizes_str(c.w) + (bias ? " bias " : " ") + pad);
          expect_matches_at(g, opts, c.bindings);
        }
      }
    }
  }
  // The same products with the weights as an input: oneDNN's convolution.
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3, 11, 10});
  auto w = b.input("w", f32, {12, 3, 4, 3});
  ConvOptions o;
  o.strides = {4, 3};
  b.output("y", b.conv(x, w, nullptr, o));
  Graph g = b.build();
  const Tensor wt = Tensor::random(f32, {12, 3, 4, 3}, 7, -0.5, 0.5);
  const Tensor xt = Tensor::random(f32, {2, 3, 11, 10}, 3, -2, 2);
  GraphBuilder bc;
  ConvOptions oc = o;
  bc.output("y", bc.conv(bc.input("x", f32, {2, 3, 11, 10}), bc.constant(wt), nullptr, oc));
  Tensor from_input = compile(g, testing::eager_opts()).run({{"x", xt}, {"w", wt}}).at("y");
  Tensor from_patches = compile(bc.build(), testing::eager_opts()).run({{"x", xt}}).at("y");
  EXPECT_TRUE(
      testing::close_to_ref(from_patches, ref::run_graph(g, {{"x", xt}, {"w", wt}}).at("y")));
  EXPECT_TRUE(testing::close_to_ref(from_input, ref::run_graph(g, {{"x", xt}, {"w", wt}}).at("y")));
}

// The rule switches it off like any other.
TEST(ConvFusion, RuleOffKeepsTheConvApart) {
  Graph g = conv_bias_gelu(f32, "len");
  const std::string path = ::testing::TempDir() + "conv_rule_off.json";
  std::ofstream(path) << R"({"Switch": {"UBFusion": {"ConvEpilogueFusion": "off"}}})";
  Options o = testing::graph_opts();
  o["rules"] = path;
  CompiledModel m = compile(g, o);
  ASSERT_EQ(m.kernels().size(), 2u);
  EXPECT_EQ(m.kernels()[0].name, "Conv");
  bool off = false;
  for (const FusionDecision& d : m.decisions()) {
    off |= d.reason == FusionReason::DisabledByRule &&
           d.message.find("rule ConvEpilogueFusion is off") != std::string::npos;
  }
  EXPECT_TRUE(off);
}

// --- Errors: each names the node, the op, the shapes, and gives a hint.

Graph conv_graph(Sizes xs, Sizes ws, Attrs a, std::optional<Sizes> bias = std::nullopt) {
  GraphBuilder b;
  std::vector<GraphBuilder::V> in{b.input("x", f32, to_shape(xs)), b.input("w", f32, to_shape(ws))};
  if (bias) in.push_back(b.input("b", f32, to_shape(*bias)));
  b.output("y", b.op(OpKind::Conv, in, a, "conv1"));
  return b.build();
}

TEST(ConvErrors, BadAttributesNameNodeOpShapesAndHint) {
  using A = Attrs;
  using V = std::vector<int64_t>;
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3}, A{{"kernel_shape", V{5}}});
      },
      {"'conv1' (Conv)", "kernel_shape [5]", "kernel dims [3]", "[1,4,10] f32, [6,4,3] f32",
       "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 6, 10}, {4, 2, 3}, A{{"group", int64_t(4)}});
      },
      {"'conv1' (Conv)", "group 4 does not divide the 6 input channels", "[1,6,10] f32", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 6, 10}, {6, 2, 3}, A{{"group", int64_t(4)}});
      },
      {"'conv1' (Conv)", "group 4 does not divide the 6 output channels"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 3, 3}, A{});
      },
      {"'conv1' (Conv)", "takes 3 input channels per group",
       "input's 4 channels in 1 group(s) give 4", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 2}, {6, 4, 3}, A{});
      },
      {"'conv1' (Conv)", "spatial axis 0 of length 2 gives no output", "kernel spans 3", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3}, A{{"auto_pad", "SAME"}});
      },
      {"'conv1' (Conv)", "auto_pad must be"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3}, A{{"pads", V{1}}});
      },
      {"'conv1' (Conv)", "attribute 'pads' [1] has 1 values, expected 2", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3}, A{{"strides", V{0}}});
      },
      {"'conv1' (Conv)", "'strides' [0] has a value below 1"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3}, A{{"auto_pad", "VALID"}, {"pads", V{1, 1}}});
      },
      {"'conv1' (Conv)", "explicit pads [1,1] with auto_pad VALID", "hint:"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3}, A{}, Sizes{4});
      },
      {"'conv1' (Conv)", "bias must have shape [6]"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 4, 10}, {6, 4, 3, 3}, A{});
      },
      {"'conv1' (Conv)", "weight must be [M, C/group, k...] of rank 3"}));
  EXPECT_TRUE(throws_with(
      [] {
        conv_graph({1, 2, 3, 3, 3, 3}, {2, 2, 1, 1, 1, 1}, A{});
      },
      {"'conv1' (Conv)", "[N, C, D, H, W] (3-D), got rank 6",
       "hint: convolutions over more than 3 spatial axes are not supported"}));
}

// A symbolic length too short for the kernel fails when the plan for that length is made.
TEST(ConvErrors, ShortRunTimeLengthIsAnErrorNotACrash) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 2, "len"});
  b.output("y", b.op(OpKind::Conv, {x, b.constant(Tensor::random(f32, {3, 2, 4}, 1))},
                     {{"auto_pad", std::string("VALID")}}, "short"));
  CompiledModel m = compile(b.build(), testing::eager_opts());
  EXPECT_NO_THROW(m.run({{"x", Tensor::zeros(f32, {1, 2, 4})}}));
  EXPECT_TRUE(throws_with(
      [&] {
        m.run({{"x", Tensor::zeros(f32, {1, 2, 2})}});
      },
      {"short", "Conv"}));
}

TEST(GroupNormErrors, GroupsAndParameterShapes) {
  auto gn = [](int64_t groups, Sizes scale) {
    GraphBuilder b;
    auto x = b.input("x", f32, {2, 6, 5});
    b.output("y", b.op(OpKind::GroupNorm, {x, b.input("s", f32, to_shape(scale))},
                       {{"groups", groups}}, "gn1"));
    b.build();
  };
  EXPECT_TRUE(throws_with(
      [&] { gn(4, {6}); },
      {"'gn1' (GroupNorm)", "groups 4 does not divide the 6 channels", "[2,6,5] f32", "hint:"}));
  EXPECT_TRUE(throws_with([&] { gn(3, {3}); }, {"'gn1' (GroupNorm)", "scale must have shape [6]",
                                                "got [3]", "hint: a per-group scale"}));
  EXPECT_TRUE(throws_with(
      [] {
        GraphBuilder b;
        b.group_norm(b.input("x", f32, {2, "c", 5}), nullptr, nullptr, 1);
      },
      {"(GroupNorm)", "needs a fixed channel count", "hint:"}));
}

TEST(PadErrors, PadsModeAndCrops) {
  auto pad = [](std::vector<int64_t> pads, std::string mode, Sizes xs = {2, 3}) {
    GraphBuilder b;
    b.output("y", b.op(OpKind::Pad, {b.input("x", f32, to_shape(xs))},
                       {{"pads", pads}, {"mode", mode}}, "pad1"));
    b.build();
  };
  EXPECT_TRUE(throws_with(
      [&] {
        pad({1, 1}, "constant");
      },
      {"'pad1' (Pad)", "pads [1,1] has 2 values, expected 4", "[2,3] f32", "hint:"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pad({0, 0, 0, 0}, "wrap");
      },
      {"'pad1' (Pad)", "mode must be constant, reflect or edge"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pad({0, -2, 0, -2}, "constant");
      },
      {"'pad1' (Pad)", "crop axis 1 of length 3 below 0"}));
  EXPECT_TRUE(throws_with(
      [&] {
        pad({0, 1, 0, 0}, "reflect", {2, 0});
      },
      {"'pad1' (Pad)", "cannot reflect-pad axis 1, which is empty", "hint:"}));
}

// --- ONNX: the importer's forms, against numpy (tests/models/make_onnx_cases.py).

std::string conv_case_path(const std::string& name) {
  return std::string(UBFUSE_SOURCE_DIR) + "/tests/models/onnx_cases/" + name;
}

TEST(ConvOnnx, PadAxesConvGroupNormalizationOpset18) {
  Graph g = import_onnx(conv_case_path("conv_gn_pad.onnx"));
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[1,6,len+1]");
  Tensor x = read_npy(conv_case_path("conv_gn_pad.x.npy"));
  Tensor want = read_npy(conv_case_path("conv_gn_pad.y.npy"));
  for (auto opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run({{"x", x}}).at("y");
    EXPECT_TRUE(testing::close_to_ref(y, ref::from_tensor(want)));
  }
}

}  // namespace
}  // namespace ubfuse
