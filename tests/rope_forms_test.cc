// RoPE's other forms as RotateHalf: interleaved pairs (GPT-J's rotate_every_two) and partial
// rotary (only the head's first r columns rotate, the rest pass through). The op against the
// reference in every dtype and engine, its recovery from the exported forms, the look-alikes
// that stay as they are, and the whole partial block as one fused kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/kernel_util.h"
#include "passes_test_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using namespace ubfuse::testing;
using V = GraphBuilder::V;

struct Form {
  bool pairs;
  bool partial;  // rotary_dims: the largest even count below the last dim
};
const Form kForms[] = {{false, true}, {true, false}, {true, true}};

std::string form_str(const Form& f) {
  return std::string(f.pairs ? "pairs" : "halves") + (f.partial ? " partial" : "");
}

// The rotation is a move, a sign and zeros: bit-exact in every dtype, engine and size (rows of 2,
// odd last dims under a partial rotation, rotated runs that straddle a vector or a pair of bf16
// vectors, size-1 dims, a symbolic leading dim), with plain and non-temporal stores. It is read
// by a product with ones from memory, so graph mode fuses it (the generated and interpreted
// rotated loads) and the product keeps it exact; the inputs are signed.
TEST(RopeForms, RotationExactInEveryDtypeAndEngine) {
  const size_t saved = cpu::stream_min_bytes();
  for (size_t threshold : {saved, size_t(0)}) {
    cpu::set_stream_min_bytes(threshold);
    for (const Form& f : kForms) {
      for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        for (const Sizes& s :
             std::vector<Sizes>{{2}, {1, 1, 4}, {3, 6}, {3, 37}, {4, 50}, {5, 34}, {2, 3, 4098}}) {
          const int64_t d = s.back(), r = f.partial ? (d - 1) & ~int64_t(1) : 0;
          if ((f.partial && r == 0) || (!f.partial && d % 2 != 0)) continue;
          GraphBuilder b;
          Shape shape = to_shape(s);
          if (shape.size() > 1) shape[0] = Dim("n");
          auto x = b.input("x", t, shape);
          auto ones = b.input("ones", t, {d});
          auto rot = b.rotate_half(x, f.pairs, r);
          b.output("y", b.mul(rot, ones));
          Graph g = b.build();
          Tensor one(t, {d});
          for (int64_t i = 0; i < d; i++) one.set(i, 1.0);
          std::map<std::string, Tensor> in = {{"x", Tensor::random(t, s, 7)}, {"ones", one}};
          auto want = ref::run_graph(g, in);
          for (auto& e : kEngines) {
            CompiledModel m = compile(g, engine_opts(e));
            ASSERT_EQ(m.kernels().size(), e == "eager" ? 2u : 1u) << e;
            auto got = m.run(in).at("y");
            ASSERT_EQ(got.sizes(), s);
            for (int64_t i = 0; i < got.numel(); i++) {
              ASSERT_EQ(got.get(i), want.at("y").data[size_t(i)])
                  << e << " " << form_str(f) << " " << dtype_name(t) << " " << sizes_str(s)
                  << " element " << i << " threshold " << threshold;
            }
          }
        }
      }
    }
  }
  cpu::set_stream_min_bytes(saved);
}

// Pairs negate the first of each pair by its sign bit: NaN, infinities and zeros too.
TEST(RopeForms, PairsFlipTheSignBit) {
  const float inf = std::numeric_limits<float>::infinity();
  const float vals[] = {0.0f, -0.0f, inf, -inf, 1.5f, std::numeric_limits<float>::quiet_NaN()};
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {1, 40});
  b.output("y", b.rotate_half(x, /*interleaved=*/true));
  Graph g = b.build();
  Tensor in(DType::f32, {1, 40});
  for (int i = 0; i < 40; i++) in.set(i, vals[i % 6]);
  auto got = compile(g, eager_opts()).run({{"x", in}}).at("y");
  const float* y = static_cast<const float*>(got.data());
  const float* xs = static_cast<const float*>(in.data());
  for (int j = 0; j < 40; j++) {
    uint32_t yb, xb;
    std::memcpy(&yb, y + j, 4);
    std::memcpy(&xb, xs + (j % 2 == 0 ? j + 1 : j - 1), 4);
    EXPECT_EQ(yb, j % 2 == 0 ? xb ^ 0x80000000u : xb) << "column " << j;
  }
}

// The exported rotate_every_two: stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2), the Neg
// before or after the Unsqueeze.
V exported_rotate_pairs(GraphBuilder& b, V x, int64_t rank, bool neg_after_unsqueeze = false) {
  V odd = b.slice(x, {1}, {INT64_MAX}, {-1}, {2});
  V even = b.slice(x, {0}, {INT64_MAX}, {-1}, {2});
  std::vector<int64_t> unsq(size_t(rank), 0), flat(size_t(rank), 0);
  unsq.push_back(1);
  flat.back() = -1;
  V a = neg_after_unsqueeze ? b.neg(b.reshape(odd, unsq)) : b.reshape(b.neg(odd), unsq);
  return b.reshape(b.concat({a, b.reshape(even, unsq)}, -1), flat);
}

int rotations(const Graph& g, bool pairs, int64_t r) {
  int n = 0;
  for (Node* node : g.topo_order()) {
    n += node->op == OpKind::RotateHalf && node->attr_int("interleaved", 0) == int64_t(pairs) &&
         node->attr_int("rotary_dims", 0) == r;
  }
  return n;
}

TEST(RopeForms, PairsRecoveredFromStackFlatten) {
  for (bool after : {false, true}) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {2, 4, "seq", 64});
    b.output("y", b.mul(exported_rotate_pairs(b, x, 4, after), 2.0));
    Graph g = b.build();
    Graph o = optimized(g);
    EXPECT_EQ(rotations(o, true, 0), 1) << print_graph(o);
    EXPECT_EQ(count_op(o, OpKind::Slice) + count_op(o, OpKind::Concat) + count_op(o, OpKind::Neg) +
                  count_op(o, OpKind::Reshape),
              0)
        << print_graph(o);
    GraphBuilder sb;  // the same graph at a static length, for the reference
    auto sx = sb.input("x", DType::f32, {2, 4, 3, 64});
    sb.output("y", sb.mul(exported_rotate_pairs(sb, sx, 4, after), 2.0));
    Graph sg = sb.build();
    EXPECT_TRUE(same_as_original(sg, optimized(sg), random_inputs(sg, 3)));
  }
}

// The partial block: cat(x[..., :r] * cos + rot(x[..., :r]) * sin, x[..., r:]) with cos and sin
// of r columns broadcast over batch and heads.
// Batch and length are symbolic, or 2 and `len`. With `abs_first` q goes through a kernel first,
// as through the heads' Transpose in a model.
Graph partial_block(DType t, int64_t hd, int64_t r, bool pairs, int64_t len = 0,
                    bool abs_first = true) {
  GraphBuilder b;
  const Dim batch = len ? Dim(2) : Dim("batch"), seq = len ? Dim(len) : Dim("seq");
  auto q = b.input("q", t, {batch, 3, seq, hd});
  auto cos = b.input("cos", t, {1, 1, seq, r});
  auto sin = b.input("sin", t, {1, 1, seq, r});
  auto qt = abs_first ? b.abs(q) : q;
  auto xr = b.slice(qt, {0}, {r}, {-1});
  auto pass = b.slice(qt, {r}, {INT64_MAX}, {-1});
  auto rot = pairs ? exported_rotate_pairs(b, xr, 4) : exported_rotate_half(b, xr, r);
  auto qc = b.mul(xr, cos);  // one statement per op: the graph's order names the kernel
  auto rs = b.mul(rot, sin);
  auto sum = b.add(qc, rs);
  b.output("y", b.concat({sum, pass}, -1));
  return b.build();
}

TEST(RopeForms, PartialRecoveredAsOneRotationOverTheHead) {
  for (bool pairs : {false, true}) {
    Graph g = partial_block(DType::f32, 36, 32, pairs, 4);
    Graph o = optimized(g);
    EXPECT_EQ(rotations(o, pairs, 32), 1) << print_graph(o);
    EXPECT_EQ(count_op(o, OpKind::Slice) + count_op(o, OpKind::Concat), 0) << print_graph(o);
    EXPECT_EQ(count_op(o, OpKind::Pad), 2) << print_graph(o);  // cos with 1s, sin with 0s
    EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 5)));
  }
}

// q and k rotated with the same cos and sin share one Pad of each.
TEST(RopeForms, HeadsReadingTheSameCosAndSinShareItsPad) {
  GraphBuilder b;
  auto cos = b.input("cos", DType::f32, {4, 32});
  auto sin = b.input("sin", DType::f32, {4, 32});
  for (const char* name : {"q", "k"}) {
    auto x = b.input(name, DType::f32, {2, 3, 4, 36});
    auto xr = b.slice(x, {0}, {32}, {-1});
    auto qc = b.mul(xr, cos);
    auto rs = b.mul(exported_rotate_pairs(b, xr, 4), sin);
    auto sum = b.add(qc, rs);
    b.output(std::string(name) + "_out", b.concat({sum, b.slice(x, {32}, {INT64_MAX}, {-1})}, -1));
  }
  Graph g = b.build();
  Graph o = optimized(g);
  EXPECT_EQ(rotations(o, true, 32), 2) << print_graph(o);
  EXPECT_EQ(count_op(o, OpKind::Pad), 2) << print_graph(o);
  EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 6)));
}

// Graph mode runs the partial block as one kernel after abs (the Pads of cos and sin are kernels
// of their own, run once per plan where cos and sin depend on the lengths alone), in both
// engines and every dtype; head dims 36 of 32 rotated (the speech encoder's), 80 of 64 and 66 of
// 18 (rotated runs that straddle a vector).
TEST(RopeForms, PartialBlockIsOneKernel) {
  for (bool pairs : {false, true}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      for (auto [hd, r] : std::vector<std::pair<int64_t, int64_t>>{{36, 32}, {80, 64}, {66, 18}}) {
        Graph g = partial_block(t, hd, r, pairs);
        std::map<std::string, Tensor> in = {{"q", Tensor::random(t, {2, 3, 5, hd}, 1)},
                                            {"cos", Tensor::random(t, {1, 1, 5, r}, 2)},
                                            {"sin", Tensor::random(t, {1, 1, 5, r}, 3)}};
        auto want = ref::run_graph(g, in);
        for (const char* e : {"cpp", "interpreter"}) {
          CompiledModel m = compile(g, engine_opts(e));
          int rope = 0, pads = 0;
          for (auto& k : m.kernels()) {
            std::vector<std::string> ops = k.op_types;
            std::sort(ops.begin(), ops.end());
            rope += ops == std::vector<std::string>{"Add", "Mul", "Mul", "RotateHalf"};
            pads += ops == std::vector<std::string>{"Pad"};
            EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), 0) << k.name;
          }
          EXPECT_EQ(m.kernels().size(), 4u) << e << " hd " << hd;  // abs, 2 Pads, RoPE
          EXPECT_EQ(rope, 1) << e;  // the products, the rotation and the sum
          EXPECT_EQ(pads, 2) << e;
          auto got = m.run(in);
          EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y")))
              << e << " " << (pairs ? "pairs" : "halves") << " " << dtype_name(t) << " hd " << hd;
        }
      }
    }
  }
}

// The columns past r are x * 1 + 0 * -0: x itself, -0, infinities and NaN included.
TEST(RopeForms, PassedColumnsKeepSpecialValues) {
  Graph g = partial_block(DType::f32, 20, 16, /*pairs=*/false, 2, /*abs_first=*/false);
  const float inf = std::numeric_limits<float>::infinity();
  Tensor q = Tensor::random(DType::f32, {2, 3, 2, 20}, 4);
  for (int64_t i = 0; i < q.numel(); i += 20) {
    q.set(i + 16, inf);
    q.set(i + 17, -inf);
    q.set(i + 18, std::numeric_limits<float>::quiet_NaN());
    q.set(i + 19, -0.0);
  }
  std::map<std::string, Tensor> in = {{"q", q},
                                      {"cos", Tensor::random(DType::f32, {1, 1, 2, 16}, 2)},
                                      {"sin", Tensor::random(DType::f32, {1, 1, 2, 16}, 3)}};
  for (const char* e : {"eager", "cpp", "interpreter"}) {
    auto y = compile(g, engine_opts(e)).run(in).at("y");
    for (int64_t i = 0; i < y.numel(); i += 20) {
      EXPECT_EQ(y.get(i + 16), inf) << e;
      EXPECT_EQ(y.get(i + 17), -inf) << e;
      EXPECT_TRUE(std::isnan(y.get(i + 18))) << e;
      EXPECT_EQ(y.get(i + 19), 0.0) << e;
      EXPECT_TRUE(std::signbit(y.get(i + 19))) << e << ": -0 passes through as -0";
    }
  }
}

// Look-alikes stay as they are (and keep their values): pairs with the even lanes negated, pairs
// in the other order, a pass-through that does not start at r, a difference instead of a sum, the
// rotation of another value.
TEST(RopeForms, LookAlikesAreNotRecovered) {
  auto check = [](const std::function<void(GraphBuilder&, V)>& f, const char* what, bool pairs,
                  int64_t r) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {2, 3, 12});
    f(b, x);
    Graph g = b.build();
    Graph o = optimized(g);
    EXPECT_EQ(rotations(o, pairs, r), 0) << what << "\n" << print_graph(o);
    EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 4))) << what;
  };
  check(
      [](GraphBuilder& b, V x) {
        V odd = b.slice(x, {1}, {INT64_MAX}, {-1}, {2});
        V even = b.slice(x, {0}, {INT64_MAX}, {-1}, {2});
        auto u = [&](V v) { return b.reshape(v, {0, 0, 6, 1}); };
        b.output("y", b.reshape(b.concat({u(odd), u(b.neg(even))}, -1), {0, 0, -1}));
      },
      "even lanes negated", true, 0);
  check(
      [](GraphBuilder& b, V x) {
        V odd = b.slice(x, {1}, {INT64_MAX}, {-1}, {2});
        V even = b.slice(x, {0}, {INT64_MAX}, {-1}, {2});
        auto u = [&](V v) { return b.reshape(v, {0, 0, 6, 1}); };
        b.output("y", b.reshape(b.concat({u(even), u(b.neg(odd))}, -1), {0, 0, -1}));
      },
      "pairs in the other order", true, 0);
  auto partial = [](GraphBuilder& b, V x, int64_t pass_from, bool sub, bool other) {
    V xr = b.slice(x, {0}, {8}, {-1});
    V cos = b.input("cos", DType::f32, {3, 8});
    V sin = b.input("sin", DType::f32, {3, 8});
    V k = b.input("k", DType::f32, {2, 3, 12});
    V qc = b.mul(xr, cos);
    V rs = b.mul(b.rotate_half(other ? b.slice(k, {0}, {8}, {-1}) : xr), sin);
    V comb = sub ? b.sub(qc, rs) : b.add(qc, rs);
    b.output("y", b.concat({comb, b.slice(x, {pass_from}, {INT64_MAX}, {-1})}, -1));
  };
  check([&](GraphBuilder& b, V x) { partial(b, x, 10, false, false); }, "pass from 10", false, 8);
  check([&](GraphBuilder& b, V x) { partial(b, x, 8, true, false); }, "difference", false, 8);
  check([&](GraphBuilder& b, V x) { partial(b, x, 8, false, true); }, "another rotated", false, 8);
}

}  // namespace
}  // namespace ubfuse
