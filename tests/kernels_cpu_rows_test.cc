// Eager row ops (LayerNorm, RMSNorm, Softmax, last-axis reductions) against the reference, and
// their pipelined row loops giving each row exactly what it gives alone, at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/cpu/op_kernel.h"
#include "kernels/reference/reference.h"
#include "kernels_cpu_util.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse::kernels_test {

// ---------------------------------------------------------------------------------------------
// Row ops

const std::vector<Sizes> kRowSizes = {{1}, {3}, {4097}, {3, 1}, {3, 4097}, {2, 3, 17}, {64, 1000}};

void norms_softmax_reductions() {
  uint64_t seed = 700;
  for (DType dt : kFloats) {
    for (const Sizes& s : kRowSizes) {
      const int64_t c = s.back();
      Tensor x = Tensor::random(dt, s, seed++, -3, 3);
      Tensor w = Tensor::random(dt, {c}, seed++, 0.5, 1.5);
      Tensor bias = Tensor::random(dt, {c}, seed++, -1, 1);
      auto ctx = std::string(dtype_name(dt)) + " " + sizes_str(s);
      EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], nullptr, nullptr, 1e-5);
      })) << ctx;
      EXPECT_TRUE(check_op({x, w}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], v[1], nullptr, 1e-5);
      })) << ctx;
      EXPECT_TRUE(check_op({x, w, bias}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], v[1], v[2], 1e-3);
      })) << ctx;
      EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.rms_norm(v[0], nullptr, 1e-6);
      })) << ctx;
      EXPECT_TRUE(check_op({x, w}, [](GraphBuilder& b, std::vector<V>& v) {
        return b.rms_norm(v[0], v[1], 1e-6);
      })) << ctx;
      EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }))
          << ctx;
      for (bool keep : {true, false}) {
        // Sums of many bf16/f16 values: the output rounding dominates, scale the tolerance.
        const double sc = dt == DType::f32 ? 1.0 + double(c) / 1000.0 : 1.0;
        EXPECT_TRUE(check_op(
            {x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.reduce_sum(v[0], keep); }, sc))
            << ctx;
        EXPECT_TRUE(check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) {
          return b.reduce_mean(v[0], keep);
        })) << ctx;
        EXPECT_TRUE(check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) {
          return b.reduce_max(v[0], keep);
        })) << ctx;
      }
    }
  }
}

TEST(KernelsCpu, RowOpsNumericallySane) {
  // Large common offset, tiny spread: a one-pass E[x^2] - E[x]^2 variance would lose everything.
  Sizes s{4, 4096};
  Tensor x = Tensor::random(DType::f32, s, 77, 1000.0, 1000.01);
  EXPECT_TRUE(check_op(
      {x},
      [](GraphBuilder& b, std::vector<V>& v) {
        return b.layer_norm(v[0], nullptr, nullptr, 1e-12);
      },
      2.0));
  // Softmax of large logits: exp would overflow without the max subtraction.
  Tensor big = Tensor::random(DType::f32, s, 78, 500, 1000);
  EXPECT_TRUE(check_op({big}, [](GraphBuilder& b, std::vector<V>& v) { return b.softmax(v[0]); }));
}

// Runs the row op f on x ([rows, cols] f32) and on each row alone: the pipelined row loops
// (Softmax: three rows' passes in one loop; LayerNorm and RMSNorm: two rows' output passes with
// the next two rows' statistics) must give each row exactly what it gives alone. Returns the
// output of the whole tensor.
Tensor expect_rows_as_alone(const std::function<V(GraphBuilder&, V)>& f, const Tensor& x) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  Tensor all = run_eager_op(f, x);
  const float* p = x.data_as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    Tensor alone =
        run_eager_op(f, Tensor::from_floats(DType::f32, {1, cols},
                                            std::vector<float>(p + r * cols, p + (r + 1) * cols)));
    for (int64_t c = 0; c < cols; ++c) {
      const float a = all.data_as<float>()[r * cols + c], e = alone.data_as<float>()[c];
      EXPECT_TRUE(a == e || (std::isnan(a) && std::isnan(e))) << "row " << r << " col " << c;
    }
  }
  return all;
}

TEST(KernelsCpu, SoftmaxRowsStayIndependent) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t rows = 6, cols = 37;
  Tensor x = Tensor::random(DType::f32, {rows, cols}, 62, -3, 3);
  float* p = x.data_as<float>();
  p[1 * cols + 5] = std::nanf("");
  for (int64_t c = 0; c < cols; ++c) p[2 * cols + c] = -inf;
  p[3 * cols + 36] = inf;
  p[4 * cols + 0] = -inf;
  p[5 * cols + 20] = -1e4f;  // an attention mask's value: out of exp's short range, so the row
                             // takes the range-tested exp (softmax.cc)
  Tensor out = expect_rows_as_alone([](GraphBuilder& b, V v) { return b.softmax(v); }, x);
  const float* o = out.data_as<float>();
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_TRUE(std::isnan(o[1 * cols + c])) << c;  // the NaN row
    EXPECT_TRUE(std::isnan(o[2 * cols + c])) << c;  // all -inf: 0 / 0, as in PyTorch
    EXPECT_TRUE(std::isnan(o[3 * cols + c])) << c;  // +inf: inf - inf, and the sum spreads it
  }
  EXPECT_EQ(o[4 * cols + 0], 0.0f);
  EXPECT_EQ(o[5 * cols + 20], 0.0f);
  for (int64_t r : {0, 4, 5}) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += o[r * cols + c];
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << r;
  }
}

// Rows whose squares overflow f32 are normalized alone at a rescaled size: one among the rows the
// pipelined loop computes statistics for (row 5), one in the last group (row 8), a NaN row
// (row 2), next to ordinary rows.
TEST(KernelsCpu, NormRowsStayIndependent) {
  const int64_t rows = 9, cols = 1031;
  Tensor x = Tensor::random(DType::f32, {rows, cols}, 63, -3, 3);
  float* p = x.data_as<float>();
  for (int64_t c = 0; c < cols; ++c) p[5 * cols + c] *= 1e25f;
  p[8 * cols + 7] = 3e38f;
  p[2 * cols + 9] = std::nanf("");
  Tensor w = Tensor::random(DType::f32, {cols}, 64, 0.5, 1.5);
  Tensor bias = Tensor::random(DType::f32, {cols}, 65, -1, 1);
  Tensor ln = expect_rows_as_alone(
      [&](GraphBuilder& b, V v) {
        return b.layer_norm(v, b.constant(w, "w"), b.constant(bias, "b"), 1e-5);
      },
      x);
  expect_rows_as_alone([&](GraphBuilder& b, V v) { return b.rms_norm(v, b.constant(w, "w")); }, x);
  EXPECT_TRUE(std::isfinite(ln.data_as<float>()[5 * cols]));  // rescaled, not overflowed
  EXPECT_TRUE(std::isnan(ln.data_as<float>()[2 * cols]));
  EXPECT_TRUE(std::isfinite(ln.data_as<float>()[3 * cols]));
}

// One thread and several threads give identical results (chunking never changes the math of
// elementwise ops and rows are never split).
TEST(KernelsCpu, ThreadCountDoesNotChangeResults) {
  ThreadPool one(1), three(3);
  Tensor x = Tensor::random(DType::f32, {300, 1000}, 61, -3, 3);
  for (int op = 0; op < 3; ++op) {
    GraphBuilder b;
    V in = b.input("x", DType::f32, {300, 1000});
    V y = op == 0 ? b.gelu(in) : op == 1 ? b.softmax(in) : b.layer_norm(in, nullptr, nullptr);
    b.output("y", y);
    Graph g = b.build();
    auto k = cpu::make_op_kernel(*y->producer);
    Tensor o1(DType::f32, {300, 1000}), o3(DType::f32, {300, 1000});
    std::vector<Tensor> v1{o1}, v3{o3};
    k->run({x}, v1, one);
    k->run({x}, v3, three);
    EXPECT_EQ(std::memcmp(o1.data(), o3.data(), o1.nbytes()), 0) << op;
  }
}

}  // namespace ubfuse::kernels_test
