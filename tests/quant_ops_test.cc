// int8/uint8 tensors and the quantization ops: dtypes, .npy, Cast, ONNX import of 8-bit
// initializers and one-node models, the ops' values against ONNX's definitions (round half to even,
// saturation), the integer products on both of their paths, fusion keeping 8-bit values out, and
// the errors for bad zero points and scales.
#include <cstdlib>

#include "kernels/reference/reference.h"
#include "onnx_one_node.h"
#include "test_util.h"
#include "ubfuse/explain.h"
#include "ubfuse/npy.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::tensor;
using testing::throws_with;
using testing::values;

// Runs g in eager and graph mode; expects output "y" to equal want exactly (and have dtype dt).
void expect_both_modes(const Graph& g, const std::map<std::string, Tensor>& in, DType dt,
                       const std::vector<double>& want) {
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run(in).at("y");
    EXPECT_EQ(y.dtype(), dt) << opts.begin()->second;
    EXPECT_EQ(values(y), want) << "fusion=" << opts.begin()->second;
  }
}

TEST(Int8, DTypes) {
  EXPECT_EQ(parse_dtype("i8"), DType::i8);
  EXPECT_EQ(parse_dtype("int8"), DType::i8);
  EXPECT_EQ(parse_dtype("u8"), DType::u8);
  EXPECT_EQ(parse_dtype("uint8"), DType::u8);
  EXPECT_EQ(dtype_size(DType::i8), 1u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_EQ(dtype_name(DType::i8), "i8");
  EXPECT_EQ(dtype_name(DType::u8), "u8");
  EXPECT_FALSE(is_float(DType::u8));
  Tensor t(DType::i8, {3});
  t.set(0, -128);
  t.set(1, 127);
  t.set(2, 128);  // wraps, as the integer conversions do
  EXPECT_EQ(values(t), (std::vector<double>{-128, 127, -128}));
}

TEST(Int8, NpyRoundTrip) {
  for (DType t : {DType::i8, DType::u8}) {
    Tensor x =
        Tensor::random(t, {2, 3, 5}, 7, t == DType::i8 ? -128 : 0, t == DType::i8 ? 128 : 256);
    const std::string bytes = to_npy_bytes(x);
    EXPECT_NE(bytes.find(t == DType::i8 ? "'|i1'" : "'|u1'"), std::string::npos);
    Tensor y = parse_npy(bytes, "mem");
    ASSERT_EQ(y.dtype(), t);
    ASSERT_EQ(y.sizes(), x.sizes());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0);
  }
}

// Float -> 8-bit truncates toward zero and saturates (NaN -> 0); integers wrap; 8-bit -> anything
// keeps the value.
TEST(Int8, CastEveryDirection) {
  const std::vector<float> xs = {-300,    -128.9f, -1.5f,  -0.5f, 0,  0.9f,
                                 126.99f, 127.5f,  255.7f, 1e9f,  NAN};
  {
    GraphBuilder b;
    b.output("y", b.cast(b.input("x", f32, {11}), i8));
    expect_both_modes(b.build(), {{"x", tensor(f32, {11}, xs)}}, i8,
                      {-128, -128, -1, 0, 0, 0, 126, 127, 127, 127, 0});
  }
  {
    GraphBuilder b;
    b.output("y", b.cast(b.input("x", f32, {11}), u8));
    expect_both_modes(b.build(), {{"x", tensor(f32, {11}, xs)}}, u8,
                      {0, 0, 0, 0, 0, 0, 126, 127, 255, 255, 0});
  }
  {
    GraphBuilder b;  // i32 -> i8 -> u8 -> i64 wraps twice
    b.output("y", b.cast(b.cast(b.cast(b.input("x", i32, {4}), i8), u8), i64));
    expect_both_modes(b.build(), {{"x", tensor(i32, {4}, {200, -1, 256, -129})}}, i64,
                      {200, 255, 0, 127});
  }
  for (DType to : {f32, bf16, f16, i32, i64, boolean}) {
    GraphBuilder b;
    b.output("y", b.cast(b.input("x", i8, {3}), to));
    expect_both_modes(
        b.build(), {{"x", tensor(i8, {3}, {-128, 0, 127})}}, to,
        to == boolean ? std::vector<double>{1, 0, 1} : std::vector<double>{-128, 0, 127});
  }
}

// Movement ops carry 8-bit values as bytes; a reduction on them is an error with a hint (integer
// elementwise arithmetic takes them: int8_arith_test.cc).
TEST(Int8, MovementOpsAndArithmeticError) {
  GraphBuilder b;
  auto x = b.input("x", u8, {2, 3});
  auto t = b.transpose(x, {1, 0});
  auto s = b.slice(t, {1}, {3}, {0}, {1});
  auto c = b.concat({s, s}, 1);
  auto cond = b.input("c", boolean, {2, 4});
  b.output("y", b.where(cond, c, b.constant(tensor(u8, {}, {9}))));
  Tensor xv = tensor(u8, {2, 3}, {0, 1, 2, 250, 251, 252});
  Tensor cv = tensor(boolean, {2, 4}, {1, 1, 0, 1, 1, 0, 1, 1});
  expect_both_modes(b.build(), {{"x", xv}, {"c", cv}}, u8, {1, 251, 9, 251, 2, 9, 2, 252});

  GraphBuilder e;
  auto a = e.input("a", i8, {4});
  EXPECT_TRUE(throws_with([&] { e.reduce_sum(a); },
                          {"(ReduceSum)", "input 0 is i8",
                           "8-bit integers are taken by data movement", "hint: DequantizeLinear"}));
}

// ONNX's own examples (Operators.md) and the rounding and saturation corners.
TEST(Int8, QuantizeLinearRoundsHalfToEvenAndSaturates) {
  GraphBuilder b;
  auto x = b.input("x", f32, {10});
  b.output("y", b.quantize_linear(x, b.constant(tensor(f32, {}, {2})),
                                  b.constant(tensor(u8, {}, {128}))));
  // x / 2 = -0.5, 0.5, 1.5, 2.5, -1.5, 3.25, 200, -300, 63.5, 64.5
  Tensor xv = tensor(f32, {10}, {-1, 1, 3, 5, -3, 6.5f, 400, -600, 127, 129});
  expect_both_modes(b.build(), {{"x", xv}}, u8, {128, 128, 130, 130, 126, 131, 255, 0, 192, 192});

  GraphBuilder bi;  // i8, no rounding ties lost to a double quotient: 0.3 / 0.1 is 3 in f32
  auto xi = bi.input("x", f32, {6});
  bi.output("y", bi.quantize_linear(xi, bi.constant(tensor(f32, {}, {0.1f})),
                                    bi.constant(tensor(i8, {}, {-1}))));
  Tensor xiv = tensor(f32, {6}, {0.3f, -0.25f, 0.05f, 100, -100, -12.75f});
  expect_both_modes(bi.build(), {{"x", xiv}}, i8, {2, -3, -1, 127, -128, -128});
}

TEST(Int8, QuantizeDequantizePerAxis) {
  GraphBuilder b;
  auto x = b.input("x", f32, {1, 3, 2});
  auto q = b.quantize_linear(x, b.constant(tensor(f32, {3}, {1, 2, 4})),
                             b.constant(tensor(u8, {3}, {0, 10, 20})), 1);
  b.output("y", q);
  b.output("d", b.dequantize_linear(q, b.constant(tensor(f32, {3}, {1, 2, 4})),
                                    b.constant(tensor(u8, {3}, {0, 10, 20})), 1));
  Graph g = b.build();
  Tensor xv = tensor(f32, {1, 3, 2}, {-2.5f, 300, 3, -3, 10, 1});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    auto out = compile(g, opts).run({{"x", xv}});
    EXPECT_EQ(values(out.at("y")), (std::vector<double>{0, 255, 12, 8, 22, 20}));
    EXPECT_EQ(values(out.at("d")), (std::vector<double>{0, 255, 4, -4, 8, 0}));
  }
}

// ONNX's example: x = [0, 2, -3, -2.5, 1.34, 0.5]. 0.5 / scale is 25.5 in f32, a tie that goes to
// 26: 179 as libonnx-testdata's test_dynamicquantizelinear has it (Operators.md's 178 divides in
// double).
TEST(Int8, DynamicQuantizeLinearOnnxExample) {
  GraphBuilder b;
  auto q = b.dynamic_quantize_linear(b.input("x", f32, {6}));
  b.output("y", q[0]);
  b.output("s", q[1]);
  b.output("z", q[2]);
  Graph g = b.build();
  Tensor xv = tensor(f32, {6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    auto out = compile(g, opts).run({{"x", xv}});
    EXPECT_EQ(values(out.at("y")), (std::vector<double>{153, 255, 0, 26, 221, 179}));
    EXPECT_EQ(out.at("s").data_as<float>()[0], 5.0f / 255.0f);
    EXPECT_EQ(values(out.at("z")), (std::vector<double>{153}));
  }
  // All zeros: the range is empty; scale 1/255 rather than a division by zero.
  auto out = compile(g, testing::eager_opts()).run({{"x", Tensor::zeros(f32, {6})}});
  EXPECT_EQ(values(out.at("y")), std::vector<double>(6, 0));
  EXPECT_EQ(out.at("s").data_as<float>()[0], 1.0f / 255.0f);
}

// The vector path (f32, whole vectors plus a tail): ties of x / scale round to even, NaN
// quantizes to 0 and is left out of the range, values at the range's ends saturate exactly.
TEST(Int8, DynamicQuantizeLinearVectorsRoundTiesToEvenAndSkipNaN) {
  GraphBuilder b;
  auto q = b.dynamic_quantize_linear(b.input("x", f32, {"n"}));
  b.output("y", q[0]);
  b.output("s", q[1]);
  b.output("z", q[2]);
  Graph g = b.build();
  for (int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(1027), int64_t(70001)}) {
    // Range [-2.55, 2.55] -> scale 0.02, zero point 128 (x / scale ties at odd multiples of 0.01).
    Tensor x = Tensor::random(f32, {n}, 11, -2.5, 2.5);
    float* p = x.data_as<float>();
    for (int64_t i = 0; i < n; i += 3) p[i] = float(int64_t(i % 255) - 127) * 0.02f + 0.01f;
    if (n > 2) {
      p[0] = -2.55f;
      p[n - 1] = 2.55f;
      p[n / 2] = std::nanf("");
    }
    std::map<std::string, Tensor> in = {{"x", x}};
    auto want = ref::run_graph(g, in);
    for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
      auto out = compile(g, opts).run(in);
      for (const char* o : {"y", "s", "z"}) {
        ASSERT_EQ(out.at(o).numel(), int64_t(want.at(o).data.size())) << o;
        for (int64_t i = 0; i < out.at(o).numel(); i++) {
          ASSERT_EQ(out.at(o).get(i), want.at(o).data[size_t(i)])
              << o << "[" << i << "] of n=" << n << ", x=" << (*o == 'y' ? p[i] : 0.0f);
        }
      }
    }
  }
}

// ONNX's MatMulInteger example.
TEST(Int8, MatMulIntegerOnnxExample) {
  GraphBuilder b;
  auto a = b.input("a", u8, {4, 3});
  auto w = b.input("b", u8, {3, 2});
  b.output("y", b.matmul_integer(a, w, b.constant(tensor(u8, {}, {12})),
                                 b.constant(tensor(u8, {}, {0}))));
  Tensor av = tensor(u8, {4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor bv = tensor(u8, {3, 2}, {1, 4, 2, 5, 3, 6});
  expect_both_modes(b.build(), {{"a", av}, {"b", bv}}, i32,
                    {-38, -83, -44, -98, -50, -113, -56, -128});
}

// Every operand dtype pair and zero point form over the full 8-bit range, against the reference,
// on oneDNN's path (where the CPU has VNNI) and on the loop, with B given at run time or constant
// (the loop widens a constant B once and takes B's zero points off after the product).
TEST(Int8, MatMulIntegerFullRangeBothPaths) {
  for (const char* no_dnnl : {"", "1"}) {
    if (*no_dnnl) {
      setenv("UBFUSE_INT8_NO_ONEDNN", "1", 1);
    } else {
      unsetenv("UBFUSE_INT8_NO_ONEDNN");
    }
    for (DType ta : {u8, i8}) {
      for (DType tb : {u8, i8}) {
        for (int zform = 0; zform < 6; zform++) {  // none, scalar, per row / per column; B const
          GraphBuilder b;
          const int64_t m = 33, k = 67, n = 29;
          const double alo = ta == i8 ? -128 : 0, blo = tb == i8 ? -128 : 0;
          const bool constant_b = zform >= 3;
          auto a = b.input("a", ta, {2, m, k});
          Tensor wv = Tensor::random(tb, {k, n}, 2, blo, blo + 256);
          auto w = constant_b ? b.constant(wv) : b.input("b", tb, {k, n});
          GraphBuilder::V za = nullptr, zb = nullptr;
          if (zform % 3 == 1) {
            za = b.constant(Tensor::random(ta, {}, 3, alo, alo + 256));
            zb = b.constant(Tensor::random(tb, {}, 4, blo, blo + 256));
          } else if (zform % 3 == 2) {
            za = b.constant(Tensor::random(ta, {m}, 3, alo, alo + 256));
            zb = b.constant(Tensor::random(tb, {n}, 4, blo, blo + 256));
          }
          b.output("y", b.matmul_integer(a, w, za, zb));
          Graph g = b.build();
          std::map<std::string, Tensor> in{{"a", Tensor::random(ta, {2, m, k}, 1, alo, alo + 256)}};
          if (!constant_b) in.emplace("b", wv);
          EXPECT_TRUE(testing::matches_reference(g, in, testing::eager_opts()))
              << dtype_name(ta) << " x " << dtype_name(tb) << " zero points " << zform
              << " no oneDNN " << no_dnnl;
        }
      }
    }
  }
  unsetenv("UBFUSE_INT8_NO_ONEDNN");
}

// Weights made ready for the loop (UBFUSE_INT8_NO_ONEDNN set at compile time) and run where
// oneDNN is on again: the product takes B as given, still exact (on a CPU without VNNI both are
// the loop).
TEST(Int8, WeightsReadyForTheLoopRunOnOneDnn) {
  setenv("UBFUSE_INT8_NO_ONEDNN", "1", 1);
  GraphBuilder b;
  auto a = b.input("a", u8, {"m", 40});
  auto w = b.constant(Tensor::random(i8, {40, 24}, 12, -128, 128));
  b.output("y", b.matmul_integer(a, w, b.constant(Tensor::random(u8, {}, 13, 0, 256)),
                                 b.constant(Tensor::random(i8, {24}, 14, -128, 128))));
  Graph g = b.build();
  CompiledModel m = compile(g, testing::eager_opts());
  unsetenv("UBFUSE_INT8_NO_ONEDNN");
  for (int64_t rows : {1, 7, 70}) {
    std::map<std::string, Tensor> in{{"a", Tensor::random(u8, {rows, 40}, 15, 0, 256)}};
    auto want = ref::run_graph(g, in);
    auto got = m.run(in);
    EXPECT_TRUE(testing::close_to_ref(got.at("y"), want.at("y"))) << rows << " rows";
  }
}

// Constant weights are made ready for oneDNN once (s8, column sums, its blocked layout for a
// representative M); runs at other Ms, symbolic or not, use them or the plain copy; up to 32 rows
// split B's 64-column blocks over the threads (200 columns: parts of 128 and 72), more rows split
// A's rows (on 2 and 3 threads: uneven runs). Both dtypes of A and B, with and without zero
// points, against the reference.
// Constant weights, prepared once: up to 4 rows run the AVX512-VNNI loop where the CPU has it
// (int_gemm_vnni.h; K with and without a partial quad, N with a partial 64-column block), up to
// 32 oneDNN by column blocks, more by rows; with AMX, 1-4 rows past whole 16-row tiles (33, 49, 68)
// run that loop after oneDNN's part, 5 or more (300, 69) stay in it.
TEST(Int8, MatMulIntegerConstantWeights) {
  for (DType tb : {u8, i8}) {
    for (bool zps : {false, true}) {
      for (int64_t k : {96, 99}) {
        const int64_t n = 200;
        const double blo = tb == i8 ? -128 : 0;
        GraphBuilder b;
        auto a = b.input("a", u8, {"rows", k});
        auto w = b.constant(Tensor::random(tb, {k, n}, 21, blo, blo + 256));
        GraphBuilder::V za = nullptr, zb = nullptr;
        if (zps) {
          za = b.constant(tensor(u8, {}, {131}));
          zb = b.constant(Tensor::random(tb, {n}, 22, blo, blo + 256));
        }
        b.output("y", b.matmul_integer(a, w, za, zb));
        Graph g = b.build();
        for (int64_t rows : {1, 2, 3, 4, 5, 7, 32, 33, 49, 68, 69, 300}) {
          std::map<std::string, Tensor> in{{"a", Tensor::random(u8, {rows, k}, 5, 0, 256)}};
          for (const char* threads : {"2", "3"}) {
            Options eager = testing::eager_opts(), graph = testing::graph_opts();
            eager["num_threads"] = graph["num_threads"] = threads;
            EXPECT_TRUE(testing::matches_reference(g, in, eager))
                << dtype_name(tb) << " zero points " << zps << " k " << k << " rows " << rows << " "
                << threads;
            EXPECT_TRUE(testing::matches_reference(g, in, graph))
                << dtype_name(tb) << " zero points " << zps << " k " << k << " rows " << rows << " "
                << threads;
          }
        }
      }
    }
  }
}

// A's zero point applied by oneDNN itself (B packed with its column sums): one zero point for
// all rows and none left on B (s8 weights with zero point 0 or none, u8 with 128), as the dynamic
// quantizer writes them; a zero point per row of A or one left on B takes the correction pass.
// Up to 32 rows the pool's threads split B's columns and apply A's zero point as they copy their
// part out (B's left at the shift) or leave it to the pass. On 2 and 3 threads, exact against the
// reference.
TEST(Int8, MatMulIntegerZeroPointInTheProduct) {
  const int64_t k = 96, n = 200;
  struct Case {
    DType tb;
    int zb;        // B's zero point: -1 none, else this value for every column
    bool per_row;  // A's zero point per row
  };
  for (Case c : {Case{i8, -1, false}, Case{i8, 0, false}, Case{u8, 128, false}, Case{u8, 3, false},
                 Case{i8, 0, true}}) {
    const double blo = c.tb == i8 ? -128 : 0;
    GraphBuilder b;
    auto a = b.input("a", u8, {"rows", k});
    auto w = b.constant(Tensor::random(c.tb, {k, n}, 31, blo, blo + 256));
    auto za = c.per_row ? b.input("za", u8, {"rows"}) : b.constant(tensor(u8, {}, {131}));
    GraphBuilder::V zb = nullptr;
    if (c.zb >= 0) {
      Tensor z(c.tb, {});
      z.set(0, double(c.zb));
      zb = b.constant(z);
    }
    b.output("y", b.matmul_integer(a, w, za, zb));
    Graph g = b.build();
    for (int64_t rows : {5, 16, 33, 300}) {
      std::map<std::string, Tensor> in{{"a", Tensor::random(u8, {rows, k}, 7, 0, 256)}};
      if (c.per_row) in["za"] = Tensor::random(u8, {rows}, 8, 0, 256);
      for (const char* threads : {"2", "3"}) {
        Options o = testing::graph_opts();
        o["num_threads"] = threads;
        EXPECT_TRUE(testing::matches_reference(g, in, o))
            << dtype_name(c.tb) << " zb " << c.zb << " per row " << c.per_row << " rows " << rows
            << " threads " << threads;
      }
    }
  }
}

// Sums past 2^24 stay exact (int32 arithmetic, not f32): K = 3072 with a column of 127s and A of
// 255s, where the product's column reaches 99.5M; with A's zero point of 131.
TEST(Int8, MatMulIntegerLargeSumsAreExact) {
  const int64_t k = 3072, n = 130;
  Tensor w = Tensor::random(i8, {k, n}, 41, -128, 128);
  for (int64_t q = 0; q < k; q++) {
    w.set(q * n + 5, 127);
    w.set(q * n + 77, -128);
  }
  GraphBuilder b;
  auto a = b.input("a", u8, {"rows", k});
  auto za = b.constant(tensor(u8, {}, {131}));
  b.output("y", b.matmul_integer(a, b.constant(w), za, nullptr));
  Graph g = b.build();
  for (int64_t rows : {3, 40, 300}) {
    Tensor av = Tensor::random(u8, {rows, k}, 42, 0, 256);
    for (int64_t i = 0; i < k; i++) av.set(i, 255);  // row 0: all 255
    std::map<std::string, Tensor> in{{"a", av}};
    auto want = ref::run_graph(g, in).at("y");
    for (const char* threads : {"1", "2"}) {
      Options o = testing::graph_opts();
      o["num_threads"] = threads;
      auto got = compile(g, o).run(in).at("y");
      int64_t bad = 0;
      for (int64_t i = 0; i < got.numel(); i++) bad += got.get(i) != want.data[size_t(i)];
      EXPECT_EQ(bad, 0) << rows << " rows, " << threads
                        << " threads; column 5 of row 0: " << got.get(5) << " against "
                        << want.data[5];
    }
  }
}

// Bad zero points and scales name the node, the input and give a hint; never a crash.
TEST(Int8, ErrorsNameTheNodeAndTheValue) {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 3});
  auto s = b.constant(tensor(f32, {}, {0.1f}));
  EXPECT_TRUE(throws_with(
      [&] { b.quantize_linear(x, s, b.constant(tensor(i32, {}, {0}))); },
      {"(QuantizeLinear)", "y_zero_point (input 2) must be u8 or i8, got i32", "hint"}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.quantize_linear(x, b.constant(tensor(f32, {2}, {1, 1})), nullptr, 1);
      },
      {"(QuantizeLinear)", "scale [2] is neither one element (per tensor) nor [3] (per axis 1",
       "hint: per-axis"}));
  EXPECT_TRUE(throws_with([&] { b.quantize_linear(x, b.constant(tensor(f16, {}, {1})), nullptr); },
                          {"y_scale (input 1) must be f32, got f16"}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.quantize_linear(x, s, b.constant(tensor(u8, {3}, {1, 2, 3})));
      },
      {"zero point shape [3] differs from the scale's []"}));
  auto q = b.input("q", u8, {2, 3});
  EXPECT_TRUE(throws_with([&] { b.dequantize_linear(q, s, b.constant(tensor(i8, {}, {0}))); },
                          {"(DequantizeLinear)", "x_zero_point (input 2) is i8 but input 0 is u8",
                           "hint: a zero point has the dtype"}));
  auto w = b.input("w", i8, {3, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        b.matmul_integer(q, w, b.constant(tensor(u8, {3}, {1, 2, 3})));
      },
      {"(MatMulInteger)", "a_zero_point (input 2) has shape [3]", "one per row of a: [2]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.matmul_integer(q, w, b.constant(tensor(u8, {}, {1})),
                         b.constant(tensor(i8, {3}, {1, 2, 3})));
      },
      {"b_zero_point (input 3) has shape [3]", "one per column of b: [4]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        b.matmul_integer(q, b.input("wf", f32, {3, 4}));
      },
      {"B (input 1) must be u8 or i8, got f32"}));
  EXPECT_TRUE(throws_with([&] { b.op(OpKind::DynamicQuantizeLinear, {x}); },
                          {"has 1 outputs, not 3", "GraphBuilder::dynamic_quantize_linear"}));
  EXPECT_TRUE(throws_with([&] { b.dynamic_quantize_linear(q); },
                          {"(DynamicQuantizeLinear)", "input 0 is u8"}));
}

// Graph mode: nothing that reads or writes an 8-bit value joins a fused group, and explain says
// why; the f32 ops after the Cast still fuse with each other.
TEST(Int8, FusionKeepsInt8ValuesOut) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto q =
      b.quantize_linear(x, b.constant(tensor(f32, {}, {0.05f})), b.constant(tensor(u8, {}, {128})));
  auto f = b.cast(q, f32);
  b.output("y", b.add(b.mul(f, 0.05), x));
  Graph g = b.build();
  const std::string report = format_explain(explain(g));
  EXPECT_NE(report.find("'cast0' (Cast) reads the u8 value"), std::string::npos) << report;
  Tensor xv = Tensor::random(f32, {4, 16}, 5, -6, 6);
  EXPECT_TRUE(testing::matches_reference(g, {{"x", xv}}, testing::graph_opts()));
}

using testing::OneNode;

using testing::kFloat;
using testing::kI8;
using testing::kInt32;
using testing::kU8;

TEST(Int8, OnnxMatMulIntegerWithOnlyBZeroPoint) {
  // a_zero_point absent ("") but b_zero_point given: a zero of A's dtype fills the slot.
  Graph g = OneNode("MatMulInteger", 13)
                .input("a", kU8, {2, 2})
                .init("b", kI8, {2, 2}, {-1, 2, 3, -4}, true)
                .skip()
                .init("bz", kI8, {2}, {1, -1})
                .output("y", kInt32)
                .import();
  Tensor av = tensor(u8, {2, 2}, {1, 200, 255, 0});
  // (b - bz) = [[-2, 3], [2, -3]]
  expect_both_modes(g, {{"a", av}}, i32, {398, -597, -510, 765});
}

TEST(Int8, OnnxDequantizeInt8InitializerAndInt8Output) {
  Graph g = OneNode("DequantizeLinear", 13)
                .init("x", kI8, {4}, {-128, -1, 0, 127})
                .init("s", kFloat, {}, {0.5f})
                .init("z", kI8, {}, {-1})
                .output("y", kFloat)
                .import();
  expect_both_modes(g, {}, f32, {-63.5, 0, 0.5, 64});
  Graph q = OneNode("QuantizeLinear", 13)
                .input("x", kFloat, {3})
                .init("s", kFloat, {}, {1})
                .init("z", kI8, {}, {0})
                .output("y", kI8)
                .import();
  expect_both_modes(q, {{"x", tensor(f32, {3}, {-200, 1.5f, 2.5f})}}, i8, {-128, 2, 2});
}

TEST(Int8, OnnxArgMaxOnInt8IsUnsupported) {
  try {
    OneNode("ArgMax", 13).input("a", kU8, {2}).output("y", onnx::TensorProto::INT64).import();
    FAIL() << "expected OnnxUnsupportedError";
  } catch (const OnnxUnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("node 'node0' (ArgMax)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input 0 ('a') is u8"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ubfuse
