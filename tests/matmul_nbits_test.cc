// MatMulNBits (kernels/cpu/matmul_nbits.cc), the packed 4- and 8-bit weight onnxruntime's
// quantizer and onnxruntime-genai's model builder write: against the double reference over both
// of its paths (up to 8 rows through the packed codes, more through dequantized panels), block
// sizes, partial last blocks, zero points or the default, odd K and N, a symbolic row count from
// one compile; in a graph with the ops around it; and the import of an f32 model to it.
#include <limits>

#include "onnx_one_node.h"
#include "test_util.h"

namespace ubfuse::nbits_test {
namespace {

struct Packed {
  int64_t K, N, bits, bs;
  bool zero_points;
  int64_t blocks() const { return (K + bs - 1) / bs; }
  int64_t blob() const { return bs * bits / 8; }
  int64_t zrow() const { return (blocks() * bits + 7) / 8; }
};

// y = x [rows..., K] times the packed weight (random codes, scales, zero points of seed).
GraphBuilder::V nbits(GraphBuilder& b, GraphBuilder::V x, const Packed& p, uint64_t seed) {
  std::vector<GraphBuilder::V> in{
      x, b.constant(Tensor::random(DType::u8, {p.N, p.blocks(), p.blob()}, seed, 0, 256)),
      b.constant(Tensor::random(DType::f32, {p.N * p.blocks()}, seed + 1, 0.005, 0.05))};
  if (p.zero_points) {
    in.push_back(b.constant(Tensor::random(DType::u8, {p.N * p.zrow()}, seed + 2, 0, 256)));
  }
  return b.op(OpKind::MatMulNBits, in,
              {{"K", p.K}, {"N", p.N}, {"bits", p.bits}, {"block_size", p.bs}});
}

TEST(MatMulNBits, BothPathsAgainstTheReference) {
  const Packed packs[] = {{40, 37, 4, 16, true},   {64, 19, 4, 32, false},
                          {200, 11, 4, 128, true}, {37, 5, 8, 16, true},
                          {96, 33, 8, 32, false},  {1, 3, 4, 16, true},
                          {300, 70, 4, 64, true},  {130, 9, 8, 128, true},
                          {64, 300, 4, 32, true}};  // 64-column panels, the last of 44
  for (const Packed& p : packs) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {"rows", p.K});
    b.output("y", nbits(b, x, p, 7));
    Graph g = b.build();
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      CompiledModel m = compile(g, o);
      // 1, 3, 4 and 8 rows read the packed codes (groups of 4 rows and fewer); 9 and 37 rows
      // panels of 64 columns dequantized from the k-major copy of the codes.
      for (int64_t rows : {1, 3, 4, 8, 9, 37}) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " bits " +
                     std::to_string(p.bits) + " block " + std::to_string(p.bs) +
                     (p.zero_points ? " zero points" : "") + " rows " + std::to_string(rows));
        std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {rows, p.K}, 9)}};
        EXPECT_TRUE(testing::matches_reference(g, in, o, 1 + double(p.K) / 64));
      }
    }
  }
}

TEST(MatMulNBits, WeightsGivenAtRunTime) {
  // The packed weight, scales and zero points as graph inputs: both paths read each call's (the
  // k-major copy is made per call, not kept), two calls with other weights from one compile.
  const Packed p{40, 70, 4, 16, true};
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"rows", p.K});
  auto w = b.input("w", DType::u8, {p.N, p.blocks(), p.blob()});
  auto s = b.input("s", DType::f32, {p.N * p.blocks()});
  auto z = b.input("z", DType::u8, {p.N * p.zrow()});
  b.output("y", b.op(OpKind::MatMulNBits, {x, w, s, z},
                     {{"K", p.K}, {"N", p.N}, {"bits", p.bits}, {"block_size", p.bs}}));
  Graph g = b.build();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, o);
    for (uint64_t seed : {1, 2}) {
      for (int64_t rows : {3, 20}) {
        std::map<std::string, Tensor> in{
            {"x", Tensor::random(DType::f32, {rows, p.K}, seed)},
            {"w", Tensor::random(DType::u8, {p.N, p.blocks(), p.blob()}, seed + 10, 0, 256)},
            {"s", Tensor::random(DType::f32, {p.N * p.blocks()}, seed + 20, 0.005, 0.05)},
            {"z", Tensor::random(DType::u8, {p.N * p.zrow()}, seed + 30, 0, 256)}};
        EXPECT_TRUE(testing::matches_reference(g, in, o, 2)) << seed << " " << rows;
      }
    }
  }
}

TEST(MatMulNBits, CodesPastKCountForNothing) {
  // K = 20 in blocks of 16: the last block's codes past K are padding. With a scale of 6e37 a code
  // 7 above the zero point there is an infinite weight, which times the row's 0 would be NaN
  // (fuzz_onnx found it); the codes inside K are 1 above it (6e37, finite). Every row of x is 0.01:
  // y = 20 * 6e37 * 0.01. For 8 bits zero * scale (128 * 6e37) is infinite too, where the weight
  // is not.
  for (int64_t bits : {4, 8}) {
    const Packed p{20, 3, bits, 16, false};
    Tensor codes = Tensor::zeros(DType::u8, {p.N, p.blocks(), p.blob()});
    for (int64_t n = 0; n < p.N; n++) {
      for (int64_t k = 0; k < p.blocks() * p.bs; k++) {
        const int code = k < p.K ? 1 + 8 : 7 + 8;  // 8: the 4-bit default zero point
        uint8_t* byte = codes.data_as<uint8_t>() + (n * p.blocks() + k / p.bs) * p.blob() +
                        (bits == 8 ? k % p.bs : (k % p.bs) / 2);
        *byte = uint8_t(bits == 8 ? code + 120 : *byte | (code << (4 * (k % 2))));
      }
    }
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {"rows", p.K});
    b.output("y", b.op(OpKind::MatMulNBits,
                       {x, b.constant(codes),
                        b.constant(Tensor::from_floats(DType::f32, {p.N * p.blocks()},
                                                       std::vector<float>(6, 6e37f)))},
                       {{"K", p.K}, {"N", p.N}, {"bits", bits}, {"block_size", p.bs}}));
    Graph g = b.build();
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      for (int64_t rows : {2, 12}) {  // both paths
        Tensor in = Tensor::from_floats(DType::f32, {rows, p.K},
                                        std::vector<float>(size_t(rows * p.K), 0.01f));
        const Tensor y = compile(g, o).run({{"x", in}}).at("y");
        for (int64_t i = 0; i < y.numel(); i++) {
          EXPECT_NEAR(y.get(i), 20 * 6e37 * 0.01, 1e31) << bits << " bits, " << rows << " rows";
        }
      }
    }
  }
}

TEST(MatMulNBits, AnInfiniteScaleGivesTheReferencesInfinity) {
  // Column 0's first scale is +inf with zero points of 0 and codes of 1: its weights are +inf, as
  // the reference computes (code - zero) * scale, and column 0 of y is +inf. The one-FMA form
  // would add -0 * inf = NaN to them.
  const Packed p{32, 3, 4, 16, true};
  Tensor codes = Tensor::zeros(DType::u8, {p.N, p.blocks(), p.blob()});
  for (int64_t i = 0; i < codes.numel(); i++) codes.data_as<uint8_t>()[i] = 0x11;
  std::vector<float> scales(size_t(p.N * p.blocks()), 0.25f);
  scales[0] = std::numeric_limits<float>::infinity();
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"rows", p.K});
  b.output("y", b.op(OpKind::MatMulNBits,
                     {x, b.constant(codes),
                      b.constant(Tensor::from_floats(DType::f32, {p.N * p.blocks()}, scales)),
                      b.constant(Tensor::zeros(DType::u8, {p.N * p.zrow()}))},
                     {{"K", p.K}, {"N", p.N}, {"bits", p.bits}, {"block_size", p.bs}}));
  Graph g = b.build();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    for (int64_t rows : {2, 12}) {  // both paths
      std::map<std::string, Tensor> in{{"x", Tensor::random(DType::f32, {rows, p.K}, 3, 0.5, 1)}};
      EXPECT_TRUE(testing::matches_reference(g, in, o)) << rows << " rows";
    }
  }
}

TEST(MatMulNBits, InAGraphWithItsNeighbours) {
  // RMSNorm -> MatMulNBits -> SiLU times another MatMulNBits of the same input -> MatMulNBits:
  // a SwiGLU MLP in 4-bit, batch and length symbolic.
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"batch", "seq", 48});
  auto h = b.rms_norm(x, b.constant(Tensor::random(DType::f32, {48}, 3, 0.5, 1.5)), 1e-6);
  auto gate = nbits(b, h, {48, 80, 4, 16, true}, 11);
  auto up = nbits(b, h, {48, 80, 4, 16, true}, 21);
  b.output("y", b.add(x, nbits(b, b.mul(b.silu(gate), up), {80, 48, 4, 16, false}, 31)));
  Graph g = b.build();
  for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, o);
    for (const Sizes& s : {Sizes{1, 1, 48}, Sizes{2, 7, 48}}) {
      EXPECT_TRUE(testing::matches_reference(g, {{"x", Tensor::random(DType::f32, s, 5)}}, o, 3));
    }
  }
}

TEST(MatMulNBits, AnF32ModelKeepsThePackedWeight) {
  // com.microsoft.MatMulNBits on f32 a imports as MatMulNBits (the weight packed); on f16 a as a
  // MatMul of the weight dequantized into f16.
  for (int elem : {testing::kFloat, int(onnx::TensorProto::FLOAT16)}) {
    Graph g = testing::OneNode("MatMulNBits", 17)
                  .domain("com.microsoft")
                  .input("a", elem, {-1, 32})
                  .init("b", testing::kU8, {4, 2, 8}, std::vector<float>(64, 0x35))
                  .init("s", testing::kFloat, {8}, std::vector<float>(8, 0.5f))
                  .attr("K", 32)
                  .attr("N", 4)
                  .attr("bits", 4)
                  .attr("block_size", 16)
                  .output("y", elem)
                  .import();
    int nbits_ops = 0, matmuls = 0;
    for (const Node* n : g.topo_order()) {
      nbits_ops += n->op == OpKind::MatMulNBits;
      matmuls += n->op == OpKind::MatMul;
    }
    EXPECT_EQ(nbits_ops, elem == testing::kFloat ? 1 : 0);
    EXPECT_EQ(matmuls, elem == testing::kFloat ? 0 : 1);
    // Codes 5 and 3 less the default zero point 8, times 0.5: -1.5 and -2.5 for every column.
    const DType t = elem == testing::kFloat ? DType::f32 : DType::f16;
    Tensor a = Tensor::zeros(t, {2, 32});
    for (int64_t i = 0; i < 64; i++) a.set(i, i % 2 ? 1.0 : 2.0);
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      const Tensor y = compile(g, o).run({{"a", a}}).at("y");
      for (int64_t i = 0; i < y.numel(); i++) EXPECT_EQ(y.get(i), 16 * (2 * -1.5 + 1 * -2.5));
    }
  }
}

}  // namespace
}  // namespace ubfuse::nbits_test
