// LayerNorm's one-pass statistics (eager kernels and fused kernels): sums of d = x - pivot and
// d^2, the pivot a median of 3 samples of the row. The variance mean(d^2) - mean(d)^2 loses
// (pivot - mean)^2 / var of relative accuracy, so rows whose first element is an outlier (what a
// pivot of x[0] cancelled on: 4e-4 relative error for 100 among U(-1, 1) values) are checked here,
// with rows whose spread squared passes f32's range (the fused kernel's sums at 2^-80 take over)
// and rows of tiny values, and a row whose mean is far above its spread (the mean itself must not
// be rounded to f32 before x - mean). Each on eager, generated and interpreted kernels against the
// double reference.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kernels/reference/reference.h"
#include "test_util.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse {
namespace {

constexpr int64_t kCols = 4099;  // odd: a masked tail; the middle sample is column 2049

// silu(layer_norm(x + r)) over rows of kCols, one fused kernel in graph mode; with `rms`, a
// second output rms_norm(x + r, w).
Graph add_layer_norm_silu(int64_t rows, bool rms = false) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {rows, kCols});
  auto r = b.input("r", DType::f32, {rows, kCols});
  auto w = b.input("w", DType::f32, {kCols});
  auto bias = b.input("bias", DType::f32, {kCols});
  auto sum = b.add(x, r);
  b.output("y", b.silu(b.layer_norm(sum, w, bias, 1e-5)));
  if (rms) b.output("rms", b.rms_norm(sum, w, 1e-6));
  return b.build();
}

std::map<std::string, Tensor> inputs_with(const Tensor& x) {
  const int64_t rows = x.dim(0);
  return {{"x", x},
          {"r", Tensor::random(DType::f32, {rows, kCols}, 2, -0.01, 0.01)},
          {"w", Tensor::random(DType::f32, {kCols}, 3, 0.5, 1.5)},
          {"bias", Tensor::random(DType::f32, {kCols}, 4)}};
}

void expect_all_engines_match(const Graph& g, const std::map<std::string, Tensor>& in) {
  for (const char* engine : {"eager", "cpp", "interpreter"}) {
    const Options o = testing::engine_opts(engine);
    if (std::string(engine) != "eager") {
      EXPECT_EQ(compile(g, o).kernels().size(), 1u) << engine;
    }
    EXPECT_TRUE(testing::matches_reference(g, in, o)) << engine;
  }
}

TEST(NormStatistics, AnOutlierAmongTheSamplesDoesNotCancelTheVariance) {
  // Row k: values in [-1, 1] with one outlier of 10^k at column 0, the middle or the end.
  const int64_t rows = 12;
  Tensor x = Tensor::random(DType::f32, {rows, kCols}, 1);
  for (int64_t k = 0; k < rows; k++) {
    double v = 1.0;
    for (int64_t p = 0; p <= k / 3; p++) v *= 10.0;  // 10 .. 1e4
    const int64_t col = k % 3 == 0 ? 0 : k % 3 == 1 ? kCols / 2 : kCols - 1;
    x.set(k * kCols + col, v);
  }
  expect_all_engines_match(add_layer_norm_silu(rows), inputs_with(x));
}

TEST(NormStatistics, HugeAndTinyRowsKeepTheirPrecision) {
  Tensor x = Tensor::random(DType::f32, {4, kCols}, 5);
  for (int64_t c = 0; c < kCols; c++) {
    x.set(c, x.get(c) * 1e25);                   // spread^2 passes f32: the 2^-80 sums take over
    x.set(kCols + c, x.get(kCols + c) * 1e-20);  // squares near f32's subnormals
    x.set(2 * kCols + c, 1e6 + x.get(2 * kCols + c));  // a mean far above the spread
  }
  x.set(3 * kCols, 3e38);  // one value near FLT_MAX first: d overflows for the rest of the row
  std::map<std::string, Tensor> in = inputs_with(x);
  for (int64_t c = 0; c < kCols; c++) {  // r must not swamp the scaled rows
    in["r"].set(c, 0);
    in["r"].set(kCols + c, 0);
  }
  expect_all_engines_match(add_layer_norm_silu(4), in);
}

// The fused kernels take the 2^-80 sums only for rows whose sum of d^2 passed 2^100, in a loop
// of their own (kir guarded reductions). Huge rows among ordinary ones, at positions that make
// them the first row of a thread's range and the next row of the pipelined loop, with one and
// two threads: every row must come out as the reference has it. RMSNorm's guarded sum too.
TEST(NormStatistics, HugeRowsAmongOrdinaryOnesTakeTheRescueSums) {
  const int64_t rows = 16;
  Tensor x = Tensor::random(DType::f32, {rows, kCols}, 7);
  for (int64_t k : {0, 1, 2, 7, 8, 13}) {
    for (int64_t c = 0; c < kCols; c++) x.set(k * kCols + c, x.get(k * kCols + c) * 1e25);
  }
  std::map<std::string, Tensor> in = inputs_with(x);
  Graph g = add_layer_norm_silu(rows, true);
  // ub_bytes 256 holds no row: the re-read variant, whose rescue loops re-read the inputs too.
  for (const char* ub : {"", "256"}) {
    for (const char* threads : {"1", "2"}) {
      for (const char* engine : {"cpp", "interpreter"}) {
        Options o = testing::engine_opts(engine);
        o["num_threads"] = threads;
        if (*ub) o["ub_bytes"] = ub;
        // (With 256 bytes the planner splits the group: 3 kernels, the norms re-reading.)
        EXPECT_EQ(compile(g, o).kernels().size(), *ub ? 3u : 1u) << engine;
        EXPECT_TRUE(testing::matches_reference(g, in, o))
            << engine << " threads " << threads << " ub_bytes " << ub;
      }
    }
  }
  expect_all_engines_match(add_layer_norm_silu(rows), in);
}

// Rows whose values reach +-2e38 on both sides of the pivot: x - pivot passes FLT_MAX, and the
// sum of the squares of (x - pivot) 2^-64 (the fused kernels' rescue scale before 2^-80) did
// too; LayerNorm and RMSNorm must still give the reference's values (the fused LayerNorm's output
// pass reads (x - pivot) / 2, which stays finite).
TEST(NormStatistics, RowsSpreadAcrossFloatsRangeStayFinite) {
  const int64_t rows = 3;
  Tensor x = Tensor::random(DType::f32, {rows, kCols}, 9);
  for (int64_t c = 0; c < kCols; c++) {
    const double u = x.get(2 * kCols + c);
    x.set(c, (c % 2 ? 2e38 : -2e38) * (1 + 0.1 * u));         // the pivot near -2e38
    x.set(kCols + c, (c % 2 ? 1e38 : 2e38) * (1 + 0.1 * u));  // all of one sign
  }
  std::map<std::string, Tensor> in = inputs_with(x);
  for (int64_t c = 0; c < 2 * kCols; c++) in["r"].set(c, 0);
  Graph g = add_layer_norm_silu(rows, true);
  for (const char* engine : {"eager", "cpp", "interpreter"}) {
    EXPECT_TRUE(testing::matches_reference(g, in, testing::engine_opts(engine))) << engine;
  }
}

// The same rows through LayerNorm's two-pass form (an input known only after a pass: here
// x + softmax(x) * 0, and a MatMul block: x I + x) and RMSNorm beside it, at 2e38 and at 1e37
// (x I + x must stay finite). 259 columns keep the identity small.
TEST(NormStatistics, RowsSpreadAcrossFloatsRangeInTheTwoPassForms) {
  constexpr int64_t n = 259;
  for (const bool block : {false, true}) {
    const double big = block ? 1e37 : 2e38;
    Tensor x = Tensor::random(DType::f32, {2, n}, 11);
    for (int64_t c = 0; c < n; c++) {
      const double u = x.get(n + c);
      x.set(c, (c % 2 ? big : -big) * (1 + 0.1 * u));
      x.set(n + c, big * (1 + 0.1 * u));
    }
    Tensor eye = Tensor::zeros(DType::f32, {n, n});
    for (int64_t i = 0; i < n; i++) eye.set(i * n + i, 1.0);
    GraphBuilder b;
    auto xi = b.input("x", DType::f32, {2, n});
    auto w = b.input("w", DType::f32, {n});
    auto bias = b.input("bias", DType::f32, {n});
    auto v = block
                 ? b.add(b.matmul(xi, b.constant(eye, "eye")), xi)
                 : b.add(xi, b.mul(b.softmax(xi), b.constant(Tensor::zeros(DType::f32, {1}), "z")));
    b.output("y", b.layer_norm(v, w, bias, 1e-5));
    b.output("rms", b.rms_norm(v, w, 1e-6));
    Graph g = b.build();
    const std::map<std::string, Tensor> in = {{"x", x},
                                              {"w", Tensor::random(DType::f32, {n}, 3, 0.5, 1.5)},
                                              {"bias", Tensor::random(DType::f32, {n}, 4)}};
    const CompiledModel m = compile(g, testing::engine_opts("cpp"));  // one kernel, both norms
    ASSERT_EQ(m.kernels().size(), 1u);
    EXPECT_EQ(m.kernels()[0].name,
              block ? "FusedMatMulAddLayerNormRMSNorm" : "FusedSoftmaxMulAddLayerNormRMSNorm");
    for (const char* engine : {"eager", "cpp", "interpreter"}) {
      EXPECT_TRUE(testing::matches_reference(g, in, testing::engine_opts(engine)))
          << engine << (block ? " (MatMul block)" : " (after softmax)");
    }
  }
}

}  // namespace
}  // namespace ubfuse
