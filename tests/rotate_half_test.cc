// RotateHalf, RoPE's rotate_half: the op against the reference in every dtype and engine, its
// shape errors, its recovery from the exported Slice/Neg/Concat form, and the fused RoPE kernel
// q * cos + rotate_half(q) * sin (one kernel that reads q once, at its halves; a head dim whose
// half is not a multiple of the vector lanes takes the element-by-element path).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "kernels/cpu/kernel_util.h"
#include "passes_test_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using namespace ubfuse::testing;
using V = GraphBuilder::V;

int kernels_with(const CompiledModel& m, const std::string& op) {
  int n = 0;
  for (auto& k : m.kernels()) n += std::count(k.op_types.begin(), k.op_types.end(), op) > 0;
  return n;
}

// The op alone is a move and a sign: bit-exact in every dtype, engine and size (rows of 2, odd
// halves, a half that straddles a vector, size-1 dims, a symbolic leading dim), with plain stores
// and with the non-temporal stores of big outputs (threshold lowered to 0: unaligned rows too).
TEST(RotateHalf, ExactInEveryDtypeAndEngine) {
  const size_t saved = cpu::stream_min_bytes();
  for (size_t threshold : {saved, size_t(0)}) {
    cpu::set_stream_min_bytes(threshold);
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      for (const Sizes& s : std::vector<Sizes>{{2}, {1, 1, 2}, {3, 6}, {5, 34}, {2, 3, 4098}}) {
        GraphBuilder b;
        Shape shape = to_shape(s);
        if (shape.size() > 1) shape[0] = Dim("n");
        auto x = b.input("x", t, shape);
        b.output("y", b.rotate_half(b.abs(x)));  // abs: a producer, so the op is a kernel
        Graph g = b.build();
        std::map<std::string, Tensor> in = {{"x", Tensor::random(t, s, 7)}};
        auto want = ref::run_graph(g, in);
        for (auto& e : kEngines) {
          auto got = compile(g, engine_opts(e)).run(in).at("y");
          ASSERT_EQ(got.sizes(), s);
          for (int64_t i = 0; i < got.numel(); i++) {
            ASSERT_EQ(got.get(i), want.at("y").data[size_t(i)])
                << e << " " << dtype_name(t) << " " << sizes_str(s) << " element " << i
                << " threshold " << threshold;
          }
        }
      }
    }
  }
  cpu::set_stream_min_bytes(saved);
}

// A negation flips the sign bit of NaN, infinities and zeros, as Neg does.
TEST(RotateHalf, SignOfSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float vals[] = {0.0f, -0.0f, inf, -inf, 1.5f, std::numeric_limits<float>::quiet_NaN()};
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {1, 12});
  b.output("y", b.rotate_half(x));
  Graph g = b.build();
  Tensor in(DType::f32, {1, 12});
  for (int i = 0; i < 12; i++) in.set(i, vals[i % 6]);
  auto got = compile(g, eager_opts()).run({{"x", in}}).at("y");
  const float* y = static_cast<const float*>(got.data());
  const float* xs = static_cast<const float*>(in.data());
  for (int j = 0; j < 12; j++) {
    uint32_t yb, xb;
    std::memcpy(&yb, y + j, 4);
    std::memcpy(&xb, xs + (j < 6 ? j + 6 : j - 6), 4);
    EXPECT_EQ(yb, j < 6 ? xb ^ 0x80000000u : xb) << "column " << j;
  }
}

TEST(RotateHalf, ShapeErrorsNameTheNodeAndDim) {
  auto build = [](DType t, Shape s) {
    GraphBuilder b;
    auto x = b.input("x", t, s);
    b.output("y", b.rotate_half(x));
    return b.build();
  };
  EXPECT_TRUE(throws_with(
      [&] {
        build(DType::f32, {4, 7});
      },
      {"RotateHalf", "needs an even number of rotated columns within the last dim 7", "got all 7",
       "hint: RoPE rotates an even number of the head dim's first columns"}));
  auto partial = [](int64_t r, int64_t interleaved) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {4, 8});
    b.output("y",
             b.op(OpKind::RotateHalf, {x}, {{"rotary_dims", r}, {"interleaved", interleaved}}));
    return b.build();
  };
  EXPECT_TRUE(throws_with([&] { partial(5, 0); }, {"RotateHalf", "got rotary_dims 5"}));
  EXPECT_TRUE(throws_with([&] { partial(10, 1); }, {"last dim 8", "got rotary_dims 10"}));
  EXPECT_TRUE(throws_with([&] { partial(-2, 0); }, {"got rotary_dims -2"}));
  EXPECT_TRUE(throws_with([&] { partial(4, 2); }, {"interleaved must be 0 or 1, got 2"}));
  EXPECT_TRUE(throws_with([&] { build(DType::f32, {4, "hd"}); }, {"RotateHalf", "got hd"}));
  EXPECT_TRUE(throws_with(
      [&] {
        build(DType::f32, {4, int64_t(0)});
      },
      {"nonzero last dim", "got 0"}));
  EXPECT_TRUE(throws_with(
      [&] {
        build(DType::i64, {4, 8});
      },
      {"RotateHalf", "needs a floating-point input, got i64"}));
  EXPECT_TRUE(throws_with([&] { build(DType::f32, {}); }, {"RotateHalf", "needs at least 1 dim"}));
}

// Canonicalize recovers the op from the exported form, whichever way the slice ends are written.
TEST(RotateHalf, RecoveredFromSliceNegConcat) {
  for (int64_t end : {int64_t(64), INT64_MAX}) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {2, 4, 3, 64});
    b.output("y", b.mul(exported_rotate_half(b, x, 64, end), 2.0));
    Graph g = b.build();
    Graph o = optimized(g);
    EXPECT_EQ(count_op(o, OpKind::RotateHalf), 1) << print_graph(o);
    EXPECT_EQ(count_op(o, OpKind::Slice) + count_op(o, OpKind::Concat) + count_op(o, OpKind::Neg),
              0)
        << print_graph(o);
    EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 3)));
  }
}

// Look-alikes stay as they are: halves in the other order, the Neg on the other half, a split
// off the middle, a step, another axis, a slice read elsewhere.
TEST(RotateHalf, LookAlikesAreNotRecovered) {
  auto check = [](const std::function<void(GraphBuilder&, V)>& f, const char* what) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {2, 8, 8});
    f(b, x);
    Graph g = b.build();
    Graph o = optimized(g);
    EXPECT_EQ(count_op(o, OpKind::RotateHalf), 0) << what << "\n" << print_graph(o);
    EXPECT_TRUE(same_as_original(g, o, random_inputs(g, 4))) << what;
  };
  check(
      [](GraphBuilder& b, V x) {
        b.output("y",
                 b.concat({b.slice(x, {0}, {4}, {-1}), b.neg(b.slice(x, {4}, {8}, {-1}))}, -1));
      },
      "halves swapped");
  check(
      [](GraphBuilder& b, V x) {
        b.output("y",
                 b.concat({b.slice(x, {4}, {8}, {-1}), b.neg(b.slice(x, {0}, {4}, {-1}))}, -1));
      },
      "Neg on the lower half");
  check(
      [](GraphBuilder& b, V x) {
        b.output("y",
                 b.concat({b.neg(b.slice(x, {3}, {8}, {-1})), b.slice(x, {0}, {3}, {-1})}, -1));
      },
      "split at 3");
  check(
      [](GraphBuilder& b, V x) {
        auto odd = b.slice(x, {1}, {8}, {-1}, {2});
        b.output("y", b.concat({b.neg(odd), b.slice(x, {0}, {4}, {-1})}, -1));
      },
      "step 2");
  check(
      [](GraphBuilder& b, V x) {
        b.output("y", b.concat({b.neg(b.slice(x, {4}, {8}, {1})), b.slice(x, {0}, {4}, {1})}, 1));
      },
      "middle axis");
  check(
      [](GraphBuilder& b, V x) {
        auto upper = b.slice(x, {4}, {8}, {-1});
        b.output("y", b.concat({b.neg(upper), b.slice(x, {0}, {4}, {-1})}, -1));
        b.output("upper", upper);
      },
      "slice is an output");
}

// The RoPE block q * cos + rotate_half(q) * sin (cos and sin broadcast over batch and heads).
Graph rope_block(DType t, int64_t hd, bool exported) {
  GraphBuilder b;
  auto q = b.input("q", t, {"batch", 3, "seq", hd});
  auto cos = b.input("cos", t, {1, 1, "seq", hd});
  auto sin = b.input("sin", t, {1, 1, "seq", hd});
  auto qt = b.abs(q);  // a kernel before, as the Transpose is in a model; q * cos joins the RoPE
  auto rot = exported ? exported_rotate_half(b, qt, hd) : b.rotate_half(qt);
  // One statement per op: the order of a call's arguments is the compiler's (GCC and clang
  // differ), and the fused kernel's name follows the graph's order.
  auto qc = b.mul(qt, cos);
  auto rs = b.mul(rot, sin);
  b.output("y", b.add(qc, rs));
  return b.build();
}

// Graph mode runs the block as one kernel after the producer of q, in both engines and every
// dtype; head dims 128 (halves of whole vectors), 6, 18 and 66 (halves that straddle a vector
// or a pair of bf16 vectors, odd halves).
TEST(RotateHalf, RopeBlockIsOneKernel) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t hd : {128, 6, 18, 66}) {
      Graph g = rope_block(t, hd, /*exported=*/true);
      std::map<std::string, Tensor> in = {{"q", Tensor::random(t, {2, 3, 5, hd}, 1)},
                                          {"cos", Tensor::random(t, {1, 1, 5, hd}, 2)},
                                          {"sin", Tensor::random(t, {1, 1, 5, hd}, 3)}};
      auto want = ref::run_graph(g, in);
      for (auto& e : kEngines) {
        CompiledModel m = compile(g, engine_opts(e));
        const bool graph = e != "eager";
        EXPECT_EQ(m.kernels().size(), graph ? 2u : 5u) << e << " hd " << hd;  // abs + RoPE
        EXPECT_EQ(kernels_with(m, "RotateHalf"), 1) << e;
        if (graph) {
          EXPECT_EQ(m.kernels().back().name, "FusedMulRotateHalfMulAdd") << e;
        }
        RunStats st;
        auto got = m.run(in, &st);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y")))
            << e << " " << dtype_name(t) << " hd " << hd;
        if (graph) {  // q once (its halves), cos, sin and y: nothing in between
          const int64_t es = int64_t(dtype_size(t)), qn = 2 * 3 * 5 * hd, tn = 5 * hd;
          EXPECT_EQ(st.bytes_read, es * (qn + qn + 2 * tn)) << e;  // abs reads q, RoPE reads abs
          EXPECT_EQ(st.bytes_written, es * (qn + qn)) << e;
        }
      }
    }
  }
}

// RowPermuteFusion off in a rules file: the rotation is a kernel of its own again.
TEST(RotateHalf, RuleSwitchesItOff) {
  const std::string path = ::testing::TempDir() + "rotate_half_rules.json";
  std::ofstream(path) << R"({"Switch": {"UBFusion": {"RowPermuteFusion": "off"}}})";
  Graph g = rope_block(DType::f32, 64, /*exported=*/false);
  Options o = engine_opts("interpreter");
  o["ge.fusionSwitchFile"] = path;
  CompiledModel m = compile(g, o);
  EXPECT_EQ(m.kernels().size(), 3u);  // abs, RotateHalf, Mul-Mul-Add
  int off = 0;
  for (auto& d : m.decisions()) {
    off += d.reason == FusionReason::DisabledByRule &&
           d.message.find("RowPermuteFusion is off in " + path) != std::string::npos;
  }
  EXPECT_EQ(off, 1);
  std::map<std::string, Tensor> in = {{"q", Tensor::random(DType::f32, {1, 3, 4, 64}, 1)},
                                      {"cos", Tensor::random(DType::f32, {1, 1, 4, 64}, 2)},
                                      {"sin", Tensor::random(DType::f32, {1, 1, 4, 64}, 3)}};
  EXPECT_TRUE(matches_reference(g, in, o));
}

// Rotating a value computed in the same group would read columns not yet computed: the producer
// stays a kernel of its own, and the decision says why. After a MatMul likewise.
TEST(RotateHalf, InputComputedInTheGroupIsNotFused) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {4, 16});
  auto w = b.input("w", DType::f32, {16, 16});
  auto s = b.input("s", DType::f32, {16});
  auto doubled = b.mul(x, 2.0);
  auto p = b.matmul(x, w);
  b.output("y", b.mul(b.rotate_half(doubled), s));
  b.output("z", b.add(b.rotate_half(p), 1.0));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {4, 16}, 1)},
                                      {"w", Tensor::random(DType::f32, {16, 16}, 2)},
                                      {"s", Tensor::random(DType::f32, {16}, 3)}};
  for (const char* e : {"cpp", "interpreter"}) {
    CompiledModel m = compile(g, engine_opts(e));
    EXPECT_EQ(m.kernels().size(), 4u) << e;  // mul, matmul, and the two rotations with their users
    EXPECT_TRUE(matches_reference(g, in, engine_opts(e))) << e;
    int why = 0;
    std::string all;
    for (auto& d : m.decisions()) {
      all += d.message + "\n";
      why += d.reason == FusionReason::NotFusible &&
             d.message.find("reads '" + doubled->name + "' at other columns of the row") !=
                 std::string::npos;
      why += d.reason == FusionReason::NotFusible &&
             d.message.find("reads '" + p->name + "' at other columns of the row") !=
                 std::string::npos;
    }
    EXPECT_EQ(why, 2) << all;
  }
}

// The rotated value's producer can also meet the rotation through another edge: u feeds both
// v = exp(u), which is rotated, and w = abs(u), which the rotation's reader adds. Merging w's
// group into the rotation's would put exp in it: refused, with the group check's message.
TEST(RotateHalf, ProducerReachedThroughAnotherEdgeStaysOut) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {5, 24});
  auto u = b.neg(x);
  auto v = b.exp(u);
  auto rot = b.rotate_half(v);  // apart: argument order is the compiler's
  b.output("y", b.add(rot, b.abs(u)));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {5, 24}, 9)}};
  for (const char* e : {"cpp", "interpreter"}) {
    CompiledModel m = compile(g, engine_opts(e));
    EXPECT_EQ(m.kernels().size(), 2u) << e;
    EXPECT_TRUE(matches_reference(g, in, engine_opts(e))) << e;
    int group_check = 0;
    std::string all;
    for (auto& d : m.decisions()) {
      all += d.message + "\n";
      group_check +=
          d.reason == FusionReason::NotFusible &&
          d.message.find("so '" + v->producer->name +
                         "' must write it to memory from another kernel") != std::string::npos;
    }
    EXPECT_EQ(group_check, 1) << all;
  }
}

// A row reduction after the rotation: softmax(rotate_half(x) * 0.5) in one kernel, the rotated
// read in the reduction's passes.
TEST(RotateHalf, FusesIntoARowReduction) {
  for (DType t : {DType::f32, DType::bf16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {3, 2, 40});
    b.output("y", b.softmax(b.mul(b.rotate_half(b.exp(x)), 0.5)));
    Graph g = b.build();
    std::map<std::string, Tensor> in = {{"x", Tensor::random(t, {3, 2, 40}, 5)}};
    for (const char* e : {"cpp", "interpreter"}) {
      Options o = engine_opts(e);
      EXPECT_EQ(compile(g, o).kernels().size(), 2u) << e;
      EXPECT_TRUE(matches_reference(g, in, o)) << e << " " << dtype_name(t);
      o["ub_bytes"] = "64";  // no room for a row: the re-read variant
      EXPECT_TRUE(matches_reference(g, in, o)) << e << " " << dtype_name(t) << " re-read";
    }
  }
}

}  // namespace
}  // namespace ubfuse
