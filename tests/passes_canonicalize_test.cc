// The canonicalize pass: each decomposed form PyTorch, its ONNX export, the ONNX function bodies
// and LLaMA/HF code write is recovered as ONE native op (printed graph and op counts), and the
// result matches the double reference of the ORIGINAL graph in f32 and bf16; forms that must not
// match (intermediate used elsewhere, wrong axis, wrong constant) stay decomposed.
#include <cmath>
#include <fstream>
#include <functional>

#include "passes_test_util.h"

namespace ubfuse {
namespace {

using testing::count_op;
using testing::eager_opts;
using testing::graph_opts;
using testing::matches_reference;
using testing::optimized;
using testing::random_inputs;
using testing::same_as_original;
using V = GraphBuilder::V;

V one(GraphBuilder& b, V like) { return b.scalar(1.0, like->dtype); }
V half(GraphBuilder& b, V like) { return b.scalar(0.5, like->dtype); }

// ---- decomposed forms, as exporters write them ----

// torch.onnx symbolic for gelu: (x * (erf(x / sqrt2) + 1)) * 0.5
V gelu_erf_torch(GraphBuilder& b, V x) {
  return b.mul(b.mul(x, b.add(b.erf(b.div(x, 1.4142135623730951)), 1.0)), 0.5);
}
// HF BERT: x * 0.5 * (1.0 + erf(x * 0.70710678))
V gelu_erf_hf(GraphBuilder& b, V x) {
  return b.mul(b.mul(x, 0.5), b.add(one(b, x), b.erf(b.mul(x, 0.7071067811865476))));
}
// The ONNX Gelu function body: (0.5 * x) * (1 + erf(x / Sqrt(2))), Sqrt(2) a constant subgraph.
V gelu_erf_onnx(GraphBuilder& b, V x) {
  V sqrt2 = b.sqrt(b.scalar(2.0, x->dtype));
  return b.mul(b.mul(half(b, x), x), b.add(one(b, x), b.erf(b.div(x, sqrt2))));
}
// torch.onnx symbolic for gelu(approximate="tanh"): 0.5 * (x * (1 + tanh(beta * (x + kappa *
// (x * (x * x)))))).
V gelu_tanh_torch(GraphBuilder& b, V x) {
  V cube = b.mul(x, b.mul(x, x));
  V inner = b.mul(b.scalar(std::sqrt(2 / M_PI), x->dtype),
                  b.add(x, b.mul(b.scalar(0.044715, x->dtype), cube)));
  return b.mul(half(b, x), b.mul(x, b.add(one(b, x), b.tanh(inner))));
}
// HF gelu_new / GPT-2: 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0))))
V gelu_tanh_hf(GraphBuilder& b, V x) {
  V inner = b.mul(b.add(x, b.mul(b.pow(x, 3.0), 0.044715)), std::sqrt(2 / M_PI));
  return b.mul(b.mul(half(b, x), x), b.add(b.tanh(inner), 1.0));
}

// torch.onnx.export (opsets 13-16) of nn.LayerNorm: ReduceMean(keepdims) -> Sub -> Pow(2) ->
// ReduceMean -> Add(eps) -> Sqrt -> Div -> Mul(w) -> Add(b).
V layer_norm_torch(GraphBuilder& b, V x, V w, V bias, double eps) {
  V d = b.sub(x, b.reduce_mean(x));
  V var = b.reduce_mean(b.pow(d, 2));
  V y = b.div(d, b.sqrt(b.add(var, eps)));
  if (w) y = b.mul(y, w);
  if (bias) y = b.add(y, bias);
  return y;
}
// The ONNX LayerNormalization function body (test_layer_normalization_*_expanded, axis -1):
// flatten to 2-D, Cast to the stash type f32, Var = E[x^2] - E[x]^2, Normalized = (x - mean) /
// sqrt(Var + eps), Cast back, Mul by Flatten(W) ([1,C]), Add Flatten(B), Reshape to x's shape.
V layer_norm_onnx_function(GraphBuilder& b, V x, V w, V bias, double eps, Sizes shape) {
  int64_t c = shape.back();
  V xu = b.cast(b.reshape(x, {-1, c}), f32);
  V mean = b.reduce_mean(xu);
  V var = b.sub(b.reduce_mean(b.mul(xu, xu)), b.mul(mean, mean));
  V stddev = b.sqrt(b.add(var, b.cast(b.scalar(eps, f32), f32)));
  V normalized = b.cast(b.div(b.sub(xu, mean), stddev), x->dtype);
  V scaled = b.mul(normalized, b.reshape(w, {1, c}));
  V biased = b.add(scaled, b.reshape(bias, {1, c}));
  return b.reshape(biased, shape);
}

enum class RsqrtForm { Rsqrt, DivOneSqrt, DivBySqrt, PowMinusHalf };
// LLaMA: weight * (x * rsqrt(mean(x^2) + eps)), rsqrt in the forms code and exporters write.
V rms_norm_llama(GraphBuilder& b, V x, V w, double eps, RsqrtForm form) {
  V a = b.add(b.reduce_mean(b.pow(x, 2)), eps);
  V y = nullptr;
  switch (form) {
    case RsqrtForm::Rsqrt:
      y = b.mul(x, b.rsqrt(a));
      break;
    case RsqrtForm::DivOneSqrt:
      y = b.mul(x, b.div(one(b, x), b.sqrt(a)));
      break;
    case RsqrtForm::DivBySqrt:
      y = b.div(x, b.sqrt(a));
      break;
    case RsqrtForm::PowMinusHalf:
      y = b.mul(b.pow(a, -0.5), x);
      break;
  }
  return w ? b.mul(w, y) : y;
}
// HF LlamaRMSNorm under bf16: compute in f32, cast back before the weight.
V rms_norm_llama_cast(GraphBuilder& b, V x, V w, double eps) {
  V h = b.cast(x, f32);
  V var = b.reduce_mean(b.pow(h, 2));
  V n = b.mul(h, b.rsqrt(b.add(var, eps)));
  return b.mul(w, b.cast(n, x->dtype));
}

// The ONNX Softmax function body (opset 13): exp(x - max) / sum(exp(x - max)).
V softmax_expanded(GraphBuilder& b, V x) {
  V e = b.exp(b.sub(x, b.reduce_max(x)));
  return b.div(e, b.reduce_sum(e));
}

// ---- checks ----

// Optimizes g; expects exactly `count` nodes of `op` and none of `gone`; checks the numbers
// against the original's reference; returns the optimized graph.
Graph expect_recovered(const Graph& g, OpKind op, std::vector<OpKind> gone, int count = 1) {
  Graph o = optimized(g);
  EXPECT_EQ(count_op(o, op), count) << print_graph(o);
  for (OpKind k : gone) EXPECT_EQ(count_op(o, k), 0) << op_name(k) << "\n" << print_graph(o);
  EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 11)));
  return o;
}

// Through compile(): the compiled graph holds the recovered op, and eager and graph mode both
// match the reference of the original graph.
void expect_compiled(const Graph& g, OpKind op) {
  auto in = random_inputs(g, 21);
  EXPECT_EQ(count_op(compile(g, graph_opts()).graph(), op), 1);
  EXPECT_TRUE(matches_reference(g, in, graph_opts()));
  EXPECT_TRUE(matches_reference(g, in, eager_opts()));
}

class Canon : public ::testing::TestWithParam<DType> {};

TEST_P(Canon, SiluEitherOperandOrder) {
  for (bool sigmoid_first : {false, true}) {
    GraphBuilder b;
    auto x = b.input("x", GetParam(), {4, 33});
    auto s = b.sigmoid(x);
    b.output("y", sigmoid_first ? b.mul(s, x) : b.mul(x, s));
    Graph g = b.build();
    Graph o = expect_recovered(g, OpKind::Silu, {OpKind::Sigmoid, OpKind::Mul});
    EXPECT_NE(print_graph(o).find("%mul0 = Silu(%x)"), std::string::npos) << print_graph(o);
    expect_compiled(g, OpKind::Silu);
  }
}

TEST_P(Canon, GeluErfForms) {
  for (auto form : {gelu_erf_torch, gelu_erf_hf, gelu_erf_onnx}) {
    GraphBuilder b;
    auto x = b.input("x", GetParam(), {4, 33});
    b.output("y", form(b, x));
    Graph g = b.build();
    Graph o = expect_recovered(g, OpKind::Gelu, {OpKind::Erf, OpKind::Mul, OpKind::Add});
    EXPECT_NE(print_graph(o).find("Gelu(%x) {approximate=\"none\"}"), std::string::npos)
        << print_graph(o);
    expect_compiled(g, OpKind::Gelu);
  }
}

TEST_P(Canon, GeluTanhForms) {
  for (auto form : {gelu_tanh_torch, gelu_tanh_hf}) {
    GraphBuilder b;
    auto x = b.input("x", GetParam(), {4, 33});
    b.output("y", form(b, x));
    Graph g = b.build();
    Graph o = expect_recovered(g, OpKind::Gelu, {OpKind::Tanh, OpKind::Pow, OpKind::Mul});
    EXPECT_NE(print_graph(o).find("Gelu(%x) {approximate=\"tanh\"}"), std::string::npos)
        << print_graph(o);
    expect_compiled(g, OpKind::Gelu);
  }
}

TEST_P(Canon, LayerNormTorchExport) {
  GraphBuilder b;
  DType t = GetParam();
  auto x = b.input("x", t, {2, 3, 64});
  auto w = b.input("w", t, {64});
  auto bias = b.input("b", t, {64});
  b.output("y", layer_norm_torch(b, x, w, bias, 1e-5));
  b.name_last("ln_out");
  Graph g = b.build();
  Graph o = expect_recovered(g, OpKind::LayerNorm,
                             {OpKind::ReduceMean, OpKind::Sub, OpKind::Pow, OpKind::Sqrt});
  EXPECT_EQ(o.num_nodes(), 1) << print_graph(o);
  EXPECT_NE(print_graph(o).find("%ln_out = LayerNorm(%x, %w, %b) {eps="), std::string::npos)
      << print_graph(o);
  EXPECT_EQ(o.outputs()[0].first, "y");
  expect_compiled(g, OpKind::LayerNorm);
}

TEST_P(Canon, LayerNormWithoutAffineAndWithWeightOnly) {
  for (int affine = 0; affine < 2; affine++) {
    GraphBuilder b;
    auto x = b.input("x", GetParam(), {5, 48});
    auto w = b.input("w", GetParam(), {48});
    b.output("y", layer_norm_torch(b, x, affine ? w : nullptr, nullptr, 1e-6));
    Graph g = b.build();
    Graph o = expect_recovered(g, OpKind::LayerNorm, {OpKind::ReduceMean, OpKind::Mul});
    EXPECT_EQ(o.outputs()[0].second->producer->inputs.size(), size_t(1 + affine));
  }
}

TEST_P(Canon, LayerNormOnnxFunctionBody) {
  DType t = GetParam();
  Sizes shape{2, 3, 40};
  GraphBuilder b;
  auto x = b.input("X", t, to_shape(shape));
  auto w = b.input("W", t, {40});
  auto bias = b.input("B", t, {40});
  b.output("Y", layer_norm_onnx_function(b, x, w, bias, 0.1, shape));
  Graph g = b.build();
  Graph o = expect_recovered(g, OpKind::LayerNorm,
                             {OpKind::ReduceMean, OpKind::Cast, OpKind::Sqrt, OpKind::Sub});
  // The flatten to 2-D and its inverse only regroup rows: simplify drops them around the norm.
  EXPECT_EQ(o.num_nodes(), 1) << print_graph(o);
  EXPECT_NE(print_graph(o).find("LayerNorm(%X, %W, %B) {eps=0.1} : " + std::string(dtype_name(t)) +
                                "[2,3,40]"),
            std::string::npos)
      << print_graph(o);
  expect_compiled(g, OpKind::LayerNorm);
}

TEST_P(Canon, RmsNormLlamaForms) {
  for (auto form :
       {RsqrtForm::Rsqrt, RsqrtForm::DivOneSqrt, RsqrtForm::DivBySqrt, RsqrtForm::PowMinusHalf}) {
    GraphBuilder b;
    auto x = b.input("x", GetParam(), {2, 3, 64});
    auto w = b.input("w", GetParam(), {64});
    b.output("y", rms_norm_llama(b, x, w, 1e-6, form));
    Graph g = b.build();
    Graph o = expect_recovered(g, OpKind::RMSNorm,
                               {OpKind::ReduceMean, OpKind::Pow, OpKind::Mul, OpKind::Div});
    EXPECT_NE(print_graph(o).find("RMSNorm(%x, %w) {eps="), std::string::npos) << print_graph(o);
  }
  GraphBuilder b;
  auto x = b.input("x", GetParam(), {3, 96});
  auto w = b.input("w", GetParam(), {96});
  b.output("y", rms_norm_llama(b, x, w, 1e-5, RsqrtForm::DivOneSqrt));
  expect_compiled(b.build(), OpKind::RMSNorm);
}

TEST(Canonicalize, RmsNormLlamaUnderBf16AbsorbsCasts) {
  GraphBuilder b;
  auto x = b.input("x", bf16, {2, 5, 64});
  auto w = b.input("w", bf16, {64});
  b.output("y", rms_norm_llama_cast(b, x, w, 1e-6));
  Graph g = b.build();
  Graph o = expect_recovered(g, OpKind::RMSNorm, {OpKind::Cast, OpKind::ReduceMean});
  EXPECT_EQ(o.num_nodes(), 1) << print_graph(o);
  EXPECT_EQ(o.outputs()[0].second->dtype, bf16);
  expect_compiled(g, OpKind::RMSNorm);
}

TEST_P(Canon, SoftmaxExpanded) {
  GraphBuilder b;
  auto x = b.input("x", GetParam(), {3, 4, 37});
  b.output("y", softmax_expanded(b, x));
  Graph g = b.build();
  expect_recovered(g, OpKind::Softmax, {OpKind::Exp, OpKind::ReduceMax, OpKind::ReduceSum});
  expect_compiled(g, OpKind::Softmax);
  GraphBuilder b2;  // e * reciprocal(sum)
  auto x2 = b2.input("x", GetParam(), {3, 37});
  auto e = b2.exp(b2.sub(x2, b2.reduce_max(x2)));
  b2.output("y", b2.mul(e, b2.reciprocal(b2.reduce_sum(e))));
  expect_recovered(b2.build(), OpKind::Softmax, {OpKind::Exp, OpKind::Reciprocal});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Canon, ::testing::Values(f32, bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A decoder-style block: residual add, decomposed RMSNorm, SiLU-gated product, decomposed
// LayerNorm over the result; every pattern is recovered and both modes match the reference.
TEST(Canonicalize, SeveralPatternsInOneGraph) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 7, 64});
  auto r = b.input("r", f32, {2, 7, 64});
  auto w = b.input("w", f32, {64});
  auto lw = b.input("lw", f32, {64});
  auto lb = b.input("lb", f32, {64});
  auto h = b.add(x, r);
  auto n = rms_norm_llama(b, h, w, 1e-6, RsqrtForm::DivOneSqrt);
  auto gated = b.mul(b.mul(n, b.sigmoid(n)), h);
  b.output("h", h);
  b.output("y", layer_norm_torch(b, gated, lw, lb, 1e-5));
  Graph g = b.build();
  Graph o = optimized(g);
  EXPECT_EQ(count_op(o, OpKind::RMSNorm), 1) << print_graph(o);
  EXPECT_EQ(count_op(o, OpKind::Silu), 1) << print_graph(o);
  EXPECT_EQ(count_op(o, OpKind::LayerNorm), 1) << print_graph(o);
  EXPECT_EQ(o.num_nodes(), 5) << print_graph(o);  // add, rmsnorm, silu, mul, layernorm
  EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 12)));
  auto in = random_inputs(g, 13);
  EXPECT_TRUE(matches_reference(g, in, graph_opts()));
  EXPECT_TRUE(matches_reference(g, in, eager_opts()));
}

TEST(Canonicalize, SymbolicShapes) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", "seq", 32});
  auto w = b.input("w", f32, {32});
  auto bias = b.input("b", f32, {32});
  b.output("y", gelu_erf_torch(b, layer_norm_torch(b, x, w, bias, 1e-5)));
  Graph g = b.build();
  auto cm = compile(g, graph_opts());
  EXPECT_EQ(count_op(cm.graph(), OpKind::LayerNorm), 1) << print_graph(cm.graph());
  EXPECT_EQ(count_op(cm.graph(), OpKind::Gelu), 1) << print_graph(cm.graph());
  for (int64_t batch : {1, 3}) {
    std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {batch, 5, 32}, 1, -3, 3)},
                                     {"w", Tensor::random(f32, {32}, 2)},
                                     {"b", Tensor::random(f32, {32}, 3)}};
    EXPECT_TRUE(matches_reference(g, in, graph_opts()));
  }
}

TEST(Canonicalize, RulesFileSwitchesThePassOff) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 8});
  b.output("y", b.mul(x, b.sigmoid(x)));
  Graph g = b.build();
  std::string path = ::testing::TempDir() + "/ubfuse_canonicalize_off.json";
  {
    std::ofstream f(path);
    f << R"({"Switch": {"GraphFusion": {"canonicalize": "off"}}})";
  }
  Options opts = graph_opts();
  opts["ge.fusionSwitchFile"] = path;
  auto m = compile(g, opts);
  EXPECT_EQ(count_op(m.graph(), OpKind::Silu), 0) << print_graph(m.graph());
  EXPECT_EQ(count_op(m.graph(), OpKind::Sigmoid), 1);
  EXPECT_EQ(count_op(compile(g, graph_opts()).graph(), OpKind::Silu), 1);
  EXPECT_TRUE(matches_reference(g, random_inputs(g, 14), opts));
}

TEST(Canonicalize, IsIdempotent) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  b.output("y", gelu_tanh_torch(b, softmax_expanded(b, x)));
  Graph o = optimized(b.build());
  std::string once = print_graph(o);
  auto pass = make_canonicalize_pass();
  EXPECT_FALSE(pass->run(o));
  EXPECT_EQ(print_graph(o), once);
}

// ---- forms that must NOT be rewritten ----

// Optimizes g, expects no `op` in the result and the original's numbers.
void expect_not_recovered(const Graph& g, OpKind op) {
  Graph o = optimized(g);
  EXPECT_EQ(count_op(o, op), 0) << print_graph(o);
  EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 17)));
}

TEST(CanonicalizeNegative, SiluIntermediateUsedElsewhereOrOtherOperand) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 8});
  auto z = b.input("z", f32, {4, 8});
  auto s = b.sigmoid(x);
  b.output("y", b.mul(x, s));
  b.output("s", s);                                       // the sigmoid is a graph output too
  b.output("other", b.mul(z, b.sigmoid(x)));              // z * sigmoid(x), z != x
  b.output("twice", b.mul(b.mul(x, b.sigmoid(x)), 2.0));  // 2*silu: only the inner product
  Graph g = b.build();
  Graph o = optimized(g);
  EXPECT_EQ(count_op(o, OpKind::Silu), 1) << print_graph(o);
  EXPECT_EQ(o.outputs()[3].second->producer->op, OpKind::Mul);
  EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 18)));
}

TEST(CanonicalizeNegative, GeluWrongConstants) {
  auto build = [](std::function<V(GraphBuilder&, V)> f) {
    GraphBuilder b;
    auto x = b.input("x", f32, {4, 8});
    b.output("y", f(b, x));
    return b.build();
  };
  expect_not_recovered(build([](GraphBuilder& b, V x) {  // erf(x * 0.6)
                         return b.mul(b.mul(x, 0.5), b.add(b.erf(b.mul(x, 0.6)), 1.0));
                       }),
                       OpKind::Gelu);
  expect_not_recovered(build([](GraphBuilder& b, V x) {  // 0.4 instead of 0.5
                         return b.mul(b.mul(x, 0.4), b.add(b.erf(b.div(x, std::sqrt(2.0))), 1.0));
                       }),
                       OpKind::Gelu);
  expect_not_recovered(build([](GraphBuilder& b, V x) {  // 1 - erf
                         return b.mul(b.mul(x, 0.5),
                                      b.sub(one(b, x), b.erf(b.div(x, std::sqrt(2.0)))));
                       }),
                       OpKind::Gelu);
  expect_not_recovered(build([](GraphBuilder& b, V x) {  // cubic coefficient 0.05
                         V inner = b.mul(b.add(x, b.mul(b.pow(x, 3.0), 0.05)), std::sqrt(2 / M_PI));
                         return b.mul(b.mul(x, 0.5), b.add(b.tanh(inner), 1.0));
                       }),
                       OpKind::Gelu);
  expect_not_recovered(build([](GraphBuilder& b, V x) {  // x^2 where x^3 belongs
                         V inner =
                             b.mul(b.add(x, b.mul(b.pow(x, 2.0), 0.044715)), std::sqrt(2 / M_PI));
                         return b.mul(b.mul(x, 0.5), b.add(b.tanh(inner), 1.0));
                       }),
                       OpKind::Gelu);
}

TEST(CanonicalizeNegative, GeluErfAlsoAnOutput) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 8});
  auto e = b.erf(b.div(x, std::sqrt(2.0)));
  b.output("y", b.mul(b.mul(x, 0.5), b.add(e, 1.0)));
  b.output("e", e);
  expect_not_recovered(b.build(), OpKind::Gelu);
}

TEST(CanonicalizeNegative, LayerNormCenteredValueUsedElsewhere) {
  GraphBuilder b;
  auto x = b.input("x", f32, {3, 16});
  auto d = b.sub(x, b.reduce_mean(x));
  b.output("y", b.div(d, b.sqrt(b.add(b.reduce_mean(b.pow(d, 2)), 1e-5))));
  b.output("d", d);
  // Not a LayerNorm any more (the centered value is needed), but still an RMSNorm of d.
  Graph g = b.build();
  expect_not_recovered(g, OpKind::LayerNorm);
  EXPECT_EQ(count_op(optimized(g), OpKind::RMSNorm), 1);
}

TEST(CanonicalizeNegative, LayerNormStatisticsOverAnotherAxis) {
  {  // keepdims=0: the [4] mean broadcasts along rows, not columns
    GraphBuilder b;
    auto x = b.input("x", f32, {4, 4});
    auto d = b.sub(x, b.reduce_mean(x, false));
    b.output("y", b.div(d, b.sqrt(b.add(b.reduce_mean(b.pow(d, 2), false), 1e-5))));
    expect_not_recovered(b.build(), OpKind::LayerNorm);
  }
  {  // statistics over axis 0 through transposes
    GraphBuilder b;
    auto x = b.input("x", f32, {4, 6});
    auto mean0 = [&](V v) { return b.transpose(b.reduce_mean(b.transpose(v, {1, 0})), {1, 0}); };
    auto d = b.sub(x, mean0(x));
    b.output("y", b.div(d, b.sqrt(b.add(mean0(b.pow(d, 2)), 1e-5))));
    Graph g = b.build();
    expect_not_recovered(g, OpKind::LayerNorm);
    expect_not_recovered(g, OpKind::RMSNorm);
  }
  {  // the mean of another tensor
    GraphBuilder b;
    auto x = b.input("x", f32, {4, 6});
    auto z = b.input("z", f32, {4, 6});
    auto d = b.sub(x, b.reduce_mean(z));
    b.output("y", b.div(d, b.sqrt(b.add(b.reduce_mean(b.pow(d, 2)), 1e-5))));
    expect_not_recovered(b.build(), OpKind::LayerNorm);
  }
}

TEST(CanonicalizeNegative, NormWrongConstants) {
  {  // negative "eps"
    GraphBuilder b;
    auto x = b.input("x", f32, {3, 16});
    b.output("y", b.mul(x, b.rsqrt(b.add(b.reduce_mean(b.pow(x, 2)), -1e-3))));
    expect_not_recovered(b.build(), OpKind::RMSNorm);
  }
  {  // x^3 instead of x^2
    GraphBuilder b;
    auto x = b.input("x", f32, {3, 16});
    b.output("y", b.mul(x, b.rsqrt(b.add(b.reduce_mean(b.pow(x, 3)), 1e-3))));
    expect_not_recovered(b.build(), OpKind::RMSNorm);
  }
  {  // numerator 2/sqrt instead of 1/sqrt
    GraphBuilder b;
    auto x = b.input("x", f32, {3, 16});
    auto a = b.add(b.reduce_mean(b.pow(x, 2)), 1e-5);
    b.output("y", b.mul(x, b.div(b.scalar(2.0), b.sqrt(a))));
    expect_not_recovered(b.build(), OpKind::RMSNorm);
  }
}

TEST(CanonicalizeNegative, PerRowScaleIsNotAWeight) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto s = b.input("s", f32, {4, 1});
  b.output("y", rms_norm_llama(b, x, s, 1e-6, RsqrtForm::Rsqrt));
  Graph g = b.build();
  Graph o = optimized(g);
  EXPECT_EQ(count_op(o, OpKind::RMSNorm), 1) << print_graph(o);
  EXPECT_EQ(count_op(o, OpKind::Mul), 1) << print_graph(o);  // the [4,1] scale stays a Mul
  EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 19)));
}

TEST(CanonicalizeNegative, SoftmaxWithoutMaxOrOverAnotherAxis) {
  {  // no max subtraction: overflows where Softmax does not
    GraphBuilder b;
    auto x = b.input("x", f32, {3, 8});
    auto e = b.exp(x);
    b.output("y", b.div(e, b.reduce_sum(e)));
    expect_not_recovered(b.build(), OpKind::Softmax);
  }
  {  // sum without keepdims on a square input: divides along the wrong axis
    GraphBuilder b;
    auto x = b.input("x", f32, {8, 8});
    auto e = b.exp(b.sub(x, b.reduce_max(x)));
    b.output("y", b.div(e, b.reduce_sum(e, false)));
    expect_not_recovered(b.build(), OpKind::Softmax);
  }
  {  // the exponentials are also an output
    GraphBuilder b;
    auto x = b.input("x", f32, {3, 8});
    auto e = b.exp(b.sub(x, b.reduce_max(x)));
    b.output("y", b.div(e, b.reduce_sum(e)));
    b.output("e", e);
    expect_not_recovered(b.build(), OpKind::Softmax);
  }
}

}  // namespace
}  // namespace ubfuse
