// onnxruntime's contrib ops (src/import/onnx/ops_contrib.cc) against their definitions in double:
// FusedMatMul with its transposes and alpha, the GELU forms, QuickGelu, the skip layer norms with
// their sum output, SimplifiedLayerNormalization; MatMulNBits against onnxruntime's outputs; and
// the errors. tests/models/*_ortopt.onnx
// (onnxruntime's own optimized graphs of the zoo models) run in models_test.cc.
#include <cmath>
#include <functional>

#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::kFloat;
using testing::OneNode;
using testing::throws_with;

const std::vector<Options> kContribModes = {testing::eager_opts(), testing::graph_opts()};

void expect_values(const Tensor& got, const Sizes& sizes,
                   const std::function<double(int64_t)>& want, double tol = 1e-5) {
  ASSERT_EQ(got.sizes(), sizes);
  for (int64_t i = 0; i < got.numel(); i++) {
    const double w = want(i);
    ASSERT_NEAR(got.get(i), w, tol * (1 + std::fabs(w))) << i;
  }
}

TEST(OnnxContrib, FusedMatMulTransposesAndAlpha) {
  // op(A) = A^T of [2, 5, 3] -> [2, 3, 5]; op(B) = B^T of [4, 5] -> [5, 4]; alpha 0.5.
  Graph g = OneNode("FusedMatMul", 17)
                .domain("com.microsoft")
                .input("a", kFloat, {2, 5, 3})
                .input("b", kFloat, {4, 5})
                .attr("transA", 1)
                .attr("transB", 1)
                .attr_f("alpha", 0.5f)
                .output("y", kFloat)
                .import();
  const Tensor a = Tensor::random(f32, {2, 5, 3}, 1), b = Tensor::random(f32, {4, 5}, 2);
  auto want = [&](int64_t i) {
    const int64_t n = i / 12, r = i / 4 % 3, col = i % 4;
    double s = 0;
    for (int64_t k = 0; k < 5; k++) s += a.get((n * 5 + k) * 3 + r) * b.get(col * 5 + k);
    return 0.5 * s;
  };
  for (const Options& o : kContribModes) {
    expect_values(compile(g, o).run({{"a", a}, {"b", b}}).at("y"), {2, 3, 4}, want);
  }
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(OnnxContrib, GeluFormsAndQuickGelu) {
  const Tensor x = Tensor::random(f32, {3, 37}, 3, -5, 5), bias = Tensor::random(f32, {37}, 4);
  struct Case {
    std::string op;
    bool bias;
    std::function<double(double)> f;
  };
  const Case cases[] = {
      {"Gelu", false, gelu_erf},
      {"BiasGelu", true, gelu_erf},
      {"FastGelu", true, gelu_tanh},
      {"FastGelu", false, gelu_tanh},
      {"QuickGelu", false, [](double v) { return v / (1 + std::exp(-1.702 * v)); }}};
  for (const Case& k : cases) {
    OneNode n(k.op, 17);
    n.domain("com.microsoft").input("x", kFloat, {3, 37});
    if (k.bias) n.input("bias", kFloat, {37});
    Graph g = n.output("y", kFloat).import();
    for (const Options& o : kContribModes) {
      SCOPED_TRACE(k.op + (k.bias ? " with bias" : ""));
      CompiledModel m = compile(g, o);
      std::map<std::string, Tensor> in{{"x", x}};
      if (k.bias) in["bias"] = bias;
      expect_values(m.run(in).at("y"), {3, 37},
                    [&](int64_t i) { return k.f(x.get(i) + (k.bias ? bias.get(i % 37) : 0.0)); });
      if (o == kContribModes[1]) {
        EXPECT_EQ(m.kernels().size(), 1u) << k.op;  // graph mode
      }
    }
  }
  // alpha 1 (SiLU, as onnxruntime fuses x * sigmoid(x)) becomes the SiLU kernel.
  Graph silu = OneNode("QuickGelu", 17)
                   .domain("com.microsoft")
                   .input("x", kFloat, {3, 37})
                   .attr_f("alpha", 1.0f)
                   .output("y", kFloat)
                   .import();
  for (const Options& o : kContribModes) {
    expect_values(compile(silu, o).run({{"x", x}}).at("y"), {3, 37},
                  [&](int64_t i) { return x.get(i) / (1 + std::exp(-x.get(i))); });
  }
}

// (input + skip + bias) normalized over the last axis, LayerNorm with beta or RMSNorm, and the
// sum as output 3.
TEST(OnnxContrib, SkipLayerNormsWithTheirSumAndSimplifiedLayerNorm) {
  const int64_t H = 24;
  const Tensor x = Tensor::random(f32, {2, 3, H}, 5), skip = Tensor::random(f32, {2, 3, H}, 6),
               gamma = Tensor::random(f32, {H}, 7), beta = Tensor::random(f32, {H}, 8),
               bias = Tensor::random(f32, {H}, 9);
  const double eps = 1e-5;
  for (bool simplified : {false, true}) {
    OneNode n(simplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization", 17);
    n.domain("com.microsoft")
        .input("x", kFloat, {2, 3, H})
        .input("skip", kFloat, {2, 3, H})
        .input("gamma", kFloat, {H});
    if (!simplified) n.input("beta", kFloat, {H});
    n.input("bias", kFloat, {H}).attr_f("epsilon", float(eps)).output("y", kFloat);
    Graph g = n.skip_output().skip_output().output("sum", kFloat).import();
    auto sum = [&](int64_t i) { return x.get(i) + skip.get(i) + bias.get(i % H); };
    auto want = [&](int64_t i) {
      const int64_t row = i / H;
      double mean = 0, sq = 0;
      for (int64_t k = 0; k < H; k++) mean += sum(row * H + k) / double(H);
      for (int64_t k = 0; k < H; k++) {
        const double d = sum(row * H + k) - (simplified ? 0.0 : mean);
        sq += d * d / double(H);
      }
      const double d = sum(i) - (simplified ? 0.0 : mean);
      return d / std::sqrt(sq + eps) * gamma.get(i % H) + (simplified ? 0.0 : beta.get(i % H));
    };
    for (const Options& o : kContribModes) {
      SCOPED_TRACE(simplified ? "simplified" : "layer norm");
      CompiledModel m = compile(g, o);
      std::map<std::string, Tensor> in{{"x", x}, {"skip", skip}, {"gamma", gamma}, {"bias", bias}};
      if (!simplified) in["beta"] = beta;
      auto out = m.run(in);
      expect_values(out.at("y"), {2, 3, H}, want);
      expect_values(out.at("sum"), {2, 3, H}, sum);
      if (o.at("ge.exec.enableOperatorFusion") == "1") {
        EXPECT_EQ(m.kernels().size(), 1u);  // the adds and the norm
      }
    }
  }
  Graph rms = OneNode("SimplifiedLayerNormalization", 17)
                  .input("x", kFloat, {2, 3, H})
                  .input("scale", kFloat, {H})
                  .attr_f("epsilon", float(eps))
                  .attr("stash_type", 1)
                  .output("y", kFloat)
                  .import();
  for (const Options& o : kContribModes) {
    expect_values(compile(rms, o).run({{"x", x}, {"scale", gamma}}).at("y"), {2, 3, H},
                  [&](int64_t i) {
                    double sq = 0;
                    for (int64_t k = 0; k < H; k++) sq += std::pow(x.get(i / H * H + k), 2) / H;
                    return x.get(i) / std::sqrt(sq + eps) * gamma.get(i % H);
                  });
  }
}

// MatMulNBits against onnxruntime 1.30's outputs for the same model (made with onnx.helper, run
// by scripts/ort.sh at level disabled): 4 and 8 bits, packed zero points or the default, a bias,
// K = 40 in blocks of 16 (the last one partial). The codes, scales and zero points are formulas
// both sides compute.
TEST(OnnxContrib, MatMulNBitsMatchesOnnxruntime) {
  const int64_t K = 40, N = 3, bs = 16, blocks = 3;
  struct Case {
    int64_t bits;
    bool zps, bias;
    std::vector<double> ort;
  };
  const Case cases[] = {{4,
                         true,
                         false,
                         {0.1857563853263855, 0.109392449259758, 0.2740742266178131,
                          -0.4758744239807129, -0.07421669363975525, -0.10027884691953659}},
                        {4,
                         false,
                         true,
                         {-0.5364130139350891, 0.19183595478534698, 0.12590554356575012,
                          -0.9104396104812622, 0.20929187536239624, 0.09946334362030029}},
                        {8,
                         true,
                         true,
                         {4.635436058044434, 10.351434707641602, 10.654184341430664,
                          -1.3672535419464111, -3.2837882041931152, 2.3028905391693115}},
                        {8,
                         false,
                         false,
                         {-0.4373273253440857, 0.5870203971862793, -3.252829074859619,
                          -0.9551718235015869, -3.1429290771484375, 2.1562142372131348}}};
  std::vector<float> a;
  for (int64_t i = 0; i < 2 * K; i++) a.push_back(float(std::sin(0.37 * double(i))));
  for (const Case& k : cases) {
    const int64_t blob = bs * k.bits / 8, zrow = (blocks * k.bits + 7) / 8;
    std::vector<float> b, sc, z, bias;
    for (int64_t i = 0; i < N * blocks * blob; i++) b.push_back(float((i * 37 + 11) % 256));
    for (int64_t n = 0; n < N; n++) {
      for (int64_t j = 0; j < blocks; j++)
        sc.push_back(float(0.01 * double(n + 1) + 0.001 * double(j)));
      for (int64_t j = 0; j < zrow; j++) z.push_back(float((n * 7 + j * 3 + 1) % 256));
      bias.push_back(float(0.5 * double(n - 1)));
    }
    OneNode node("MatMulNBits", 17);
    node.domain("com.microsoft")
        .input("a", kFloat, {1, 2, K})
        .init("b", testing::kU8, {N, blocks, blob}, b)
        .init("s", kFloat, {N * blocks}, sc);
    if (k.zps) {
      node.init("z", testing::kU8, {N * zrow}, z);
    } else {
      node.skip();
    }
    if (k.bias) node.skip().init("bias", kFloat, {N}, bias);
    Graph g = node.attr("K", K)
                  .attr("N", N)
                  .attr("bits", k.bits)
                  .attr("block_size", bs)
                  .output("y", kFloat)
                  .import();
    for (const Options& o : kContribModes) {
      SCOPED_TRACE(std::to_string(k.bits) + " bits" + (k.zps ? ", zero points" : "") +
                   (k.bias ? ", bias" : ""));
      Tensor y = compile(g, o).run({{"a", Tensor::from_floats(f32, {1, 2, K}, a)}}).at("y");
      expect_values(y, {1, 2, N}, [&](int64_t i) { return k.ort[size_t(i)]; });
    }
  }
}

TEST(OnnxContrib, ErrorsNameNodeOpAndValue) {
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("PagedAttention", 17)
            .domain("com.microsoft")
            .input("x", kFloat, {1, 4, 8})
            .output("y", kFloat)
            .import();
      },
      {"node0", "contrib op 'com.microsoft.PagedAttention' is not supported",
       "supported com.microsoft ops: Attention, BiasGelu, EmbedLayerNormalization, FastGelu, "
       "FusedMatMul, Gelu, GroupQueryAttention, MatMulNBits, MultiHeadAttention"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("Foo", 17)
            .domain("org.example")
            .input("x", kFloat, {2})
            .output("y", kFloat)
            .import();
      },
      {"node0", "domain 'org.example' is not supported", "com.microsoft"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("FusedMatMul", 17)
            .domain("com.microsoft")
            .input("a", kFloat, {2, 3, 4})
            .input("b", kFloat, {2, 4, 5})
            .attr("transBatchA", 1)
            .output("y", kFloat)
            .import();
      },
      {"node0", "FusedMatMul", "transBatchA or transBatchB"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("SkipLayerNormalization", 17)
            .domain("com.microsoft")
            .input("x", kFloat, {2, 8})
            .input("skip", kFloat, {2, 8})
            .input("gamma", kFloat, {8})
            .output("y", kFloat)
            .output("mean", kFloat)
            .import();
      },
      {"node0", "SkipLayerNormalization", "output 1 (a normalization statistic) is used"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("SkipSimplifiedLayerNormalization", 17)
            .domain("com.microsoft")
            .input("x", kFloat, {2, 8})
            .input("skip", kFloat, {2, 8})
            .input("gamma", kFloat, {6})
            .output("y", kFloat)
            .import();
      },
      {"node0", "gamma must be [8] (the hidden size), got [6]"}));
  const auto nbits = [](int64_t bits, bool runtime_b) {
    return [bits, runtime_b] {
      OneNode n("MatMulNBits", 17);
      n.domain("com.microsoft").input("a", kFloat, {2, 32});
      if (runtime_b) {
        n.input("b", testing::kU8, {4, 2, 8});
      } else {
        n.init("b", testing::kU8, {4, 2, 8}, std::vector<float>(64, 1));
      }
      n.init("s", kFloat, {8}, std::vector<float>(8, 0.5f))
          .attr("K", 32)
          .attr("N", 4)
          .attr("bits", bits)
          .attr("block_size", 16)
          .output("y", kFloat)
          .import();
    };
  };
  EXPECT_TRUE(
      throws_with(nbits(3, false), {"node0", "MatMulNBits", "bits 3 (4 and 8 are supported)"}));
  EXPECT_TRUE(throws_with(nbits(4, true),
                          {"node0", "B given at run time (MatMulNBits' weight must be an initializer"}));
  EXPECT_TRUE(throws_with(
      nbits(8, false), {"node0", "B must be uint8 [N, blocks, blob] = [4,2,16], got u8[4,2,8]"}));
}

}  // namespace
}  // namespace ubfuse
