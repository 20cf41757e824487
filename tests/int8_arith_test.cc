// Elementwise arithmetic and comparisons on int8 and uint8 tensors (eager kernels; graph mode runs
// them as their own kernels): the values ONNX's reference (numpy) gives, wraparound modulo 2^8,
// truncating division, Python's and C's remainders, broadcasting and odd sizes against the double
// reference, the division-by-zero error, the ONNX import of these ops on 8-bit tensors and the
// error for an op that still does not take them.
#include <cstdint>

#include "kernels/reference/reference.h"
#include "onnx_one_node.h"
#include "test_util.h"
#include "ubfuse/explain.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::OneNode;
using testing::tensor;
using testing::throws_with;
using testing::values;

using Binary = Value* (GraphBuilder::*)(Value*, Value*);
using Unary = Value* (GraphBuilder::*)(Value*);

Graph binary_graph(Binary op, DType dt, const Shape& a, const Shape& b) {
  GraphBuilder g;
  g.output("y", (g.*op)(g.input("a", dt, a), g.input("b", dt, b)));
  return g.build();
}

// Runs g in eager and graph mode; output "y" must have dtype dt and equal want exactly, and the
// reference must agree.
void expect_values(const Graph& g, const std::map<std::string, Tensor>& in, DType dt,
                   const std::vector<double>& want) {
  EXPECT_EQ(ref::run_graph(g, in).at("y").data, want) << "reference";
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run(in).at("y");
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(values(y), want) << "fusion=" << opts.begin()->second;
  }
}

void expect_binary(Binary op, DType dt, const std::vector<float>& a, const std::vector<float>& b,
                   const std::vector<double>& want) {
  const int64_t n = int64_t(a.size());
  expect_values(binary_graph(op, dt, {n}, {n}),
                {{"a", tensor(dt, {n}, a)}, {"b", tensor(dt, {n}, b)}}, dt, want);
}

// A full-range random 8-bit tensor; no zeros where it is a divisor.
Tensor random8(DType dt, Sizes s, uint64_t seed, bool divisor = false) {
  Tensor t = Tensor::random(dt, s, seed, dt == DType::i8 ? -128 : 0, dt == DType::i8 ? 128 : 256);
  if (divisor) {
    for (int64_t i = 0; i < t.numel(); i++) {
      if (t.get(i) == 0) t.set(i, i % 2 ? -1 : 1);  // u8: -1 wraps to 255
    }
  }
  return t;
}

TEST(Int8Arith, AddSubMulWrapModulo256) {
  expect_binary(&GraphBuilder::add, DType::u8, {250, 255, 1, 128}, {10, 255, 2, 128},
                {4, 254, 3, 0});
  expect_binary(&GraphBuilder::sub, DType::u8, {3, 0, 200, 255}, {5, 1, 100, 0},
                {254, 255, 100, 255});
  expect_binary(&GraphBuilder::mul, DType::u8, {16, 255, 15, 2}, {17, 255, 17, 128},
                {16, 1, 255, 0});
  expect_binary(&GraphBuilder::add, DType::i8, {127, -128, -1, 100}, {1, -1, 1, 100},
                {-128, 127, 0, -56});
  expect_binary(&GraphBuilder::sub, DType::i8, {-128, 127, -5, 0}, {1, -1, 7, -128},
                {127, -128, -12, -128});
  expect_binary(&GraphBuilder::mul, DType::i8, {64, -128, -3, 127}, {2, -1, 5, 127},
                {-128, -128, -15, 1});
}

// Truncation toward zero (numpy's divide, then astype, as ONNX's reference computes it); i8's
// -128 / -1 is 128, which wraps to -128.
TEST(Int8Arith, DivTruncatesTowardZero) {
  expect_binary(&GraphBuilder::div, DType::i8, {-7, 7, -7, 7, -128, -128, 127, 0},
                {2, -2, -2, 2, -1, 3, -128, -5}, {-3, -3, 3, 3, -128, -42, 0, 0});
  expect_binary(&GraphBuilder::div, DType::u8, {255, 7, 200, 0}, {2, 8, 200, 3}, {127, 0, 1, 0});
}

// Mod (ONNX fmod=0): the sign of the divisor, as Python's %; Fmod (fmod=1): the dividend's.
TEST(Int8Arith, ModAndFmodSigns) {
  expect_binary(&GraphBuilder::mod, DType::i8, {-7, 7, -7, 7, -128, 127, 6, -128},
                {3, -3, -3, 3, -1, -128, 3, 127}, {2, -2, -1, 1, 0, -1, 0, 126});
  expect_binary(&GraphBuilder::fmod, DType::i8, {-7, 7, -7, 7, -128, 127}, {3, -3, -3, 3, -1, -128},
                {-1, 1, -1, 1, 0, 127});
  expect_binary(&GraphBuilder::mod, DType::u8, {255, 7, 200}, {16, 8, 3}, {15, 7, 2});
}

// Max and Min compare as the dtype's values: u8 200 is above 100 (as i8 it would be -56).
TEST(Int8Arith, MaxMinCompareTheDtypesValues) {
  expect_binary(&GraphBuilder::max, DType::u8, {200, 0, 255}, {100, 1, 255}, {200, 1, 255});
  expect_binary(&GraphBuilder::min, DType::u8, {200, 0, 255}, {100, 1, 254}, {100, 0, 254});
  expect_binary(&GraphBuilder::max, DType::i8, {-128, -1, 127}, {127, 0, -128}, {127, 0, 127});
  expect_binary(&GraphBuilder::min, DType::i8, {-128, -1, 127}, {127, 0, -128}, {-128, -1, -128});
}

// Every binary op on full-range values against the reference: odd sizes (runs shorter than a
// block, a tail), broadcasting a row, a column and a scalar.
TEST(Int8Arith, BinaryOpsMatchReferenceWithBroadcasting) {
  const std::vector<std::pair<const char*, Binary>> ops = {
      {"add", &GraphBuilder::add}, {"sub", &GraphBuilder::sub}, {"mul", &GraphBuilder::mul},
      {"div", &GraphBuilder::div}, {"mod", &GraphBuilder::mod}, {"fmod", &GraphBuilder::fmod},
      {"max", &GraphBuilder::max}, {"min", &GraphBuilder::min}};
  const std::vector<std::pair<Sizes, Sizes>> shapes = {
      {{1}, {1}},   {{37}, {37}}, {{3, 37}, {37}}, {{3, 37}, {3, 1}}, {{5, 1, 7}, {1, 3, 1}},
      {{1027}, {}}, {{}, {1027}}};
  uint64_t seed = 1;
  for (DType dt : {DType::i8, DType::u8}) {
    for (auto& [name, op] : ops) {
      for (auto& [sa, sb] : shapes) {
        Shape ha(sa.begin(), sa.end()), hb(sb.begin(), sb.end());
        Graph g = binary_graph(op, dt, ha, hb);
        std::map<std::string, Tensor> in = {{"a", random8(dt, sa, seed++)},
                                            {"b", random8(dt, sb, seed++, true)}};
        for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
          EXPECT_TRUE(testing::matches_reference(g, in, opts))
              << name << " " << dtype_name(dt) << " " << sizes_str(sa) << " " << sizes_str(sb);
        }
      }
    }
  }
}

TEST(Int8Arith, UnaryOpsWrapAndMatchReference) {
  GraphBuilder b;
  auto x = b.input("x", DType::i8, {6});
  b.output("y", b.neg(x));
  expect_values(b.build(), {{"x", tensor(DType::i8, {6}, {-128, -1, 0, 1, 127, -5})}}, DType::i8,
                {-128, 1, 0, -1, -127, 5});
  GraphBuilder a;
  a.output("y", a.abs(a.input("x", DType::i8, {4})));
  expect_values(a.build(), {{"x", tensor(DType::i8, {4}, {-128, -127, 0, 5})}}, DType::i8,
                {-128, 127, 0, 5});
  const std::vector<std::pair<const char*, Unary>> ops = {{"neg", &GraphBuilder::neg},
                                                          {"abs", &GraphBuilder::abs},
                                                          {"relu", &GraphBuilder::relu},
                                                          {"sign", &GraphBuilder::sign}};
  uint64_t seed = 100;
  for (DType dt : {DType::i8, DType::u8}) {
    for (auto& [name, op] : ops) {
      GraphBuilder g;
      g.output("y", (g.*op)(g.input("x", dt, {3, 45})));
      Graph gr = g.build();
      std::map<std::string, Tensor> in = {{"x", random8(dt, {3, 45}, seed++)}};
      for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
        EXPECT_TRUE(testing::matches_reference(gr, in, opts)) << name << " " << dtype_name(dt);
      }
    }
  }
}

TEST(Int8Arith, ComparisonsOnTheDtypesValues) {
  for (Binary op : {&GraphBuilder::equal, &GraphBuilder::less, &GraphBuilder::greater}) {
    for (DType dt : {DType::i8, DType::u8}) {
      Graph g = binary_graph(op, dt, {3, 37}, {37});
      std::map<std::string, Tensor> in = {{"a", random8(dt, {3, 37}, 7)},
                                          {"b", random8(dt, {37}, 8)}};
      in.at("a").set(0, in.at("b").get(0));  // one equal pair
      for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
        EXPECT_TRUE(testing::matches_reference(g, in, opts)) << dtype_name(dt);
      }
    }
  }
  expect_values(
      binary_graph(&GraphBuilder::greater, DType::u8, {3}, {3}),
      {{"a", tensor(DType::u8, {3}, {200, 1, 255})}, {"b", tensor(DType::u8, {3}, {100, 1, 0})}},
      DType::boolean, {1, 0, 1});
}

// Integer division by zero is an error naming the node, as for i32 and i64 (numpy gives 0 and a
// warning; ONNX leaves it undefined), never a crash.
TEST(Int8Arith, DivisionByZeroIsAnError) {
  for (Binary op : {&GraphBuilder::div, &GraphBuilder::mod, &GraphBuilder::fmod}) {
    for (DType dt : {DType::i8, DType::u8}) {
      Graph g = binary_graph(op, dt, {4}, {4});
      std::map<std::string, Tensor> in = {{"a", tensor(dt, {4}, {1, 2, 3, 4})},
                                          {"b", tensor(dt, {4}, {1, 0, 1, 1})}};
      for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
        EXPECT_TRUE(
            throws_with([&] { compile(g, opts).run(in); }, {"integer division by zero", "hint"}))
            << dtype_name(dt);
      }
    }
  }
}

// Graph mode: 8-bit arithmetic keeps a kernel of its own (fusion check Int8Value).
TEST(Int8Arith, GraphModeRunsEachOpAlone) {
  GraphBuilder b;
  auto x = b.input("x", DType::i8, {4, 16});
  b.output("y", b.mul(b.add(x, x), x));
  Graph g = b.build();
  const std::string report = format_explain(explain(g));
  EXPECT_NE(report.find("reads the i8 value"), std::string::npos) << report;
  std::map<std::string, Tensor> in = {{"x", random8(DType::i8, {4, 16}, 3)}};
  EXPECT_TRUE(testing::matches_reference(g, in, testing::graph_opts()));
}

// Ops whose math is float-only still reject 8-bit operands, naming the node and the dtype.
TEST(Int8Arith, FloatMathOnInt8IsAnError) {
  GraphBuilder e;
  auto a = e.input("a", DType::i8, {4});
  EXPECT_TRUE(throws_with(
      [&] { e.exp(a); },
      {"(Exp)", "input 0 is i8", "8-bit integers are taken by", "hint: DequantizeLinear"}));
  EXPECT_TRUE(throws_with([&] { e.pow_tensor(a, a); }, {"(PowTensor)", "input 0 is i8"}));
  EXPECT_TRUE(throws_with([&] { e.reduce_sum(a); }, {"(ReduceSum)", "input 0 is i8"}));
}

using testing::kBool;
using testing::kI8;
using testing::kU8;

void expect_onnx(const Graph& g, const std::map<std::string, Tensor>& in, DType dt,
                 const std::vector<double>& want) {
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run(in).at("y");
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(values(y), want) << "fusion=" << opts.begin()->second;
  }
}

TEST(Int8Arith, OnnxArithmeticImports) {
  Graph add = OneNode("Add", 14)
                  .input("a", kU8, {2, 3})
                  .init("b", kU8, {3}, {10, 200, 0})
                  .output("y", kU8)
                  .import();
  expect_onnx(add, {{"a", tensor(DType::u8, {2, 3}, {250, 100, 7, 0, 56, 255})}}, DType::u8,
              {4, 44, 7, 10, 0, 255});
  Graph mod = OneNode("Mod", 13)
                  .input("a", kI8, {4})
                  .input("b", kI8, {4})
                  .attr("fmod", int64_t(0))
                  .output("y", kI8)
                  .import();
  expect_onnx(mod,
              {{"a", tensor(DType::i8, {4}, {-4, 7, -128, 5})},
               {"b", tensor(DType::i8, {4}, {3, -3, 7, 5})}},
              DType::i8, {2, -2, 5, 0});
  Graph le = OneNode("LessOrEqual", 16)
                 .input("a", kI8, {3})
                 .input("b", kI8, {3})
                 .output("y", kBool)
                 .import();
  expect_onnx(
      le,
      {{"a", tensor(DType::i8, {3}, {-128, 5, 127})}, {"b", tensor(DType::i8, {3}, {-128, 4, -1})}},
      DType::boolean, {1, 0, 0});
}

// Clip on i8: min and max inputs of x's dtype; either left out is the dtype's range.
TEST(Int8Arith, OnnxClipInt8) {
  Tensor x = tensor(DType::i8, {5}, {-128, -6, 0, 6, 127});
  expect_onnx(OneNode("Clip", 13)
                  .input("x", kI8, {5})
                  .init("lo", kI8, {}, {-5})
                  .init("hi", kI8, {}, {5})
                  .output("y", kI8)
                  .import(),
              {{"x", x}}, DType::i8, {-5, -5, 0, 5, 5});
  expect_onnx(OneNode("Clip", 13).input("x", kI8, {5}).output("y", kI8).import(), {{"x", x}},
              DType::i8, {-128, -6, 0, 6, 127});
  expect_onnx(OneNode("Clip", 13)
                  .input("x", kI8, {5})
                  .skip()
                  .init("hi", kI8, {}, {-1})
                  .output("y", kI8)
                  .import(),
              {{"x", x}}, DType::i8, {-128, -6, -1, -1, -1});
}

// An ONNX op that still does not take 8-bit tensors: OnnxUnsupportedError naming the node, the
// input, its dtype and the ops that do take them.
TEST(Int8Arith, OnnxReductionOnInt8IsUnsupported) {
  try {
    OneNode("ReduceMax", 13)
        .input("data", kI8, {2, 3})
        .attr("axes", std::vector<int64_t>{1})
        .output("y", kI8)
        .import();
    FAIL() << "expected OnnxUnsupportedError";
  } catch (const OnnxUnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("node 'node0' (ReduceMax)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input 0 ('data') is i8"), std::string::npos) << msg;
    // It lists every op that takes them (ops_quant.cc's one list).
    for (const char* op : {"taken only by", "Add", "Equal", "MatMulInteger", "Reshape", "Where"}) {
      EXPECT_NE(msg.find(op), std::string::npos) << op << " in " << msg;
    }
    EXPECT_EQ(msg.find("ReduceMax,"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ubfuse
