// onnxruntime's attention ops (src/import/onnx/ops_contrib_attention.cc): Attention,
// MultiHeadAttention, RotaryEmbedding and EmbedLayerNormalization against a double reference of
// onnxruntime's CPU kernels (a masked key adds mask_filter_value, a key after a query's position
// under unidirectional is left out), every mask form, past and present, dynamic shapes from one
// compile, one flash kernel in graph mode; pinned to onnxruntime 1.30's outputs; and the errors.
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "attention_reference.h"
#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::attend;
using testing::expect_near;
using testing::floats;
using testing::ints32;
using testing::kFloat;
using testing::kInt32;
using testing::OneNode;
using testing::rope;
using testing::throws_with;

const std::vector<Options> kModes = {testing::eager_opts(), testing::graph_opts()};
const double kInf = std::numeric_limits<double>::infinity();

// rows [R, in] times w [in, cols from c0, c0 + n) of w's `ld` columns, plus bias.
std::vector<double> project(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t in,
                            int64_t ld, int64_t c0, int64_t n) {
  const int64_t R = x.numel() / in;
  std::vector<double> y(size_t(R * n));
  for (int64_t r = 0; r < R; r++) {
    for (int64_t j = 0; j < n; j++) {
      double s = bias.get(c0 + j);
      for (int64_t i = 0; i < in; i++) s += x.get(r * in + i) * w.get(i * ld + c0 + j);
      y[size_t(r * n + j)] = s;
    }
  }
  return y;
}

// K (which 0) or V (1) of an Attention with past, as rows [B, P + S, N * d]: past's rows
// ([2, B, N, P, d]), then x's projection by the weights' K or V columns (w [N * d, 3 N * d]).
std::vector<double> past_then_projected(const Tensor& x, const Tensor& w, const Tensor& bias,
                                        const Tensor& past, int which, int64_t B, int64_t S,
                                        int64_t P, int64_t N, int64_t d) {
  const int64_t in = N * d, T = P + S;
  const auto proj = project(x, w, bias, in, 3 * in, (1 + which) * in, in);
  std::vector<double> rows;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < T; t++) {
      for (int64_t h = 0; h < N; h++) {
        for (int64_t i = 0; i < d; i++) {
          rows.push_back(t < P ? past.get((((which * B + b) * N + h) * P + t) * d + i)
                               : proj[size_t((b * S + t - P) * in + h * d + i)]);
        }
      }
    }
  }
  return rows;
}

// n as a com.microsoft Attention node of input x (dims `x`, the last `in`) and constant weights
// [in, w.size() / in] and bias: the mask, past and attributes follow.
OneNode& attention_node(OneNode& n, const std::vector<int64_t>& x, const std::vector<float>& w,
                        const std::vector<float>& bias) {
  const int64_t in = x.back(), cols = int64_t(bias.size());
  return n.domain("com.microsoft")
      .input("x", kFloat, x)
      .init("w", kFloat, {in, cols}, w)
      .init("bias", kFloat, {cols}, bias);
}

// A mask form of Attention's mask_index and the additive mask it means.
struct MaskForm {
  std::string name;
  Sizes sizes;  // empty: no mask
  std::vector<int> values;
};

TEST(OnnxContribAttention, AttentionEveryMaskFormAgainstTheReference) {
  // 3 heads of 4 (V: of 2 where qkv_hidden_sizes says so), 7 queries, odd sizes.
  const int64_t B = 2, S = 7, in = 12, N = 3;
  const Tensor x = Tensor::random(f32, {B, S, in}, 1);
  const Tensor ab = Tensor::random(f32, {1, N, S, S}, 4, -2, 2);
  std::vector<int> m2, m3;
  for (int i = 0; i < B * S; i++) m2.push_back(i % 5 == 3 ? 0 : 1);
  for (int i = 0; i < B * S * S; i++) m3.push_back(i * 7 % 5 == 0 ? 0 : 2);  // any > 0 keeps
  const MaskForm forms[] = {{"none", {}, {}},
                            {"[B, T]", {B, S}, m2},
                            {"[B] ends", {B}, {4, 7}},
                            {"[2B] ends and starts", {2 * B}, {6, 7, 2, 3}},
                            {"[B, S, T]", {B, S, S}, m3}};
  for (const MaskForm& f : forms) {
    for (int causal = 0; causal < 2; causal++) {
      for (int variant = 0; variant < 3; variant++) {
        // 0: defaults; 1: attention_bias, scale, mask_filter_value; 2: V of 6 (heads of 2).
        const int64_t qk = 12, vs = variant == 2 ? 6 : 12, total = qk * 2 + vs;
        const Tensor w = Tensor::random(f32, {in, total}, 2, -0.5, 0.5);
        const Tensor bias = Tensor::random(f32, {total}, 3, -0.2, 0.2);
        const double filter = variant == 1 ? -7.5 : -10000.0;
        const double scale = variant == 1 ? 0.3 : 0.5;  // 1 / sqrt(4) by default
        OneNode n("Attention", 17);
        attention_node(n, {B, S, in}, floats(w), floats(bias));
        if (f.sizes.empty()) {
          n.skip();
        } else {
          n.input("mask", kInt32, f.sizes);
        }
        if (variant == 1) n.skip().input("ab", kFloat, {1, N, S, S});
        n.attr("num_heads", N).attr("unidirectional", causal);
        if (variant == 1) n.attr_f("scale", 0.3f).attr_f("mask_filter_value", -7.5f);
        if (variant == 2) n.attr("qkv_hidden_sizes", std::vector<int64_t>{qk, qk, vs});
        Graph g = n.output("y", kFloat).import();
        const auto q = project(x, w, bias, in, total, 0, qk);
        const auto k = project(x, w, bias, in, total, qk, qk);
        const auto v = project(x, w, bias, in, total, 2 * qk, vs);
        const auto add = [&](int64_t b, int64_t h, int64_t s, int64_t t) {
          if (causal && t > s) return -kInf;
          double a = variant == 1 ? ab.get((h * S + s) * S + t) : 0.0;
          bool keep = true;
          if (f.sizes.size() == 2) keep = f.values[size_t(b * S + t)] > 0;
          if (f.sizes.size() == 3) keep = f.values[size_t((b * S + s) * S + t)] > 0;
          if (f.sizes.size() == 1) {
            keep = t < f.values[size_t(b)] && (f.sizes[0] == B || t >= f.values[size_t(B + b)]);
          }
          return keep ? a : a + filter;
        };
        const auto want = attend(q, k, v, B, S, S, N, qk / N, vs / N, scale, add);
        // A row whose every key is masked is a softmax of scores plus the filter value, which
        // f32 holds to about 1e-3 (so does onnxruntime): such cases are compared at that.
        bool all_masked = false;
        for (int64_t b = 0; b < B; b++) {
          for (int64_t s = 0; s < S; s++) {
            bool any = false;
            for (int64_t t = 0; t < S; t++) {  // head 0's bias taken back off: 0 where kept
              any |= add(b, 0, s, t) - (variant == 1 ? ab.get(s * S + t) : 0.0) == 0.0;
            }
            all_masked |= !any;
          }
        }
        std::map<std::string, Tensor> feeds{{"x", x}};
        if (!f.sizes.empty()) feeds["mask"] = ints32(f.sizes, f.values);
        if (variant == 1) feeds["ab"] = ab;
        for (const Options& o : kModes) {
          SCOPED_TRACE(f.name + (causal ? ", unidirectional" : "") + ", variant " +
                       std::to_string(variant) + ", " + o.at("ge.exec.enableOperatorFusion"));
          CompiledModel m = compile(g, o);
          expect_near(m.run(feeds).at("y"), {B, S, vs}, want, all_masked ? 2e-3 : 2e-5);
          if (o == testing::graph_opts()) {
            int flash = 0;
            for (auto& kern : m.kernels()) flash += kern.variant == "flash attention";
            EXPECT_EQ(flash, 1);
          }
        }
      }
    }
  }
}

TEST(OnnxContribAttention, AttentionDynamicShapesFromOneCompile) {
  // Batch N and length S symbolic, a [N, S] mask and unidirectional: one compile, three shapes
  // (one query included).
  const int64_t in = 8, N = 2;
  const Tensor w = Tensor::random(f32, {in, 3 * in}, 5, -0.5, 0.5);
  const Tensor bias = Tensor::random(f32, {3 * in}, 6, -0.2, 0.2);
  OneNode n("Attention", 17);
  Graph g = attention_node(n, {-1, -2, in}, floats(w), floats(bias))
                .input("mask", kInt32, {-1, -2})
                .attr("num_heads", N)
                .attr("unidirectional", 1)
                .output("y", kFloat)
                .import();
  for (const Options& o : kModes) {
    CompiledModel m = compile(g, o);
    for (const auto& bs : {std::pair<int64_t, int64_t>{2, 7}, {1, 1}, {3, 19}}) {
      const int64_t B = bs.first, S = bs.second;  // not a structured binding: lambdas read them
      SCOPED_TRACE(std::to_string(B) + " x " + std::to_string(S));
      const Tensor x = Tensor::random(f32, {B, S, in}, uint64_t(B * 100 + S));
      std::vector<int> mask;
      for (int64_t i = 0; i < B * S; i++) mask.push_back(i % S == S - 1 && S > 1 ? 0 : 1);
      const auto q = project(x, w, bias, in, 3 * in, 0, in);
      const auto k = project(x, w, bias, in, 3 * in, in, in);
      const auto v = project(x, w, bias, in, 3 * in, 2 * in, in);
      const auto add = [&](int64_t b, int64_t, int64_t s, int64_t t) {
        if (t > s) return -kInf;
        return mask[size_t(b * S + t)] ? 0.0 : -10000.0;
      };
      expect_near(m.run({{"x", x}, {"mask", ints32({B, S}, mask)}}).at("y"), {B, S, in},
                  attend(q, k, v, B, S, S, N, in / N, in / N, 0.5, add));
    }
  }
}

TEST(OnnxContribAttention, AttentionPastAndPresent) {
  // past [2, B, heads, P, d] before K and V; a [B, P + S] mask; unidirectional counts the past.
  const int64_t B = 2, S = 3, P = 4, T = P + S, in = 8, N = 2, d = 4;
  const Tensor x = Tensor::random(f32, {B, S, in}, 7);
  const Tensor past = Tensor::random(f32, {2, B, N, P, d}, 8);
  const Tensor w = Tensor::random(f32, {in, 3 * in}, 9, -0.5, 0.5);
  const Tensor bias = Tensor::random(f32, {3 * in}, 10, -0.2, 0.2);
  std::vector<int> mask;
  for (int64_t i = 0; i < B * T; i++) mask.push_back(i % 5 == 1 ? 0 : 1);
  OneNode n("Attention", 17);
  Graph g = attention_node(n, {B, S, in}, floats(w), floats(bias))
                .input("mask", kInt32, {B, T})
                .input("past", kFloat, {2, B, N, P, d})
                .attr("num_heads", N)
                .attr("unidirectional", 1)
                .output("y", kFloat)
                .output("present", kFloat)
                .import();
  const auto q = project(x, w, bias, in, 3 * in, 0, in);
  const std::vector<double> kv[2] = {past_then_projected(x, w, bias, past, 0, B, S, P, N, d),
                                     past_then_projected(x, w, bias, past, 1, B, S, P, N, d)};
  const auto add = [&](int64_t b, int64_t, int64_t s, int64_t t) {
    if (t > s + P) return -kInf;
    return mask[size_t(b * T + t)] ? 0.0 : -10000.0;
  };
  const auto want = attend(q, kv[0], kv[1], B, S, T, N, d, d, 0.5, add);
  std::vector<double> present;  // [2, B, N, T, d]
  for (int which = 0; which < 2; which++) {
    for (int64_t b = 0; b < B; b++) {
      for (int64_t h = 0; h < N; h++) {
        for (int64_t t = 0; t < T; t++) {
          for (int64_t i = 0; i < d; i++)
            present.push_back(kv[which][size_t((b * T + t) * in + h * d + i)]);
        }
      }
    }
  }
  for (const Options& o : kModes) {
    auto out = compile(g, o).run({{"x", x}, {"mask", ints32({B, T}, mask)}, {"past", past}});
    expect_near(out.at("y"), {B, S, in}, want);
    expect_near(out.at("present"), {2, B, N, T, d}, present);
  }
}

TEST(OnnxContribAttention, MaskOfItsOwnTotalLength) {
  // GPT-2 as onnxruntime's optimizer saves it: past [2, N, heads, T, d] and a mask [N, U] whose
  // length, the total, the model names with a symbol of its own. It is taken to be T + S, which
  // the executor checks: one compile serves a prompt and a decode step, a wrong length is an
  // error naming the input.
  const int64_t in = 8, N = 2, d = 4;
  const Tensor w = Tensor::random(f32, {in, 3 * in}, 41, -0.5, 0.5);
  const Tensor bias = Tensor::random(f32, {3 * in}, 42, -0.2, 0.2);
  OneNode n("Attention", 17);
  Graph g = attention_node(n, {-1, -2, in}, floats(w), floats(bias))
                .input("mask", kInt32, {-1, -4})
                .input("past", kFloat, {2, -1, N, -3, d})
                .attr("num_heads", N)
                .attr("unidirectional", 1)
                .output("y", kFloat)
                .import();
  for (const Options& o : kModes) {
    CompiledModel m = compile(g, o);
    for (const auto& sizes : {std::array<int64_t, 3>{2, 5, 0}, {2, 1, 5}, {1, 3, 2}}) {
      const int64_t B = sizes[0], S = sizes[1], P = sizes[2], T = P + S;
      SCOPED_TRACE(std::to_string(B) + " x " + std::to_string(S) + " after " + std::to_string(P));
      const Tensor x = Tensor::random(f32, {B, S, in}, uint64_t(43 + S));
      const Tensor past = Tensor::random(f32, {2, B, N, P, d}, uint64_t(44 + P));
      std::vector<int> mask;
      for (int64_t i = 0; i < B * T; i++) mask.push_back(i % T == 0 && T > 1 ? 0 : 1);
      const auto q = project(x, w, bias, in, 3 * in, 0, in);
      const std::vector<double> kv[2] = {past_then_projected(x, w, bias, past, 0, B, S, P, N, d),
                                         past_then_projected(x, w, bias, past, 1, B, S, P, N, d)};
      const auto add = [&](int64_t b, int64_t, int64_t s, int64_t t) {
        if (t > s + P) return -kInf;
        return mask[size_t(b * T + t)] ? 0.0 : -10000.0;
      };
      expect_near(m.run({{"x", x}, {"mask", ints32({B, T}, mask)}, {"past", past}}).at("y"),
                  {B, S, in}, attend(q, kv[0], kv[1], B, S, T, N, d, d, 0.5, add));
    }
    EXPECT_TRUE(throws_with(
        [&] {
          m.run({{"x", Tensor::random(f32, {1, 2, in}, 45)},
                 {"mask", ints32({1, 4}, {1, 1, 1, 1})},
                 {"past", Tensor::random(f32, {2, 1, N, 3, d}, 46)}});
        },
        {"input 'mask' dim 1 is 4", "'S+T' = 5"}));
  }
}

TEST(OnnxContribAttention, AttentionMatchesOnnxruntime) {
  // onnxruntime 1.30's outputs (every 7th value and the sum) for inputs made of sines, with a
  // [2B] mask of ends and starts, and with a [B, S, T] mask under unidirectional (where a key
  // kept by the mask after the query's position is still left out).
  const int64_t B = 2, S = 5, in = 8, N = 2;
  std::vector<float> x, w, bias;
  for (int i = 0; i < B * S * in; i++) x.push_back(float(std::sin(0.37 * i)));
  for (int i = 0; i < in * 24; i++) w.push_back(float(0.5 * std::cos(0.11 * i)));
  for (int i = 0; i < 24; i++) bias.push_back(float(0.1 * std::sin(1.3 * i)));
  std::vector<int> m3;
  for (int i = 0; i < B * S * S; i++) m3.push_back(i * 7 % 5 != 0);
  struct Case {
    Sizes mask_sizes;
    std::vector<int> mask;
    int causal;
    double sum;
    std::vector<double> every7;
  };
  const Case cases[] = {
      {{2 * B},
       {4, 5, 1, 2},
       0,
       -4.1743084019981325,
       {0.05212658643722534, -0.12276433408260345, -0.06096572428941727, 0.053598836064338684,
        0.040111102163791656, -0.07813956588506699, -0.16670577228069305, -0.07899962365627289,
        0.024184947833418846, -0.15491685271263123, -0.08146371692419052, 0.018809640780091286}},
      {{B, S, S},
       m3,
       1,
       -0.019851477351039648,
       {0.1523984670639038, -0.07918259501457214, -0.09009042382240295, 0.09973876923322678,
        0.040111102163791656, -0.02645476534962654, -0.2937358617782593, 0.20144660770893097,
        0.09188546985387802, -0.1081046611070633, 0.029769768938422203, 0.0780959203839302}}};
  for (const Case& k : cases) {
    OneNode n("Attention", 17);
    Graph g = attention_node(n, {B, S, in}, w, bias)
                  .input("m", kInt32, k.mask_sizes)
                  .attr("num_heads", N)
                  .attr("unidirectional", k.causal)
                  .output("y", kFloat)
                  .import();
    for (const Options& o : kModes) {
      Tensor y = compile(g, o)
                     .run({{"x", Tensor::from_floats(f32, {B, S, in}, x)},
                           {"m", ints32(k.mask_sizes, k.mask)}})
                     .at("y");
      double sum = 0;
      for (int64_t i = 0; i < y.numel(); i++) sum += y.get(i);
      EXPECT_NEAR(sum, k.sum, 1e-5);
      for (size_t i = 0; i < k.every7.size(); i++)
        EXPECT_NEAR(y.get(int64_t(i) * 7), k.every7[i], 1e-6) << i;
    }
  }
}

TEST(OnnxContribAttention, MultiHeadAttentionForms) {
  const int64_t B = 2, S = 5, L = 6, N = 2, d = 4, D = N * d;
  const Tensor q = Tensor::random(f32, {B, S, D}, 11), k = Tensor::random(f32, {B, L, D}, 12),
               v = Tensor::random(f32, {B, L, D}, 13), bias = Tensor::random(f32, {3 * D}, 14);
  const Tensor ab = Tensor::random(f32, {1, N, S, L}, 15, -2, 2);
  auto rows = [](const Tensor& t, const Tensor* b, int64_t off) {
    std::vector<double> r(size_t(t.numel()));
    const int64_t w = t.sizes().back();
    for (int64_t i = 0; i < t.numel(); i++)
      r[size_t(i)] = t.get(i) + (b ? b->get(off + i % w) : 0.0);
    return r;
  };
  // 1. Bias and a [B] mask of key lengths; 2. attention_bias and scale, no mask.
  for (int form = 1; form <= 2; form++) {
    OneNode n("MultiHeadAttention", 17);
    n.domain("com.microsoft")
        .input("q", kFloat, {-1, -2, D})
        .input("k", kFloat, {-1, -3, D})
        .input("v", kFloat, {-1, -3, D});
    if (form == 1) {
      n.init("bias", kFloat, {3 * D}, floats(bias)).input("kpm", kInt32, {-1});
    } else {
      n.skip().skip().input("ab", kFloat, {1, N, -2, -3}).attr_f("scale", 0.25f);
    }
    Graph g = n.attr("num_heads", N).output("y", kFloat).import();
    const Tensor* b = form == 1 ? &bias : nullptr;
    const std::vector<int> lens{3, 6};
    const auto add = [&](int64_t bi, int64_t h, int64_t s, int64_t t) {
      if (form == 1) return t < lens[size_t(bi)] ? 0.0 : -10000.0;
      return double(ab.get((h * S + s) * L + t));
    };
    const auto want = attend(rows(q, b, 0), rows(k, b, D), rows(v, b, 2 * D), B, S, L, N, d, d,
                             form == 1 ? 0.5 : 0.25, add);
    std::map<std::string, Tensor> feeds{{"q", q}, {"k", k}, {"v", v}};
    if (form == 1) feeds["kpm"] = ints32({B}, lens);
    if (form == 2) feeds["ab"] = ab;
    for (const Options& o : kModes) {
      SCOPED_TRACE("form " + std::to_string(form));
      expect_near(compile(g, o).run(feeds).at("y"), {B, S, D}, want);
    }
  }
  // 3. Cross-attention with K and V given as heads [B, N, L, d].
  {
    Graph g = OneNode("MultiHeadAttention", 17)
                  .domain("com.microsoft")
                  .input("q", kFloat, {B, S, D})
                  .input("k", kFloat, {B, N, L, d})
                  .input("v", kFloat, {B, N, L, d})
                  .attr("num_heads", N)
                  .output("y", kFloat)
                  .import();
    const Tensor k4 = Tensor::random(f32, {B, N, L, d}, 16),
                 v4 = Tensor::random(f32, {B, N, L, d}, 17);
    auto as_rows = [&](const Tensor& t) {  // [B, N, L, d] -> [B, L, N * d]
      std::vector<double> r(size_t(t.numel()));
      for (int64_t i = 0; i < t.numel(); i++) {
        const int64_t bi = i / (N * L * d), h = i / (L * d) % N, l = i / d % L, j = i % d;
        r[size_t((bi * L + l) * D + h * d + j)] = t.get(i);
      }
      return r;
    };
    const auto want = attend(rows(q, nullptr, 0), as_rows(k4), as_rows(v4), B, S, L, N, d, d, 0.5,
                             [](int64_t, int64_t, int64_t, int64_t) { return 0.0; });
    for (const Options& o : kModes) {
      expect_near(compile(g, o).run({{"q", q}, {"k", k4}, {"v", v4}}).at("y"), {B, S, D}, want);
    }
  }
}

TEST(OnnxContribAttention, MultiHeadAttentionMatchesOnnxruntime) {
  // past_key and past_value, a [B, P + S] key padding mask and unidirectional; onnxruntime
  // 1.30's output (every 7th value and the sum) and present_key's shape.
  const int64_t B = 2, S = 3, P = 4, N = 2, d = 4, D = 8;
  auto seq = [](int64_t n, const std::function<double(int)>& f) {
    std::vector<float> v;
    for (int i = 0; i < n; i++) v.push_back(float(f(i)));
    return v;
  };
  std::vector<int> km;
  for (int i = 0; i < B * (P + S); i++) km.push_back(i % 6 != 5);
  Graph g = OneNode("MultiHeadAttention", 17)
                .domain("com.microsoft")
                .input("q", kFloat, {B, S, D})
                .input("k", kFloat, {B, S, D})
                .input("v", kFloat, {B, S, D})
                .skip()
                .input("m", kInt32, {B, P + S})
                .skip()
                .input("pk", kFloat, {B, N, P, d})
                .input("pv", kFloat, {B, N, P, d})
                .attr("num_heads", N)
                .attr("unidirectional", 1)
                .output("y", kFloat)
                .output("prk", kFloat)
                .output("prv", kFloat)
                .import();
  const std::map<std::string, Tensor> feeds{
      {"q", Tensor::from_floats(f32, {B, S, D},
                                seq(B * S * D, [](int i) { return std::sin(0.23 * i); }))},
      {"k", Tensor::from_floats(f32, {B, S, D},
                                seq(B * S * D, [](int i) { return std::cos(0.19 * i); }))},
      {"v", Tensor::from_floats(f32, {B, S, D},
                                seq(B * S * D, [](int i) { return std::sin(0.41 * i + 1); }))},
      {"m", ints32({B, P + S}, km)},
      {"pk",
       Tensor::from_floats(f32, {B, N, P, d},
                           seq(B * N * P * d, [](int i) { return 0.5 * std::cos(0.29 * i); }))},
      {"pv", Tensor::from_floats(f32, {B, N, P, d}, seq(B * N * P * d, [](int i) {
                                   return 0.5 * std::sin(0.31 * i);
                                 }))}};
  const double every7[] = {0.3481462895870209,    -0.04799092561006546, 0.03870899975299835,
                           -0.012563010677695274, -0.1071932315826416,  0.2941718101501465,
                           -0.0436544232070446};
  for (const Options& o : kModes) {
    auto out = compile(g, o).run(feeds);
    const Tensor& y = out.at("y");
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); i++) sum += y.get(i);
    EXPECT_NEAR(sum, 5.413898115977645, 1e-5);
    for (int64_t i = 0; i < 7; i++) EXPECT_NEAR(y.get(i * 7), every7[i], 1e-6) << i;
    EXPECT_EQ(out.at("prk").sizes(), (Sizes{B, N, P + S, d}));
    EXPECT_EQ(out.at("prk").get(0), feeds.at("pk").get(0));
  }
}

TEST(OnnxContribAttention, EmbedLayerNormalization) {
  const int64_t B = 2, S = 6, V = 11, P = 9, G = 2, H = 8;
  const Tensor we = Tensor::random(f32, {V, H}, 21), pe = Tensor::random(f32, {P, H}, 22),
               se = Tensor::random(f32, {G, H}, 23), gamma = Tensor::random(f32, {H}, 24),
               beta = Tensor::random(f32, {H}, 25);
  const std::vector<int> ids{1, 10, 3, 0, 7, 7, 2, 5, 9, 4, 6, 8},
      seg{0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1}, mask{1, 1, 1, 1, 0, 0, 1, 1, 2, 1, 1, 1},
      pid{8, 3, 0, 1, 2, 5};
  for (int full = 0; full < 2; full++) {
    OneNode n("EmbedLayerNormalization", 17);
    n.domain("com.microsoft").input("ids", kInt32, {-1, -2});
    if (full) {
      n.input("seg", kInt32, {-1, -2});
    } else {
      n.skip();
    }
    n.init("we", kFloat, {V, H}, floats(we)).init("pe", kFloat, {P, H}, floats(pe));
    if (full) {
      n.init("se", kFloat, {G, H}, floats(se));
    } else {
      n.skip();
    }
    n.init("gamma", kFloat, {H}, floats(gamma)).init("beta", kFloat, {H}, floats(beta));
    if (full) {
      n.input("mask", kInt32, {-1, -2}).attr_f("epsilon", 1e-5f);
    } else {
      n.skip().input("pid", kInt32, {1, -2});
    }
    n.output("y", kFloat).output("mi", kInt32);
    if (full) n.output("sum", kFloat);
    Graph g = n.import();
    const double eps = full ? 1e-5 : 1e-12;
    std::vector<double> sum, want;
    for (int64_t r = 0; r < B * S; r++) {
      std::vector<double> row(static_cast<size_t>(H));
      const int64_t pos = full ? r % S : pid[size_t(r % S)];
      for (int64_t j = 0; j < H; j++) {
        row[size_t(j)] = we.get(ids[size_t(r)] * H + j) + pe.get(pos * H + j) +
                         (full ? se.get(seg[size_t(r)] * H + j) : 0.0);
      }
      double mean = 0, var = 0;
      for (double x : row) mean += x / double(H);
      for (double x : row) var += (x - mean) * (x - mean) / double(H);
      for (int64_t j = 0; j < H; j++) {
        sum.push_back(row[size_t(j)]);
        want.push_back((row[size_t(j)] - mean) / std::sqrt(var + eps) * gamma.get(j) + beta.get(j));
      }
    }
    std::map<std::string, Tensor> feeds{{"ids", ints32({B, S}, ids)}};
    if (full) {
      feeds["seg"] = ints32({B, S}, seg);
      feeds["mask"] = ints32({B, S}, mask);
    } else {
      feeds["pid"] = ints32({1, S}, pid);
    }
    for (const Options& o : kModes) {
      SCOPED_TRACE(full ? "segments, mask, sum" : "position_ids");
      auto out = compile(g, o).run(feeds);
      expect_near(out.at("y"), {B, S, H}, want, 1e-5);
      // mask_index counts the entries equal to 1 (the 2 is not one); 0 without a mask.
      expect_near(out.at("mi"), {B}, full ? std::vector<double>{4, 5} : std::vector<double>{0, 0});
      if (full) expect_near(out.at("sum"), {B, S, H}, sum);
    }
  }
}

TEST(OnnxContribAttention, RotaryEmbeddingEveryForm) {
  // [B, S, heads * d] with num_heads or [B, heads, S, d]; halves or pairs; all or 4 of d = 6
  // columns; position ids [B, S] or one offset; batch and length symbolic.
  const int64_t B = 2, S = 5, N = 3, d = 6, P = 16;
  for (int bnsh = 0; bnsh < 2; bnsh++) {
    for (int pairs = 0; pairs < 2; pairs++) {
      for (int64_t rot : {int64_t(6), int64_t(4)}) {
        for (int offset = 0; offset < 2; offset++) {
          const Tensor cos = Tensor::random(f32, {P, rot / 2}, 31),
                       sin = Tensor::random(f32, {P, rot / 2}, 32);
          OneNode n("RotaryEmbedding", 17);
          n.domain("com.microsoft");
          if (bnsh) {
            n.input("x", kFloat, {-1, N, -2, d});
          } else {
            n.input("x", kFloat, {-1, -2, N * d}).attr("num_heads", N);
          }
          if (offset) {
            n.input("pos", testing::kInt64, {1});
          } else {
            n.input("pos", testing::kInt64, {-1, -2});
          }
          n.init("cos", kFloat, {P, rot / 2}, floats(cos))
              .init("sin", kFloat, {P, rot / 2}, floats(sin));
          n.attr("interleaved", pairs);
          if (rot != d) n.attr("rotary_embedding_dim", rot);
          Graph g = n.output("y", kFloat).import();
          const Sizes xs = bnsh ? Sizes{B, N, S, d} : Sizes{B, S, N * d};
          const Tensor x = Tensor::random(f32, xs, 33);
          Tensor pos = Tensor::zeros(DType::i64, offset ? Sizes{1} : Sizes{B, S});
          for (int64_t i = 0; i < pos.numel(); i++) pos.set(i, offset ? 9 : (i * 7 + 3) % P);
          const auto want = rope(
              x, bnsh, B, S, N, d, rot, pairs, cos, sin,
              [&](int64_t b, int64_t s) { return offset ? 9 + s : int64_t(pos.get(b * S + s)); });
          for (const Options& o : kModes) {
            SCOPED_TRACE(std::string(bnsh ? "[B, heads, S, d]" : "[B, S, hidden]") +
                         (pairs ? ", pairs" : ", halves") + ", rotary " + std::to_string(rot) +
                         (offset ? ", offset" : ", ids"));
            CompiledModel m = compile(g, o);
            expect_near(m.run({{"x", x}, {"pos", pos}}).at("y"), xs, want);
            if (o == testing::graph_opts()) {
              bool one = false;  // the rotation is one kernel: both products, RotateHalf, the sum
              for (auto& k : m.kernels()) one |= k.name == "FusedMulRotateHalfMulAdd";
              EXPECT_TRUE(one);
            }
          }
        }
      }
    }
  }
}

TEST(OnnxContribAttention, RotaryEmbeddingMatchesOnnxruntime) {
  // onnxruntime 1.30's outputs (every 5th value) for 4 rotary columns of heads of 6, halves and
  // pairs, inputs made of sines.
  const int64_t B = 2, S = 3, N = 2, d = 6, P = 8, rot = 4;
  std::vector<float> x, cos, sin;
  for (int i = 0; i < B * S * N * d; i++) x.push_back(float(std::sin(0.3 * i)));
  for (int i = 0; i < P * rot / 2; i++) {
    cos.push_back(float(std::cos(0.7 * i)));
    sin.push_back(float(std::sin(0.9 * i + 0.5)));
  }
  Tensor pos = Tensor::zeros(DType::i64, {B, S});
  const int64_t ids[] = {3, 0, 7, 1, 1, 5};
  for (int64_t i = 0; i < B * S; i++) pos.set(i, double(ids[i]));
  const std::vector<double> ort[2] = {
      {0.21110664308071136, 0.9974949955940247, 0.14112000167369843, -1.425415277481079,
       -0.6498985290527344, -1.4068336486816406, -0.29477256536483765, -0.8796957731246948,
       -0.5365729331970215, -0.4249034821987152, 0.8306235671043396, 0.3018980920314789,
       -0.5847313404083252, 0.605539858341217, 0.8366556167602539},
      {0.11048810929059982, 0.9974949955940247, 0.14112000167369843, -1.6065504550933838,
       -0.23027801513671875, -0.46903160214424133, -0.44675105810165405, -0.8796957731246948,
       -0.5365729331970215, -0.4403492212295532, -0.30513590574264526, -0.47326764464378357,
       -0.6054230332374573, 0.605539858341217, 0.8366556167602539}};
  for (int pairs = 0; pairs < 2; pairs++) {
    Graph g = OneNode("RotaryEmbedding", 17)
                  .domain("com.microsoft")
                  .input("x", kFloat, {B, S, N * d})
                  .input("pos", testing::kInt64, {B, S})
                  .init("cos", kFloat, {P, rot / 2}, cos)
                  .init("sin", kFloat, {P, rot / 2}, sin)
                  .attr("interleaved", pairs)
                  .attr("num_heads", N)
                  .attr("rotary_embedding_dim", rot)
                  .output("y", kFloat)
                  .import();
    for (const Options& o : kModes) {
      Tensor y = compile(g, o)
                     .run({{"x", Tensor::from_floats(f32, {B, S, N * d}, x)}, {"pos", pos}})
                     .at("y");
      for (size_t i = 0; i < ort[pairs].size(); i++) {
        EXPECT_NEAR(y.get(int64_t(i) * 5), ort[pairs][i], 1e-6) << pairs << " " << i;
      }
    }
  }
}

TEST(OnnxContribAttention, ErrorsNameNodeOpAndValue) {
  auto attention = [](const std::function<void(OneNode&)>& edit) {
    return [edit] {
      OneNode n("Attention", 17);
      attention_node(n, {2, 5, 8}, std::vector<float>(192, 0.1f), std::vector<float>(24, 0.0f));
      edit(n);
      n.output("y", kFloat).import();
    };
  };
  EXPECT_TRUE(throws_with(attention([](OneNode& n) {
                            n.input("m", kInt32, {2, 1, 5, 5}).attr("num_heads", 2);
                          }),
                          {"node0", "Attention", "a mask of rank 4", "Megatron"}));
  EXPECT_TRUE(throws_with(attention([](OneNode& n) {
                            n.input("m", testing::kInt64, {2, 5}).attr("num_heads", 2);
                          }),
                          {"node0", "the mask (input 3) must be int32, got i64"}));
  EXPECT_TRUE(throws_with(attention([](OneNode& n) {
                            n.input("m", kInt32, {2, 4}).attr("num_heads", 2);
                          }),
                          {"node0", "a mask of shape [2,4] does not match [batch, keys]"}));
  EXPECT_TRUE(throws_with(attention([](OneNode&) {}), {"node0", "num_heads of at least 1"}));
  EXPECT_TRUE(throws_with(attention([](OneNode& n) { n.attr("num_heads", 3); }),
                          {"node0", "hidden size 8 must be a multiple of num_heads 3"}));
  EXPECT_TRUE(
      throws_with(attention([](OneNode& n) { n.attr("num_heads", 2).attr("do_rotary", 1); }),
                  {"node0", "do_rotary"}));
  EXPECT_TRUE(
      throws_with(attention([](OneNode& n) {
                    n.attr("num_heads", 2).attr("qkv_hidden_sizes", std::vector<int64_t>{8, 4, 12});
                  }),
                  {"node0", "qkv_hidden_sizes must be 3 sizes, Q's equal to K's"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("MultiHeadAttention", 17)
            .domain("com.microsoft")
            .input("q", kFloat, {2, 5, 2, 3, 4})
            .attr("num_heads", 2)
            .output("y", kFloat)
            .import();
      },
      {"node0", "MultiHeadAttention", "packed Q, K and V"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("EmbedLayerNormalization", 17)
            .domain("com.microsoft")
            .input("ids", testing::kInt64, {2, 5})
            .output("y", kFloat)
            .import();
      },
      {"node0", "EmbedLayerNormalization", "input 0 must be int32, got i64"}));
  auto rotary = [](int64_t hidden, int64_t rot) {
    return [hidden, rot] {
      OneNode("RotaryEmbedding", 17)
          .domain("com.microsoft")
          .input("x", kFloat, {2, 5, hidden})
          .input("pos", testing::kInt64, {2, 5})
          .init("cos", kFloat, {8, 2}, std::vector<float>(16, 1.0f))
          .init("sin", kFloat, {8, 2}, std::vector<float>(16, 0.0f))
          .attr("num_heads", 2)
          .attr("rotary_embedding_dim", rot)
          .output("y", kFloat)
          .import();
    };
  };
  EXPECT_TRUE(throws_with(rotary(12, 6), {"node0", "RotaryEmbedding",
                                          "rotary_embedding_dim 6 must be twice cos_cache's 2"}));
  EXPECT_TRUE(throws_with(rotary(6, 4), {"node0", "heads of 3 columns", "cannot take 4"}));
}

}  // namespace
}  // namespace ubfuse
