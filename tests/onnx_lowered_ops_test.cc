// ONNX ops that import as compositions of ubfuse ops (src/import/onnx): what the backend node
// tests do not reach. ConvTranspose (1-D to 3-D) with groups, dilations, output_padding, SAME_LOWER
// and an output_shape larger than the natural one, against a direct evaluation of ONNX's
// definition; OneHot with its depth given at run time; the losses with a symbolic batch, class
// weights and ignore_index; the broadcast attributes, PRelu's slope and the is_test of
// BatchNormalization and Dropout of opset 6; and the errors the converters give.
#include <algorithm>
#include <cmath>
#include <optional>

#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::OneNode;
using testing::throws_with;

using testing::kFloat;
using testing::kInt64;

// ConvTranspose by its definition, in double: each input element scatters its kernel into the
// output, y[n, m, i * s + j * d - pad_begin] += x[n, c, i] w[c, m % (M / g), j]. Spatial axes are
// 1 to 3 (leading axes of length 1 for fewer).
std::vector<double> conv_transpose_ref(const Tensor& x, const Tensor& w, const Tensor* bias,
                                       int64_t group, std::vector<int64_t> s,
                                       std::vector<int64_t> d, std::vector<int64_t> pb,
                                       const Sizes& out) {
  const size_t sp = size_t(x.rank() - 2);
  int64_t len[3] = {1, 1, 1}, k[3] = {1, 1, 1}, ol[3] = {1, 1, 1}, st[3] = {1, 1, 1},
          dl[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  for (size_t i = 0; i < sp; i++) {
    const size_t a = 3 - sp + i;
    len[a] = x.dim(int(2 + i));
    k[a] = w.dim(int(2 + i));
    ol[a] = out[2 + i];
    st[a] = s[i];
    dl[a] = d[i];
    pad[a] = pb[i];
  }
  const int64_t N = x.dim(0), C = x.dim(1), Mg = w.dim(1), M = Mg * group, Cg = C / group;
  const int64_t osz = ol[0] * ol[1] * ol[2], isz = len[0] * len[1] * len[2],
                ksz = k[0] * k[1] * k[2];
  std::vector<double> y(size_t(N * M * osz), 0.0);
  for (int64_t n = 0; n < N; n++) {
    for (int64_t m = 0; m < M; m++) {
      for (int64_t o = 0; o < osz; o++)
        y[size_t((n * M + m) * osz + o)] = bias ? bias->get(m) : 0.0;
      const int64_t g = m / Mg;
      for (int64_t c = g * Cg; c < (g + 1) * Cg; c++) {
        for (int64_t i = 0; i < isz; i++) {
          const int64_t ii[3] = {i / (len[1] * len[2]), i / len[2] % len[1], i % len[2]};
          const double xv = x.get((n * C + c) * isz + i);
          for (int64_t j = 0; j < ksz; j++) {
            const int64_t jj[3] = {j / (k[1] * k[2]), j / k[2] % k[1], j % k[2]};
            int64_t oo[3];
            bool inside = true;
            for (int a = 0; a < 3; a++) {
              oo[a] = ii[a] * st[a] + jj[a] * dl[a] - pad[a];
              inside = inside && oo[a] >= 0 && oo[a] < ol[a];
            }
            if (!inside) continue;
            y[size_t((n * M + m) * osz + (oo[0] * ol[1] + oo[1]) * ol[2] + oo[2])] +=
                xv * w.get((c * Mg + m % Mg) * ksz + j);
          }
        }
      }
    }
  }
  return y;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, const Sizes& sizes) {
  ASSERT_EQ(got.sizes(), sizes);
  for (int64_t i = 0; i < got.numel(); i++) {
    ASSERT_NEAR(got.get(i), want[size_t(i)], 1e-4 * (1 + std::fabs(want[size_t(i)]))) << i;
  }
}

TEST(OnnxLoweredOps, ConvTransposeGroupedDilatedPaddedAgainstItsDefinition) {
  // 2-D, 2 groups, strides (2, 3), dilations (2, 1), pads (1, 0 | 0, 2), output_padding (1, 0).
  Graph g = OneNode("ConvTranspose", 17)
                .input("x", kFloat, {2, 4, 3, 4})
                .input("w", kFloat, {4, 3, 2, 3})
                .input("b", kFloat, {6})
                .attr("group", 2)
                .attr("strides", std::vector<int64_t>{2, 3})
                .attr("dilations", std::vector<int64_t>{2, 1})
                .attr("pads", std::vector<int64_t>{1, 0, 0, 2})
                .attr("output_padding", std::vector<int64_t>{1, 0})
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::random(f32, {2, 4, 3, 4}, 1), w = Tensor::random(f32, {4, 3, 2, 3}, 2),
         b = Tensor::random(f32, {6}, 3);
  // (3 - 1) 2 + 1 + 2 (2 - 1) + 1 - 1 - 0 = 7 rows, (4 - 1) 3 + 0 + 3 - 0 - 2 = 10 columns
  const Sizes out{2, 6, 7, 10};
  const auto want = conv_transpose_ref(x, w, &b, 2, {2, 3}, {2, 1}, {1, 0}, out);
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    expect_near_all(compile(g, o).run({{"x", x}, {"w", w}, {"b", b}}).at("y"), want, out);
  }
}

// 3-D (a video decoder's upsampling): groups, strides, pads and output_padding per axis.
TEST(OnnxLoweredOps, ConvTranspose3dAgainstItsDefinition) {
  Graph g = OneNode("ConvTranspose", 17)
                .input("x", kFloat, {1, 4, 2, 3, 3})
                .input("w", kFloat, {4, 2, 2, 3, 2})
                .input("b", kFloat, {4})
                .attr("group", 2)
                .attr("strides", std::vector<int64_t>{2, 1, 2})
                .attr("pads", std::vector<int64_t>{0, 1, 1, 1, 0, 0})
                .attr("output_padding", std::vector<int64_t>{1, 0, 1})
                .output("y", kFloat)
                .import();
  Tensor x = Tensor::random(f32, {1, 4, 2, 3, 3}, 6), w = Tensor::random(f32, {4, 2, 2, 3, 2}, 7),
         b = Tensor::random(f32, {4}, 8);
  // (2 - 1) 2 + 2 + 1 - 0 - 1 = 4, (3 - 1) 1 + 3 - 1 - 0 = 4, (3 - 1) 2 + 2 + 1 - 1 - 0 = 6
  const Sizes out{1, 4, 4, 4, 6};
  const auto want = conv_transpose_ref(x, w, &b, 2, {2, 1, 2}, {1, 1, 1}, {0, 1, 1}, out);
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    expect_near_all(compile(g, o).run({{"x", x}, {"w", w}, {"b", b}}).at("y"), want, out);
  }
}

TEST(OnnxLoweredOps, ConvTransposeAutoPadAndOutputShape) {
  Tensor x = Tensor::random(f32, {1, 2, 5}, 4), w = Tensor::random(f32, {2, 3, 3}, 5);
  // SAME_LOWER: 10 outputs; total padding 2 * 4 + 3 - 10 = 1, its larger half first.
  Graph same = OneNode("ConvTranspose", 17)
                   .input("x", kFloat, {1, 2, 5})
                   .input("w", kFloat, {2, 3, 3})
                   .attr("strides", std::vector<int64_t>{2})
                   .attr("auto_pad", std::string("SAME_LOWER"))
                   .output("y", kFloat)
                   .import();
  // output_shape 12, one past the natural 11: padding -1, the extra output at the end.
  Graph shaped = OneNode("ConvTranspose", 17)
                     .input("x", kFloat, {1, 2, 5})
                     .input("w", kFloat, {2, 3, 3})
                     .attr("strides", std::vector<int64_t>{2})
                     .attr("output_shape", std::vector<int64_t>{12})
                     .output("y", kFloat)
                     .import();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    expect_near_all(compile(same, o).run({{"x", x}, {"w", w}}).at("y"),
                    conv_transpose_ref(x, w, nullptr, 1, {2}, {1}, {1}, {1, 3, 10}), {1, 3, 10});
    expect_near_all(compile(shaped, o).run({{"x", x}, {"w", w}}).at("y"),
                    conv_transpose_ref(x, w, nullptr, 1, {2}, {1}, {0}, {1, 3, 12}), {1, 3, 12});
  }
}

// depth a graph input: each value plans its own run of one compiled model.
TEST(OnnxLoweredOps, OneHotDepthAtRunTime) {
  Graph g = OneNode("OneHot", 11)
                .input("indices", kInt64, {3})
                .input("depth", kInt64, {})
                .input("values", kFloat, {2})
                .attr("axis", 0)
                .output("y", kFloat)
                .import();
  Tensor idx = Tensor::from_floats(i64, {3}, {1, -1, 7}), v = Tensor::from_floats(f32, {2}, {0, 5});
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, o);
    // depth 4: -1 is 3, 7 is out of range (a column of off values)
    Tensor y4 =
        m.run({{"indices", idx}, {"depth", Tensor::from_floats(i64, {}, {4})}, {"values", v}})
            .at("y");
    std::vector<double> want4(12, 0.0);
    want4[1 * 3 + 0] = want4[3 * 3 + 1] = 5;
    expect_near_all(y4, want4, {4, 3});
    Tensor y8 =
        m.run({{"indices", idx}, {"depth", Tensor::from_floats(i64, {}, {8})}, {"values", v}})
            .at("y");
    std::vector<double> want8(24, 0.0);
    want8[1 * 3 + 0] = want8[7 * 3 + 1] = want8[7 * 3 + 2] = 5;
    expect_near_all(y8, want8, {8, 3});
  }
}

TEST(OnnxLoweredOps, DetOfOneToThreeByThree) {
  Graph g3 = OneNode("Det", 11).input("x", kFloat, {2, 3, 3}).output("y", kFloat).import();
  Tensor x3 = Tensor::from_floats(f32, {2, 3, 3},
                                  {2, -3, 1, 2, 0, -1, 1, 4, 5,  // 2 * 4 + 3 * 11 + 8 = 49
                                   2, 0, 0, 0, 2, 0, 0, 0, 2});
  Graph g1 = OneNode("Det", 11).input("x", kFloat, {1, 1}).output("y", kFloat).import();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    expect_near_all(compile(g3, o).run({{"x", x3}}).at("y"), {49, 8}, {2});
    expect_near_all(compile(g1, o).run({{"x", Tensor::from_floats(f32, {1, 1}, {-7})}}).at("y"),
                    {-7}, {});
  }
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Det", 11).input("x", kFloat, {4, 4}).output("y", kFloat).import();
      },
      {"node0", "Det", "4x4 matrices (1x1 to 3x3 are supported)"}));
}

// NegativeLogLikelihoodLoss by its definition, in double: x [N, C, D], target [N, D].
struct NllRef {
  std::vector<double> loss;  // per element, before the reduction
  double weight_sum = 0;
};
NllRef nll_ref(const std::vector<double>& x, const Tensor& t, const Tensor* w, int64_t C,
               std::optional<int64_t> ii) {
  const int64_t N = t.dim(0), D = t.numel() / N;
  NllRef r;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t d = 0; d < D; d++) {
      const auto k = int64_t(t.get(n * D + d));
      const double wk = ii && k == *ii ? 0.0 : (w ? w->get(k) : 1.0);
      r.loss.push_back(wk == 0.0 ? 0.0 : -x[size_t((n * C + k) * D + d)] * wk);
      r.weight_sum += wk;
    }
  }
  return r;
}

// A symbolic batch, class weights and an ignored class: the mean divides by the weights taken.
TEST(OnnxLoweredOps, NegativeLogLikelihoodLossWeightedMeanWithIgnoreIndex) {
  Graph g = OneNode("NegativeLogLikelihoodLoss", 13)
                .input("x", kFloat, {-1, 5, 3})
                .input("t", kInt64, {-1, 3})
                .input("w", kFloat, {5})
                .attr("ignore_index", 2)
                .output("loss", kFloat)
                .import();
  Graph none = OneNode("NegativeLogLikelihoodLoss", 13)
                   .input("x", kFloat, {-1, 5, 3})
                   .input("t", kInt64, {-1, 3})
                   .attr("reduction", std::string("none"))
                   .output("loss", kFloat)
                   .import();
  Tensor w = Tensor::random(f32, {5}, 7);
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, o), mn = compile(none, o);
    for (int64_t n : {1, 4}) {
      Tensor x = Tensor::random(f32, {n, 5, 3}, 8 + uint64_t(n));
      Tensor t(i64, {n, 3});
      for (int64_t i = 0; i < t.numel(); i++) t.data_as<int64_t>()[i] = (i * 3 + n) % 5;
      std::vector<double> xd(size_t(x.numel()));
      for (int64_t i = 0; i < x.numel(); i++) xd[size_t(i)] = x.get(i);
      const NllRef r = nll_ref(xd, t, &w, 5, 2);
      double sum = 0;
      for (double v : r.loss) sum += v;
      expect_near_all(m.run({{"x", x}, {"t", t}, {"w", w}}).at("loss"), {sum / r.weight_sum}, {});
      expect_near_all(mn.run({{"x", x}, {"t", t}}).at("loss"),
                      nll_ref(xd, t, nullptr, 5, std::nullopt).loss, {n, 3});
    }
  }
}

// The loss summed, and the log-probabilities as the second output.
TEST(OnnxLoweredOps, SoftmaxCrossEntropyLossSumAndLogProb) {
  Graph g = OneNode("SoftmaxCrossEntropyLoss", 13)
                .input("x", kFloat, {2, 4, 3})
                .input("t", kInt64, {2, 3})
                .attr("reduction", std::string("sum"))
                .attr("ignore_index", -1)
                .output("loss", kFloat)
                .output("log_prob", kFloat)
                .import();
  Tensor x = Tensor::random(f32, {2, 4, 3}, 11);
  Tensor t = Tensor::from_floats(i64, {2, 3}, {0, 3, -1, 2, 1, 3});
  std::vector<double> lp(24);
  for (int64_t n = 0; n < 2; n++) {
    for (int64_t d = 0; d < 3; d++) {
      double mx = -1e30, s = 0;
      for (int64_t c = 0; c < 4; c++) mx = std::max(mx, double(x.get((n * 4 + c) * 3 + d)));
      for (int64_t c = 0; c < 4; c++) s += std::exp(x.get((n * 4 + c) * 3 + d) - mx);
      for (int64_t c = 0; c < 4; c++) {
        lp[size_t((n * 4 + c) * 3 + d)] = x.get((n * 4 + c) * 3 + d) - mx - std::log(s);
      }
    }
  }
  double sum = 0;
  for (double v : nll_ref(lp, t, nullptr, 4, -1).loss) sum += v;
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    auto out = compile(g, o).run({{"x", x}, {"t", t}});
    expect_near_all(out.at("loss"), {sum}, {});
    expect_near_all(out.at("log_prob"), lp, {2, 4, 3});
  }
}

// Opsets before 7 broadcast a binary op's B only with broadcast = 1: aligned at `axis`, or at A's
// last dims without it.
TEST(OnnxLoweredOps, Opset6BroadcastAttributes) {
  Tensor a = Tensor::random(f32, {2, 3, 4}, 11);
  struct LegacyCase {
    const char* op;
    Sizes b;
    std::optional<int64_t> axis;
    int64_t bstride[3];  // B's stride along A's axes (0: broadcast)
  };
  const LegacyCase cases[] = {{"Add", {3}, 1, {0, 1, 0}},
                              {"Sub", {2, 3}, 0, {3, 1, 0}},
                              {"Mul", {3, 4}, std::nullopt, {0, 4, 1}},
                              {"Div", {1, 4}, 1, {0, 0, 1}},
                              {"Greater", {3}, -2, {0, 1, 0}}};
  for (const LegacyCase& c : cases) {
    const bool cmp = std::string(c.op) == "Greater";
    OneNode n(c.op, 6);
    n.input("a", kFloat, {2, 3, 4})
        .input("b", kFloat, std::vector<int64_t>(c.b.begin(), c.b.end()));
    n.attr("broadcast", 1);
    if (c.axis) n.attr("axis", *c.axis);
    Graph g = n.output("y", cmp ? testing::kBool : kFloat).import();
    Tensor b = Tensor::random(f32, c.b, 12, 0.5, 1.5);
    std::vector<double> want;
    for (int64_t i = 0; i < 24; i++) {
      const double x = a.get(i), y = b.get(i / 12 * c.bstride[0] + i / 4 % 3 * c.bstride[1] +
                                           i % 4 * c.bstride[2]);
      const std::string op = c.op;
      want.push_back(op == "Add"   ? x + y
                     : op == "Sub" ? x - y
                     : op == "Mul" ? x * y
                     : op == "Div" ? x / y
                                   : double(x > y));
    }
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      SCOPED_TRACE(c.op);
      expect_near_all(compile(g, o).run({{"a", a}, {"b", b}}).at("y"), want, {2, 3, 4});
    }
  }
  const auto legacy = [](const char* op, int64_t opset, std::vector<int64_t> b,
                         std::optional<int64_t> broadcast, std::optional<int64_t> axis) {
    return [=] {
      OneNode n(op, opset);
      n.input("a", kFloat, {2, 3, 4}).input("b", kFloat, b);
      if (broadcast) n.attr("broadcast", *broadcast);
      if (axis) n.attr("axis", *axis);
      n.output("y", kFloat).import();
    };
  };
  EXPECT_TRUE(throws_with(legacy("Add", 6, {4}, std::nullopt, std::nullopt),
                          {"node0", "Add", "[2,3,4] and [4] differ",
                           "opsets before 7 broadcast only with attribute broadcast = 1"}));
  EXPECT_TRUE(throws_with(legacy("Mul", 6, {3}, std::nullopt, 1),
                          {"node0", "Mul", "has 'axis' but not 'broadcast' = 1"}));
  EXPECT_TRUE(throws_with(legacy("Add", 6, {4}, 1, 1),
                          {"node0", "Add", "B [4] does not match A [2,3,4] from axis 1 (dim 0)"}));
  EXPECT_TRUE(throws_with(legacy("Add", 6, {3, 4}, 1, 2),
                          {"node0", "Add", "B [3,4] does not fit A [2,3,4] from axis 2"}));
  EXPECT_TRUE(throws_with(legacy("Add", 13, {4}, 1, std::nullopt),
                          {"node0", "Add", "attribute 'broadcast' is not supported for Add"}));
}

// PRelu before opset 7 takes one slope or one per channel (axis 1); from 7 numpy's broadcasting
// aligns a vector with the last axis.
TEST(OnnxLoweredOps, Opset6PReluSlopePerChannel) {
  Tensor x = Tensor::random(f32, {2, 3, 4}, 13), per_channel = Tensor::random(f32, {3}, 14),
         per_column = Tensor::random(f32, {4}, 15);
  Graph g6 = OneNode("PRelu", 6)
                 .input("x", kFloat, {2, 3, 4})
                 .input("slope", kFloat, {3})
                 .output("y", kFloat)
                 .import();
  Graph g9 = OneNode("PRelu", 9)
                 .input("x", kFloat, {2, 3, 4})
                 .input("slope", kFloat, {4})
                 .output("y", kFloat)
                 .import();
  std::vector<double> want6, want9;
  for (int64_t i = 0; i < 24; i++) {
    const double v = x.get(i);
    want6.push_back(v < 0 ? v * per_channel.get(i / 4 % 3) : v);
    want9.push_back(v < 0 ? v * per_column.get(i % 4) : v);
  }
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    expect_near_all(compile(g6, o).run({{"x", x}, {"slope", per_channel}}).at("y"), want6,
                    {2, 3, 4});
    expect_near_all(compile(g9, o).run({{"x", x}, {"slope", per_column}}).at("y"), want9,
                    {2, 3, 4});
  }
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("PRelu", 6)
            .input("x", kFloat, {2, 3, 4})
            .input("slope", kFloat, {4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "PRelu", "slope [4] must have one value or one per channel of X [2,3,4]"}));
}

// BatchNormalization of opset 6 normalizes by the given statistics only with is_test = 1; by
// default it is in training mode (the batch's mean and population variance).
TEST(OnnxLoweredOps, Opset6BatchNormIsTest) {
  Tensor x = Tensor::random(f32, {2, 3, 5}, 16), scale = Tensor::random(f32, {3}, 17),
         bias = Tensor::random(f32, {3}, 18), mean = Tensor::random(f32, {3}, 19),
         var = Tensor::random(f32, {3}, 20, 0.5, 2.0);
  const double eps = 1e-5;
  for (int is_test : {1, 0}) {
    OneNode n("BatchNormalization", 6);
    n.input("x", kFloat, {2, 3, 5})
        .input("s", kFloat, {3})
        .input("b", kFloat, {3})
        .input("mean", kFloat, {3})
        .input("var", kFloat, {3});
    if (is_test) n.attr("is_test", 1);
    Graph g = n.output("y", kFloat).import();
    std::vector<double> m(3), v(3), want(30);
    for (int64_t ch = 0; ch < 3; ch++) {
      m[size_t(ch)] = mean.get(ch);
      v[size_t(ch)] = var.get(ch);
      if (is_test) continue;
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < 2; b++) {
        for (int64_t k = 0; k < 5; k++) sum += x.get((b * 3 + ch) * 5 + k);
      }
      m[size_t(ch)] = sum / 10;
      for (int64_t b = 0; b < 2; b++) {
        for (int64_t k = 0; k < 5; k++) {
          const double d = x.get((b * 3 + ch) * 5 + k) - m[size_t(ch)];
          sq += d * d;
        }
      }
      v[size_t(ch)] = sq / 10;
    }
    for (int64_t i = 0; i < 30; i++) {
      const size_t ch = size_t(i / 5 % 3);
      want[size_t(i)] = (x.get(i) - m[ch]) / std::sqrt(v[ch] + eps) * scale.get(int64_t(ch)) +
                        bias.get(int64_t(ch));
    }
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      SCOPED_TRACE(is_test);
      expect_near_all(compile(g, o)
                          .run({{"x", x}, {"s", scale}, {"b", bias}, {"mean", mean}, {"var", var}})
                          .at("y"),
                      want, {2, 3, 5});
    }
  }
}

// Dropout before opset 7 is the identity only with is_test = 1; its default is training mode.
TEST(OnnxLoweredOps, Opset6DropoutIsTest) {
  Tensor x = Tensor::random(f32, {2, 3}, 21);
  Graph g = OneNode("Dropout", 6)
                .input("x", kFloat, {2, 3})
                .attr("is_test", 1)
                .output("y", kFloat)
                .import();
  std::vector<double> want;
  for (int64_t i = 0; i < 6; i++) want.push_back(x.get(i));
  expect_near_all(compile(g, testing::eager_opts()).run({{"x", x}}).at("y"), want, {2, 3});
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Dropout", 6).input("x", kFloat, {2, 3}).output("y", kFloat).import();
      },
      {"node0", "Dropout", "training mode (is_test = 0", "export the model in eval mode"}));
}

// The recurrent cells' import and run-time errors name the node and the value.
TEST(OnnxLoweredOps, RecurrentErrorsNameNodeOpAndValue) {
  const auto lstm = [](auto&& extra) {
    return [extra] {
      OneNode n("LSTM", 14);
      n.input("x", kFloat, {5, 2, 3}).input("w", kFloat, {1, 16, 3}).input("r", kFloat, {1, 16, 4});
      extra(n);
      n.output("y", kFloat).import();
    };
  };
  EXPECT_TRUE(throws_with(
      lstm([](OneNode& n) { n.attr("hidden_size", 4).attr("direction", std::string("up")); }),
      {"node0", "LSTM", "direction must be forward, reverse or bidirectional"}));
  EXPECT_TRUE(throws_with(lstm([](OneNode&) {}), {"node0", "LSTM", "needs attribute hidden_size"}));
  EXPECT_TRUE(throws_with(lstm([](OneNode& n) { n.attr("hidden_size", 5); }),
                          {"node0", "LSTM", "W must be [1,20,3], got [1,16,3]"}));
  EXPECT_TRUE(throws_with(lstm([](OneNode& n) {
                            n.attr("hidden_size", 4)
                                .attr("activations",
                                      std::vector<std::string>{"Sigmoid", "HardSigmoid", "Tanh"});
                          }),
                          {"node0", "LSTM", "activation 'HardSigmoid' (supported: Sigmoid, Tanh"}));
  // A length past the sequence is an error when the model runs, not a read past X.
  Graph g = OneNode("GRU", 14)
                .input("x", kFloat, {5, 2, 3})
                .input("w", kFloat, {1, 12, 3})
                .input("r", kFloat, {1, 12, 4})
                .skip()
                .input("lens", testing::kInt32, {2})
                .attr("hidden_size", 4)
                .output("y", kFloat)
                .import();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, o);
    std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {5, 2, 3}, 1)},
                                     {"w", Tensor::random(f32, {1, 12, 3}, 2)},
                                     {"r", Tensor::random(f32, {1, 12, 4}, 3)},
                                     {"lens", Tensor::from_floats(i32, {2}, {5, 6})}};
    EXPECT_TRUE(throws_with([&] { m.run(in); }, {"GRU", "sequence_lens[1] = 6 is outside [0, 5]"}));
  }
}

TEST(OnnxLoweredOps, ConverterErrorsNameNodeOpAndValue) {
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ConvTranspose", 17)
            .input("x", kFloat, {1, 1, 2, 2, 2, 2})
            .input("w", kFloat, {1, 1, 2, 2, 2, 2})
            .output("y", kFloat)
            .import();
      },
      {"node0", "ConvTranspose", "over 4 spatial axes (1-D, 2-D and 3-D are supported)"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ConvInteger", 10)
            .input("x", testing::kU8, {1, 1, 2, 2, 2})
            .input("w", testing::kU8, {1, 1, 2, 2, 2})
            .output("y", testing::kInt32)
            .import();
      },
      {"node0", "ConvInteger", "over 3 spatial axes (1-D and 2-D are supported)"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Conv", 11)
            .input("x", kFloat, {1, 1, 2, 2, 2, 2})
            .input("w", kFloat, {1, 1, 2, 2, 2, 2})
            .output("y", kFloat)
            .import();
      },
      {"node0", "Conv", "over 4 spatial axes (1-D, 2-D and 3-D are supported)"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ConvTranspose", 17)
            .input("x", kFloat, {1, 4, 5})
            .input("w", kFloat, {3, 2, 3})
            .output("y", kFloat)
            .import();
      },
      {"node0", "ConvTranspose", "W [3,2,3] must be [C, M/group, k...] for X [1,4,5]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("BatchNormalization", 15)
            .input("x", kFloat, {2, 3, 4})
            .input("s", kFloat, {3})
            .input("b", kFloat, {3})
            .input("mean", kFloat, {3})
            .input("var", kFloat, {3})
            .attr("training_mode", 1)
            .output("y", kFloat)
            .output("m", kFloat)
            .output("v", kFloat)
            .output("saved_mean", kFloat)
            .import();
      },
      {"node0", "BatchNormalization", "output 3 (the saved statistics of opsets before 14)"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("BatchNormalization", 15)
            .input("x", kFloat, {2, 3, 4})
            .input("s", kFloat, {4})
            .input("b", kFloat, {3})
            .input("mean", kFloat, {3})
            .input("var", kFloat, {3})
            .output("y", kFloat)
            .import();
      },
      {"node0", "BatchNormalization", "scale must have shape [3] (one per channel), got [4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("DepthToSpace", 13)
            .input("x", kFloat, {1, 8, 2, 2})
            .attr("blocksize", 3)
            .output("y", kFloat)
            .import();
      },
      {"node0", "DepthToSpace", "8 channels do not divide by blocksize^2 = 9"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("SpaceToDepth", 13)
            .input("x", kFloat, {1, 2, 4, 5})
            .attr("blocksize", 2)
            .output("y", kFloat)
            .import();
      },
      {"node0", "SpaceToDepth", "W 5 must divide by blocksize 2"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("OneHot", 11)
            .input("indices", kInt64, {3})
            .input("depth", kInt64, {})
            .input("values", kFloat, {3})
            .output("y", kFloat)
            .import();
      },
      {"node0", "OneHot", "values must be [off_value, on_value], got the shape [3]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("ReverseSequence", 10)
            .input("x", kFloat, {4, 3})
            .input("lens", kInt64, {4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "ReverseSequence",
       "sequence_lens must be int64 [3] (one per batch entry), got [4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("MaxUnpool", 11)
            .input("x", kFloat, {1, 1, 2, 2})
            .input("i", kFloat, {1, 1, 2, 2})
            .attr("kernel_shape", std::vector<int64_t>{2, 2})
            .output("y", kFloat)
            .import();
      },
      {"node0", "MaxUnpool", "indices must be int64 of X's shape [1,1,2,2], got [1,1,2,2] f32"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("LRN", 13)
            .input("x", kFloat, {1, 4, 3})
            .attr("size", 0)
            .output("y", kFloat)
            .import();
      },
      {"node0", "LRN", "size must be >= 1, got 0"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("NegativeLogLikelihoodLoss", 13)
            .input("x", kFloat, {2, 5})
            .input("t", kInt64, {2})
            .attr("reduction", std::string("max"))
            .output("y", kFloat)
            .import();
      },
      {"node0", "NegativeLogLikelihoodLoss", "'reduction' = 'max' (supported: none, sum, mean)"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("SoftmaxCrossEntropyLoss", 13)
            .input("x", kFloat, {2, 5, 3})
            .input("t", kInt64, {2, 4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "SoftmaxCrossEntropyLoss",
       "target must be [N, d...] = [2,3] for input [2,5,3], got [2,4]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("NegativeLogLikelihoodLoss", 13)
            .input("x", kFloat, {2, 5})
            .input("t", kInt64, {2})
            .input("w", kFloat, {4})
            .output("y", kFloat)
            .import();
      },
      {"node0", "NegativeLogLikelihoodLoss", "weight must be [C] = [5], got [4]"}));
}

}  // namespace
}  // namespace ubfuse
