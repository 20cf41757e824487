// com.microsoft GroupQueryAttention (src/import/onnx/ops_contrib_gqa.cc) against a double
// reference of onnxruntime 1.30's CPU kernel: the first prompt (right-padded sequences), decode
// steps and later prompts after a past, packed Q, K and V, rotary (halves, pairs, partial,
// position_ids), local windows, softcap, attention_bias, multi-query and multi-head forms; one
// flash kernel in graph mode; a prompt and its decode step from one compile; pins of onnxruntime
// 1.30's outputs; the run-time checks of the lengths and the import errors.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "attention_reference.h"
#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse::gqa_test {
namespace {

using testing::attend;
using testing::expect_near;
using testing::ints32;
using testing::kFloat;
using testing::kInt32;
using testing::OneNode;
using testing::rope;
using testing::throws_with;

const std::vector<Options> kModes = {testing::eager_opts(), testing::graph_opts()};
const double kInf = std::numeric_limits<double>::infinity();

// One GroupQueryAttention configuration; dims < 0 are symbols (onnx_one_node.h) where sym is set.
struct Gqa {
  std::string name;
  int64_t N = 4, Nkv = 2, d = 8, B = 2, S = 1, P = 4;
  bool packed = false;
  int64_t rot = 0;  // rotary columns (0: no do_rotary)
  bool pairs = false, pos_ids = false, bias = false;
  int64_t window = -1;
  double softcap = 0, scale = 0;
  std::vector<int> seqlens;  // empty: P + S - 1 for every sequence
  bool sym = false;          // batch, sequence and past as the symbols N, S, T
  static constexpr int64_t kPositions = 16;

  int64_t T() const { return P + S; }
  int64_t hidden() const { return packed ? (N + 2 * Nkv) * d : N * d; }

  Graph graph() const {
    const int64_t b = sym ? -1 : B, s = sym ? -2 : S, p = sym ? -3 : P;
    OneNode n("GroupQueryAttention", 17);
    n.domain("com.microsoft").input("q", kFloat, {b, s, hidden()});
    if (packed) {
      n.skip().skip();
    } else {
      n.input("k", kFloat, {b, s, Nkv * d}).input("v", kFloat, {b, s, Nkv * d});
    }
    if (P > 0 || sym) {
      n.input("pk", kFloat, {b, Nkv, p, d}).input("pv", kFloat, {b, Nkv, p, d});
    } else {
      n.skip().skip();
    }
    n.input("seqlens", kInt32, {b}).input("total", kInt32, {});
    if (rot > 0) {
      n.input("cos", kFloat, {kPositions, rot / 2}).input("sin", kFloat, {kPositions, rot / 2});
    } else if (pos_ids || bias) {
      n.skip().skip();
    }
    if (pos_ids) {
      n.input("pos", testing::kInt64, {b, s});
    } else if (bias) {
      n.skip();
    }
    if (bias) n.input("ab", kFloat, {b, N, s, sym ? -4 : T()});
    n.attr("num_heads", N).attr("kv_num_heads", Nkv);
    if (rot > 0) n.attr("do_rotary", 1).attr("rotary_interleaved", int64_t(pairs));
    if (window > 0) n.attr("local_window_size", window);
    if (softcap > 0) n.attr_f("softcap", float(softcap));
    if (scale > 0) n.attr_f("scale", float(scale));
    return n.output("y", kFloat).output("pk_out", kFloat).output("pv_out", kFloat).import();
  }

  std::map<std::string, Tensor> feeds(uint64_t seed) const {
    std::map<std::string, Tensor> f{{"q", Tensor::random(f32, {B, S, hidden()}, seed)}};
    if (!packed) {
      f["k"] = Tensor::random(f32, {B, S, Nkv * d}, seed + 1);
      f["v"] = Tensor::random(f32, {B, S, Nkv * d}, seed + 2);
    }
    if (P > 0 || sym) {
      f["pk"] = Tensor::random(f32, {B, Nkv, P, d}, seed + 3);
      f["pv"] = Tensor::random(f32, {B, Nkv, P, d}, seed + 4);
    }
    f["seqlens"] =
        ints32({B}, seqlens.empty() ? std::vector<int>(size_t(B), int(T() - 1)) : seqlens);
    f["total"] = ints32({}, {int(T())});
    if (rot > 0) {
      f["cos"] = Tensor::random(f32, {kPositions, rot / 2}, seed + 5);
      f["sin"] = Tensor::random(f32, {kPositions, rot / 2}, seed + 6);
    }
    if (pos_ids) {
      Tensor pos = Tensor::zeros(DType::i64, {B, S});
      for (int64_t i = 0; i < B * S; i++) pos.set(i, double((i * 5 + 3) % kPositions));
      f["pos"] = pos;
    }
    if (bias) f["ab"] = Tensor::random(f32, {B, N, S, T()}, seed + 7, -2, 2);
    return f;
  }

  // y [B, S, N d], present K and V [B, Nkv, T, d], in double.
  struct Want {
    std::vector<double> y, k, v;
  };
  Want reference(const std::map<std::string, Tensor>& f) const {
    const int64_t hq = N * d, hk = Nkv * d, T = this->T(), g = N / Nkv;
    // Q, K and V rows [B, S, heads * d] (out of the packed query where packed).
    auto rows = [&](const std::string& name, int64_t from, int64_t width) {
      Tensor r = Tensor::zeros(f32, {B, S, width});
      for (int64_t i = 0; i < B * S; i++) {
        for (int64_t j = 0; j < width; j++) {
          r.set(i * width + j,
                packed ? f.at("q").get(i * hidden() + from + j) : f.at(name).get(i * width + j));
        }
      }
      return r;
    };
    const Tensor q = rows("q", 0, hq), k = rows("k", hq, hk), v = rows("v", hq + hk, hk);
    const auto pos = [&](int64_t b, int64_t s) {
      return pos_ids ? int64_t(f.at("pos").get(b * S + s)) : P + s;
    };
    auto plain = [](const Tensor& x) {
      return std::vector<double>(x.data_as<float>(), x.data_as<float>() + x.numel());
    };
    auto rotated = [&](const Tensor& x, int64_t heads) {
      if (rot == 0) return plain(x);
      return rope(x, false, B, S, heads, d, rot, pairs, f.at("cos"), f.at("sin"), pos);
    };
    const std::vector<double> qr = rotated(q, N), kr = rotated(k, Nkv), vr = plain(v);
    Want w;
    w.y.resize(size_t(B * S * hq));
    // present [B, Nkv, T, d]: the past's rows, then the new ones.
    auto present = [&](const std::vector<double>& fresh, const char* past) {
      std::vector<double> out;
      for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < Nkv; h++) {
          for (int64_t t = 0; t < T; t++) {
            for (int64_t i = 0; i < d; i++) {
              out.push_back(t < P ? f.at(past).get(((b * Nkv + h) * P + t) * d + i)
                                  : fresh[size_t((b * S + t - P) * hk + h * d + i)]);
            }
          }
        }
      }
      return out;
    };
    w.k = present(kr, "pk");
    w.v = present(vr, "pv");
    // K and V as rows [B, T, N * d], each kv head repeated for its g query heads.
    auto shared = [&](const std::vector<double>& pres) {
      std::vector<double> out;
      for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++) {
          for (int64_t h = 0; h < N; h++) {
            for (int64_t i = 0; i < d; i++)
              out.push_back(pres[size_t(((b * Nkv + h / g) * T + t) * d + i)]);
          }
        }
      }
      return out;
    };
    const auto add = [&](int64_t b, int64_t h, int64_t s, int64_t t) {
      const int64_t len = seqlens.empty() ? T - 1 : seqlens[size_t(b)];
      if (t > P + s || t > len || (window > 0 && t <= P + s - window)) return -kInf;
      return bias ? double(f.at("ab").get(((b * N + h) * S + s) * T + t)) : 0.0;
    };
    w.y = attend(qr, shared(w.k), shared(w.v), B, S, T, N, d, d,
                 scale > 0 ? scale : 1.0 / std::sqrt(double(d)), add, softcap);
    return w;
  }
};

// Runs m on f against c's reference; the outputs.
std::map<std::string, Tensor> check(const Gqa& c, CompiledModel& m,
                                    const std::map<std::string, Tensor>& f) {
  const auto want = c.reference(f);
  auto out = m.run(f);
  expect_near(out.at("y"), {c.B, c.S, c.N * c.d}, want.y);
  expect_near(out.at("pk_out"), {c.B, c.Nkv, c.T(), c.d}, want.k);
  expect_near(out.at("pv_out"), {c.B, c.Nkv, c.T(), c.d}, want.v);
  return out;
}

TEST(OnnxGqa, EveryFormAgainstTheReference) {
  std::vector<Gqa> cases;
  auto add = [&](const std::string& name, const std::function<void(Gqa&)>& edit) {
    Gqa c;
    c.name = name;
    edit(c);
    cases.push_back(c);
  };
  add("decode", [](Gqa&) {});
  add("first prompt, right-padded", [](Gqa& c) { c.S = 5, c.P = 0, c.seqlens = {4, 2}; });
  add("later prompt", [](Gqa& c) { c.B = 1, c.S = 3; });
  add("packed", [](Gqa& c) { c.B = 1, c.S = 3, c.P = 2, c.packed = true; });
  add("rotary halves", [](Gqa& c) { c.S = 3, c.P = 2, c.B = 1, c.rot = 8; });
  add("rotary pairs, 4 of 8 columns", [](Gqa& c) { c.rot = 4, c.pairs = true, c.P = 5; });
  add("rotary at position_ids, packed",
      [](Gqa& c) { c.B = 1, c.S = 3, c.P = 2, c.rot = 8, c.pos_ids = true, c.packed = true; });
  add("window, first prompt", [](Gqa& c) { c.S = 6, c.P = 0, c.window = 2; });
  add("window, decode", [](Gqa& c) { c.P = 6, c.window = 3; });
  add("softcap, attention_bias",
      [](Gqa& c) { c.B = 1, c.S = 4, c.P = 3, c.softcap = 1.5, c.bias = true; });
  add("scale, odd sizes",
      [](Gqa& c) { c.N = 6, c.Nkv = 3, c.d = 5, c.S = 3, c.P = 3, c.scale = 0.3; });
  add("multi-query", [](Gqa& c) { c.Nkv = 1, c.S = 2, c.P = 2; });
  add("multi-head", [](Gqa& c) { c.Nkv = 4, c.S = 2, c.P = 1; });
  for (const Gqa& c : cases) {
    const Graph g = c.graph();
    const auto f = c.feeds(7);
    for (const Options& o : kModes) {
      SCOPED_TRACE(c.name + ", " + o.at("ge.exec.enableOperatorFusion"));
      CompiledModel m = compile(g, o);
      check(c, m, f);
      if (o == testing::graph_opts()) {
        int flash = 0;
        for (auto& k : m.kernels()) flash += k.variant == "flash attention";
        EXPECT_EQ(flash, c.softcap > 0 ? 0 : 1);  // softcap's tanh is no step the kernel takes
      }
    }
  }
}

TEST(OnnxGqa, PromptThenDecodeStepsFromOneCompile) {
  // Batch, sequence and past symbolic: a first prompt of 5 (no past), then two decode steps
  // feeding each run's present back as the past, rotary and a window of 4.
  Gqa c;
  c.sym = true, c.rot = 8, c.window = 4, c.B = 2, c.S = 5, c.P = 0;
  const Graph g = c.graph();
  for (const Options& o : kModes) {
    SCOPED_TRACE(o.at("ge.exec.enableOperatorFusion"));
    CompiledModel m = compile(g, o);
    Gqa step = c;
    auto f = step.feeds(11);
    for (int i = 0; i < 3; i++) {
      SCOPED_TRACE("run " + std::to_string(i));
      const auto out = check(step, m, f);
      step.P += step.S;
      step.S = 1;
      auto next = step.feeds(20 + uint64_t(i));
      next["pk"] = out.at("pk_out");
      next["pv"] = out.at("pv_out");
      f = next;
    }
  }
}

TEST(OnnxGqa, MatchesOnnxruntime) {
  // onnxruntime 1.30's outputs (the sum and every 7th value of y, present_key's last value) for a
  // decode step of 2 sequences after 3 keys with rotary halves and a window of 2, and a later
  // prompt of 3 after 2 with packed Q, K and V, rotary pairs and softcap 2; inputs of sines.
  auto seq = [](int64_t n, const std::function<double(int)>& fn) {
    std::vector<float> v;
    for (int i = 0; i < n; i++) v.push_back(float(fn(i)));
    return v;
  };
  struct Pin {
    int64_t B, S, P;
    bool packed;
    double sum, every7[8], present_last;
  };
  const Pin pins[] = {
      {2,
       1,
       3,
       false,
       2.9575839727185667,
       {0.2079128623008728, -0.40945830941200256, 0.4734664261341095, -0.2726966142654419,
        0.18444103002548218, 0.3005650043487549, 0.12254385650157928, 0.9257694482803345},
       -0.501591682434082},
      {1,
       3,
       2,
       true,
       -0.358186112716794,
       {-0.27959364652633667, 0.155889630317688, -0.07120345532894135, -0.08529047667980194,
        -0.12930646538734436, 0.23080319166183472, 0.05340674892067909, 0.2869080901145935},
       -0.5580055713653564}};
  const int64_t N = 4, Nkv = 2, d = 16, half = 8;
  for (const Pin& p : pins) {
    const int64_t D = p.packed ? (N + 2 * Nkv) * d : N * d;
    OneNode n("GroupQueryAttention", 17);
    n.domain("com.microsoft").input("q", kFloat, {p.B, p.S, D});
    if (p.packed) {
      n.skip().skip();
    } else {
      n.input("k", kFloat, {p.B, p.S, Nkv * d}).input("v", kFloat, {p.B, p.S, Nkv * d});
    }
    n.input("pk", kFloat, {p.B, Nkv, p.P, d})
        .input("pv", kFloat, {p.B, Nkv, p.P, d})
        .input("seqlens", kInt32, {p.B})
        .input("total", kInt32, {})
        .init("cos", kFloat, {16, half}, seq(16 * half, [](int i) { return std::cos(0.05 * i); }))
        .init("sin", kFloat, {16, half}, seq(16 * half, [](int i) { return std::sin(0.05 * i); }))
        .attr("num_heads", N)
        .attr("kv_num_heads", Nkv)
        .attr("do_rotary", 1);
    if (p.packed) {
      n.attr("rotary_interleaved", 1).attr_f("softcap", 2.0f);
    } else {
      n.attr("local_window_size", 2);
    }
    const Graph g = n.output("y", kFloat).output("prk", kFloat).output("prv", kFloat).import();
    const int64_t kvn = p.B * p.S * Nkv * d, pn = p.B * Nkv * p.P * d;
    std::map<std::string, Tensor> f{
        {"q", Tensor::from_floats(f32, {p.B, p.S, D},
                                  seq(p.B * p.S * D, [](int i) { return std::sin(0.23 * i); }))},
        {"pk", Tensor::from_floats(f32, {p.B, Nkv, p.P, d},
                                   seq(pn, [](int i) { return 0.5 * std::cos(0.29 * i); }))},
        {"pv", Tensor::from_floats(f32, {p.B, Nkv, p.P, d},
                                   seq(pn, [](int i) { return 0.5 * std::sin(0.31 * i); }))},
        {"seqlens", ints32({p.B}, std::vector<int>(size_t(p.B), int(p.P + p.S - 1)))},
        {"total", ints32({}, {int(p.P + p.S)})}};
    if (!p.packed) {
      f["k"] = Tensor::from_floats(f32, {p.B, p.S, Nkv * d},
                                   seq(kvn, [](int i) { return std::cos(0.19 * i); }));
      f["v"] = Tensor::from_floats(f32, {p.B, p.S, Nkv * d},
                                   seq(kvn, [](int i) { return std::sin(0.41 * i + 1); }));
    }
    for (const Options& o : kModes) {
      SCOPED_TRACE(std::string(p.packed ? "packed" : "decode") + ", " +
                   o.at("ge.exec.enableOperatorFusion"));
      const auto out = compile(g, o).run(f);
      const Tensor& y = out.at("y");
      double sum = 0;
      for (int64_t i = 0; i < y.numel(); i++) sum += y.get(i);
      EXPECT_NEAR(sum, p.sum, 1e-5);
      for (int64_t i = 0; i < 8; i++) EXPECT_NEAR(y.get(i * 7), p.every7[i], 1e-6) << i;
      const Tensor& prk = out.at("prk");
      EXPECT_EQ(prk.sizes(), (Sizes{p.B, Nkv, p.P + p.S, d}));
      EXPECT_NEAR(prk.get(prk.numel() - 1), p.present_last, 1e-6);
    }
  }
}

TEST(OnnxGqa, LengthsTheLoweringCannotTakeFailAtRunTime) {
  Gqa c;  // 2 sequences, a decode step after 4 keys
  const Graph g = c.graph();
  for (const Options& o : kModes) {
    CompiledModel m = compile(g, o);
    auto f = c.feeds(3);
    f["seqlens"] = ints32({2}, {4, 2});  // the second sequence shorter: its keys go elsewhere
    EXPECT_TRUE(
        throws_with([&] { m.run(f); }, {"GroupQueryAttention 'node0'", "seqlens_k[1] is 2",
                                        "holds 5 keys for every sequence", "first prompt only"}));
    f = c.feeds(3);
    f["total"] = ints32({}, {9});  // a cache of its maximum length (a shared buffer)
    EXPECT_TRUE(throws_with([&] { m.run(f); },
                            {"total_sequence_length is 9", "past_key holds 4 keys and query 1",
                             "past_present_share_buffer"}));
    f = c.feeds(3);
    f["seqlens"] = ints32({2}, {4, 7});
    EXPECT_TRUE(throws_with([&] { m.run(f); }, {"seqlens_k[1] is 7, outside 0..4"}));
    EXPECT_NO_THROW(m.run(c.feeds(3)));
  }
}

TEST(OnnxGqa, ErrorsNameNodeOpAndValue) {
  auto gqa = [](const std::function<void(OneNode&)>& edit, int64_t hidden = 32) {
    return [edit, hidden] {
      OneNode n("GroupQueryAttention", 17);
      n.domain("com.microsoft")
          .input("q", kFloat, {2, 3, hidden})
          .input("k", kFloat, {2, 3, 16})
          .input("v", kFloat, {2, 3, 16})
          .skip()
          .skip()
          .input("seqlens", kInt32, {2})
          .input("total", kInt32, {});
      edit(n);
      n.output("y", kFloat).import();
    };
  };
  EXPECT_TRUE(
      throws_with(gqa([](OneNode& n) { n.attr("num_heads", 4).attr("kv_num_heads", 3); }),
                  {"node0", "GroupQueryAttention", "kv_num_heads must divide num_heads 4, got 3"}));
  EXPECT_TRUE(
      throws_with(gqa([](OneNode& n) {
                    n.attr("num_heads", 4).attr("kv_num_heads", 2).attr("smooth_softmax", 1);
                  }),
                  {"node0", "smooth_softmax"}));
  EXPECT_TRUE(throws_with(
      gqa([](OneNode& n) { n.attr("num_heads", 4).attr("kv_num_heads", 2).attr("do_rotary", 1); }),
      {"node0", "do_rotary needs cos_cache and sin_cache"}));
  EXPECT_TRUE(throws_with(gqa([](OneNode& n) { n.attr("num_heads", 4).attr("kv_num_heads", 1); }),
                          {"node0",
                           "key and value must be [batch, sequence, kv_num_heads x head size] = "
                           "[2,3,8], got [2,3,16]"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("GroupQueryAttention", 17)
            .domain("com.microsoft")
            .input("q", kFloat, {2, 3, 30})
            .skip()
            .skip()
            .skip()
            .skip()
            .input("seqlens", kInt32, {2})
            .input("total", kInt32, {})
            .attr("num_heads", 4)
            .attr("kv_num_heads", 2)
            .output("y", kFloat)
            .import();
      },
      {"node0", "a packed query's hidden size 30 must be (num_heads + 2 kv_num_heads) = 8 times"}));
  EXPECT_TRUE(throws_with(
      [] {
        OneNode("GroupQueryAttention", 17)
            .domain("com.microsoft")
            .input("q", kFloat, {2, 3, 32})
            .input("k", kFloat, {2, 3, 16})
            .input("v", kFloat, {2, 3, 16})
            .skip()
            .skip()
            .input("seqlens", testing::kInt64, {2})
            .input("total", kInt32, {})
            .attr("num_heads", 4)
            .attr("kv_num_heads", 2)
            .output("y", kFloat)
            .import();
      },
      {"node0", "seqlens_k must be int32 [batch] = [2], got i64[2]"}));
}

}  // namespace
}  // namespace ubfuse::gqa_test
