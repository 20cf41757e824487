// The quant_matmul pass (passes/quant_matmul.cc) and DynamicQuantMatMul in a MatMul epilogue
// group: onnxruntime's DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(x_scale * w_scale)
// chain, with a bias and an activation after it, is one kernel in graph mode, bit for bit what
// eager mode computes op by op, in one row block or several; chains that cannot be taken stay op
// by op with a decision that says why.
#include <limits>

#include "test_util.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::graph_opts;

struct Chain {
  DType w_dtype = DType::i8;
  bool per_column = false;   // w_scale (and w_zero_point) one per column
  bool w_zero_point = true;  // MatMulInteger's fourth input
  bool swap = false;         // the Muls' operands the other way round
  bool bias = true;          // + bias
  bool gelu = false;         // then Gelu
  int64_t k = 37, n = 19;
};

Graph chain_graph(const Chain& c) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"batch", "seq", c.k});
  auto q = b.dynamic_quantize_linear(x);
  const bool s8 = c.w_dtype == DType::i8;
  auto w = b.constant(Tensor::random(c.w_dtype, {c.k, c.n}, 5, s8 ? -128 : 0, s8 ? 128 : 256));
  std::vector<float> scales, zps;
  for (int64_t j = 0; j < (c.per_column ? c.n : 1); j++) {
    scales.push_back(0.001f * float(j % 7 + 1));
    zps.push_back(float(s8 ? j % 9 - 4 : 120 + j % 13));
  }
  const Sizes ps = c.per_column ? Sizes{c.n} : Sizes{};
  auto ws = b.constant(Tensor::from_floats(DType::f32, ps, scales));
  auto wz = c.w_zero_point ? b.constant(Tensor::from_floats(c.w_dtype, ps, zps)) : nullptr;
  auto i = b.matmul_integer(q[0], w, q[2], wz);
  b.name_last("mmi");
  auto f = b.cast(i, DType::f32);
  auto factor = c.swap ? b.mul(ws, q[1]) : b.mul(q[1], ws);
  auto y = c.swap ? b.mul(factor, f) : b.mul(f, factor);
  b.name_last("rescale");
  if (c.bias) y = b.add(y, b.constant(Tensor::random(DType::f32, {c.n}, 9)));
  if (c.gelu) y = b.gelu(y);
  b.output("y", y);
  return b.build();
}

int count_ops_of(const CompiledModel& m, const std::string& op) {
  int k = 0;
  for (auto& ki : m.kernels()) {
    for (auto& t : ki.op_types) k += t == op;
  }
  return k;
}

TEST(QuantMatMul, ChainIsOneKernelBitForBitWithEager) {
  std::vector<Chain> chains;
  for (DType wt : {DType::i8, DType::u8}) {
    for (bool pc : {false, true}) {
      for (bool swap : {false, true}) chains.push_back({wt, pc, !swap, swap, true, false});
    }
  }
  chains.push_back({DType::i8, false, true, false, false, false});  // no bias: the op alone
  chains.push_back({DType::u8, true, true, false, true, true});     // bias and Gelu
  chains.push_back({DType::i8, false, true, false, true, false, 1, 1});
  chains.push_back({DType::i8, false, true, false, false, false, 0, 3});  // K = 0: zeros
  for (size_t ci = 0; ci < chains.size(); ci++) {
    const Chain& c = chains[ci];
    SCOPED_TRACE("chain " + std::to_string(ci));
    Graph g = chain_graph(c);
    CompiledModel eager = compile(g, testing::eager_opts());
    CompiledModel graph = compile(g, graph_opts());
    ASSERT_EQ(graph.kernels().size(), 1u) << graph.kernels()[0].name;
    EXPECT_EQ(count_ops_of(graph, "DynamicQuantMatMul"), 1);
    EXPECT_EQ(count_ops_of(eager, "DynamicQuantMatMul"), 0);  // eager: a kernel per ONNX op
    EXPECT_EQ(count_ops_of(eager, "MatMulInteger"), 1);
    // One row, a few, and enough for several row blocks (256 rows each at this block size).
    CompiledModel blocks =
        compile(g, {{"ge.exec.enableOperatorFusion", "1"}, {"matmul_block_bytes", "4096"}});
    for (Sizes s : {Sizes{1, 1, c.k}, Sizes{2, 7, c.k}, Sizes{3, 301, c.k}}) {
      Tensor x = Tensor::random(DType::f32, s, uint64_t(s[1]) + 3, -3, 5);
      auto want = eager.run({{"x", x}}).at("y");
      for (const CompiledModel* m : {&graph, &blocks}) {
        auto got = m->run({{"x", x}}).at("y");
        ASSERT_EQ(got.sizes(), want.sizes());
        if (!c.gelu) {
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.nbytes())) << sizes_str(s);
        } else {
          for (int64_t i = 0; i < want.numel(); i++) {
            ASSERT_NEAR(got.get(i), want.get(i), 1e-5 * (1 + std::abs(want.get(i)))) << i;
          }
        }
      }
    }
  }
}

// The same chain around a ConvInteger (1-D and 2-D, scales per tensor or per output channel as
// [M, 1...] or [1, M, 1...], with the bias Add over [M, 1] and a GELU after it): one
// DynamicQuantConv heading a Conv epilogue, bit for bit what eager computes.
TEST(QuantMatMul, ConvIntegerChainIsOneKernel) {
  for (int dims : {1, 2}) {
    for (int scale_form : {0, 1, 2}) {  // one element, [M, 1...], [1, M, 1...]
      for (bool gelu : {false, true}) {
        const int64_t c = 3, m = 4;
        GraphBuilder b;
        const Shape xs = dims == 1 ? Shape{"batch", c, "len"} : Shape{"batch", c, 5, "len"};
        auto x = b.input("x", DType::f32, xs);
        auto q = b.dynamic_quantize_linear(x);
        const Sizes ws = dims == 1 ? Sizes{m, c, 3} : Sizes{m, c, 2, 3};
        auto w = b.constant(Tensor::random(DType::i8, ws, 7, -128, 128));
        auto wz = b.constant(Tensor::from_floats(DType::i8, {m}, {0, 3, -9, 1}));
        Attrs attrs{
            {"pads", dims == 1 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{0, 1, 0, 1}}};
        auto i = b.op(OpKind::ConvInteger, {q[0], w, q[2], wz}, attrs);
        Sizes sc = scale_form == 0 ? Sizes{} : Sizes{m};
        if (scale_form > 0) {
          for (int d = 0; d < dims; d++) sc.push_back(1);
          if (scale_form == 2) sc.insert(sc.begin(), 1);
        }
        std::vector<float> sv(size_t(numel(sc)));
        for (size_t k = 0; k < sv.size(); k++) sv[k] = 0.002f * float(k + 1);
        auto factor = b.mul(q[1], b.constant(Tensor::from_floats(DType::f32, sc, sv)));
        Sizes bs{m};
        for (int d = 0; d < dims; d++) bs.push_back(1);
        auto y = b.add(b.mul(b.cast(i, DType::f32), factor),
                       b.constant(Tensor::random(DType::f32, bs, 8)));
        if (gelu) y = b.gelu(y);
        b.output("y", y);
        Graph g = b.build();
        const std::string where = std::to_string(dims) + "-D scale form " +
                                  std::to_string(scale_form) + (gelu ? " gelu" : "");
        CompiledModel eager = compile(g, testing::eager_opts());
        CompiledModel graph = compile(g, graph_opts());
        EXPECT_EQ(count_ops_of(graph, "DynamicQuantConv"), 1) << where;
        EXPECT_EQ(graph.kernels().size(), 1u) << where << " " << graph.kernels()[0].name;
        for (int64_t len : {1, 9}) {
          Sizes s = dims == 1 ? Sizes{2, c, len} : Sizes{2, c, 5, len};
          Tensor xv = Tensor::random(DType::f32, s, uint64_t(len), -2, 3);
          auto want = eager.run({{"x", xv}}).at("y");
          auto got = graph.run({{"x", xv}}).at("y");
          ASSERT_EQ(got.sizes(), want.sizes()) << where;
          for (int64_t k = 0; k < want.numel(); k++) {
            if (gelu) {
              ASSERT_NEAR(got.get(k), want.get(k), 1e-5 * (1 + std::abs(want.get(k)))) << where;
            } else {
              ASSERT_EQ(got.get(k), want.get(k)) << where << " element " << k;
            }
          }
        }
      }
    }
  }
}

// x made by a fusible op (here a residual Add and a LayerNorm, read by two quantized projections):
// its kernel also computes each row's max of x and -x once, both DynamicQuantMatMuls take x's
// range from them instead of a pass over x, and the results stay bit for bit eager's, NaN and
// infinities included (a NaN among the row maxima sends the kernel back to its own pass).
TEST(QuantMatMul, TheProducerComputesTheActivationsRange) {
  // The projections' chains, on x = h (a graph input) or on h computed in the graph.
  auto chains = [](GraphBuilder& b, GraphBuilder::V h) {
    for (const char* name : {"q", "k"}) {
      auto q = b.dynamic_quantize_linear(h);
      auto w = b.constant(Tensor::random(DType::i8, {32, 16}, uint64_t(name[0]), -128, 128));
      auto ws = b.constant(Tensor::from_floats(DType::f32, {}, {0.01f}));
      b.output(name, b.mul(b.cast(b.matmul_integer(q[0], w, q[2]), DType::f32), b.mul(q[1], ws)));
    }
  };
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"seq", 32});
  auto r = b.input("r", DType::f32, {"seq", 32});
  auto h = b.layer_norm(b.add(x, r), b.constant(Tensor::random(DType::f32, {32}, 1)),
                        b.constant(Tensor::random(DType::f32, {32}, 2)), 1e-5);
  chains(b, h);
  b.output("h", h);
  Graph g = b.build();
  GraphBuilder b2;
  chains(b2, b2.input("h", DType::f32, {"seq", 32}));
  CompiledModel on_h = compile(b2.build(), testing::eager_opts());  // op by op, no row maxima
  CompiledModel graph = compile(g, graph_opts());
  EXPECT_EQ(count_ops_of(graph, "DynamicQuantMatMul"), 2);
  EXPECT_EQ(count_ops_of(graph, "ReduceMax"), 2);  // one pair for both, in the LayerNorm's kernel
  bool in_norm = false;
  for (auto& k : graph.kernels()) {
    const auto& ops = k.op_types;
    in_norm |= std::count(ops.begin(), ops.end(), "LayerNorm") == 1 &&
               std::count(ops.begin(), ops.end(), "ReduceMax") == 2;
  }
  EXPECT_TRUE(in_norm);
  EXPECT_EQ(graph.kernels().size(), 3u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int special : {0, 1, 2}) {  // none, a NaN, an infinity (LayerNorm makes its row NaN)
    Tensor xv = Tensor::random(DType::f32, {7, 32}, 3, -4, 4);
    if (special) xv.set(3 * 32 + 5, special == 1 ? nan : inf);
    auto got = graph.run({{"x", xv}, {"r", Tensor::random(DType::f32, {7, 32}, 4)}});
    auto want = on_h.run({{"h", got.at("h")}});
    for (const char* o : {"q", "k"}) {
      ASSERT_EQ(0, std::memcmp(got.at(o).data(), want.at(o).data(), want.at(o).nbytes()))
          << o << " special " << special;
    }
  }
}

// onnxruntime's quantizer writes one DynamicQuantizeLinear per activation, read by each of its
// projections: every chain becomes its own DynamicQuantMatMul and the shared op goes. Where one
// reader cannot be taken (weights that are no constant), the others still are, and the shared op
// stays for that one (x is then quantized once more: cheaper than the i32 products each taken
// chain no longer writes and reads back).
TEST(QuantMatMul, ProjectionsSharingOneQuantizationAreEachOneOp) {
  for (bool constant_v : {true, false}) {
    SCOPED_TRACE(constant_v ? "q, k, v constant" : "v's weights an input");
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {"seq", 24});
    auto q = b.dynamic_quantize_linear(x);
    b.name_last("dql");
    for (const char* name : {"q", "k", "v"}) {
      const bool input = !constant_v && name[0] == 'v';
      auto w = input ? b.input("wv", DType::i8, {24, 8})
                     : b.constant(Tensor::random(DType::i8, {24, 8}, uint64_t(name[0]), -128, 128));
      auto ws = b.constant(Tensor::from_floats(DType::f32, {}, {0.01f * float(name[0] % 5 + 1)}));
      auto y = b.mul(b.cast(b.matmul_integer(q[0], w, q[2]), DType::f32), b.mul(q[1], ws));
      b.output(name, b.add(y, b.constant(Tensor::random(DType::f32, {8}, uint64_t(name[0])))));
    }
    Graph g = b.build();
    CompiledModel eager = compile(g, testing::eager_opts());
    CompiledModel graph = compile(g, graph_opts());
    EXPECT_EQ(count_ops_of(graph, "DynamicQuantMatMul"), constant_v ? 3 : 2);
    EXPECT_EQ(count_ops_of(graph, "DynamicQuantizeLinear"), constant_v ? 0 : 1);
    if (constant_v) {
      EXPECT_EQ(graph.kernels().size(), 3u);
    }
    for (int64_t rows : {1, 5, 67}) {
      std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {rows, 24}, 7, -2, 3)},
                                       {"wv", Tensor::random(DType::i8, {24, 8}, 8, -128, 128)}};
      if (constant_v) in.erase("wv");
      auto want = eager.run(in), got = graph.run(in);
      for (const char* o : {"q", "k", "v"}) {
        if (!constant_v && o[0] == 'v') {
          // v's Cast, Mul and Add run as one generated kernel, where GCC may contract the Mul
          // and Add into an FMA (it does on 256-bit vectors): one rounding fewer than eager.
          const Tensor &g = got.at(o), &w = want.at(o);
          for (int64_t e = 0; e < w.numel(); ++e) {
            ASSERT_NEAR(g.get(e), w.get(e), 1e-6 * (1 + std::abs(w.get(e)))) << "rows " << rows;
          }
          continue;
        }
        ASSERT_EQ(0, std::memcmp(got.at(o).data(), want.at(o).data(), want.at(o).nbytes()))
            << o << " rows " << rows;
      }
    }
  }
}

TEST(QuantMatMul, ExplainNamesTheChainAndWhyOneStaysApart) {
  CompiledModel m = compile(chain_graph({}), graph_opts());
  int fused = 0;
  for (const FusionDecision& d : m.decisions()) {
    if (d.reason == FusionReason::Fused &&
        d.message.find("inside DynamicQuantMatMul 'rescale'") != std::string::npos) {
      fused++;
    }
  }
  EXPECT_EQ(fused, 5);  // DQL->MMI, MMI->Cast, Cast->Mul, DQL->scale Mul, scale Mul->Mul

  // The quantized activation read by a second MatMulInteger: both chains stay op by op.
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"seq", 8});
  auto q = b.dynamic_quantize_linear(x);
  b.name_last("dql");
  auto w = b.constant(Tensor::random(DType::i8, {8, 4}, 1, -128, 128));
  auto ws = b.constant(Tensor::from_floats(DType::f32, {}, {0.01f}));
  auto one = b.mul(b.cast(b.matmul_integer(q[0], w, q[2]), DType::f32), b.mul(q[1], ws));
  b.output("one", one);
  b.output("q", q[0]);
  auto wi = b.input("w", DType::i8, {8, 4});  // weights that are no constant
  auto x2 = b.input("x2", DType::f32, {"seq", 8});
  auto q2 = b.dynamic_quantize_linear(x2);
  b.name_last("dql2");
  b.output("two", b.mul(b.cast(b.matmul_integer(q2[0], wi, q2[2]), DType::f32), b.mul(q2[1], ws)));
  CompiledModel apart = compile(b.build(), graph_opts());
  EXPECT_EQ(count_ops_of(apart, "DynamicQuantMatMul"), 0);
  std::string why;
  for (const FusionDecision& d : apart.decisions()) {
    if (d.reason == FusionReason::NotFusible &&
        d.message.find("stays op by op") != std::string::npos)
      why += d.message + "\n";
  }
  EXPECT_NE(why.find("'dql' through MatMulInteger"), std::string::npos) << why;
  EXPECT_NE(why.find("read elsewhere too"), std::string::npos) << why;
  EXPECT_NE(why.find("'dql2' through MatMulInteger"), std::string::npos) << why;
  EXPECT_NE(why.find("weights 'w' are not a constant matrix"), std::string::npos) << why;
  // Still right: the same as eager.
  Tensor xv = Tensor::random(DType::f32, {5, 8}, 2),
         wv = Tensor::random(DType::i8, {8, 4}, 3, -128, 128);
  auto e = compile(apart.graph(), testing::eager_opts()).run({{"x", xv}, {"x2", xv}, {"w", wv}});
  auto gr = apart.run({{"x", xv}, {"x2", xv}, {"w", wv}});
  for (const char* o : {"one", "two"}) {
    ASSERT_EQ(0, std::memcmp(e.at(o).data(), gr.at(o).data(), e.at(o).nbytes())) << o;
  }
}

TEST(QuantMatMul, TheQuantizedBertRunsFewerKernelsAndMatchesEager) {
  Graph g = import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/bert_stack_int8.onnx");
  CompiledModel eager = compile(g, testing::eager_opts());
  CompiledModel graph = compile(g, graph_opts());
  EXPECT_EQ(count_ops_of(graph, "DynamicQuantMatMul"), 12);  // 2 layers x (Q, K, V, O, up, down)
  EXPECT_EQ(count_ops_of(graph, "DynamicQuantizeLinear"), 0);
  EXPECT_EQ(count_ops_of(graph, "MatMulInteger"), 0);
  // The mask's Cast of i64 runs alone: with it the group would run op by op (NotProfitable).
  EXPECT_LE(graph.kernels().size(), 28u);
  std::map<std::string, Tensor> in{
      {"input_ids", Tensor::random(DType::i64, {2, 9}, 4, 0, 128)},
      {"attention_mask", Tensor::from_floats(DType::i64, {2, 9}, std::vector<float>(18, 1.0f))}};
  auto want = eager.run(in), got = graph.run(in);
  for (auto& [name, t] : want) {
    for (int64_t i = 0; i < t.numel(); i++) {
      ASSERT_NEAR(got.at(name).get(i), t.get(i), 2e-4 * (1 + std::abs(t.get(i)))) << name << i;
    }
  }
}

}  // namespace
}  // namespace ubfuse
