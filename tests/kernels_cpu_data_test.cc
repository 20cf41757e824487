// Eager MatMul (oneDNN, prepacked weights), data movement (Reshape, Transpose, Expand, Slice,
// Concat, Gather) and Cast between every pair of dtypes, against the reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <thread>
#include <vector>

#include "hwy/targets.h"
#include "kernels/cpu/matmul_info.h"
#include "kernels/cpu/matmul_small.h"
#include "kernels/cpu/op_kernel.h"
#include "kernels/reference/reference.h"
#include "kernels_cpu_util.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse::kernels_test {

using testing::close_to_ref;
using testing::throws_with;

// ---------------------------------------------------------------------------------------------
// MatMul

struct MM {
  Sizes a, b;
};

TEST(KernelsCpu, MatMulShapesAndDtypes) {
  const std::vector<MM> cases = {
      {{3, 5}, {5, 7}},       {{1, 1}, {1, 1}},        {{64, 96}, {96, 33}},
      {{2, 3, 5}, {2, 5, 4}}, {{2, 3, 5}, {5, 4}},     {{2, 1, 3, 5}, {3, 5, 4}},
      {{5}, {5, 4}},          {{3, 5}, {5}},           {{5}, {5}},
      {{1, 3, 5}, {4, 5, 2}}, {{4, 17, 64}, {64, 48}},
  };
  uint64_t seed = 900;
  for (DType dt : kFloats) {
    for (const auto& c : cases) {
      Tensor a = Tensor::random(dt, c.a, seed++, -1, 1);
      Tensor bb = Tensor::random(dt, c.b, seed++, -1, 1);
      const int64_t K = c.a.back();
      EXPECT_TRUE(check_op(
          {a, bb}, [](GraphBuilder& b, std::vector<V>& v) { return b.matmul(v[0], v[1]); },
          1.0 + double(K) / 16.0))
          << dtype_name(dt) << " " << sizes_str(c.a) << " x " << sizes_str(c.b);
    }
  }
}

// Up to kSmallMatMulRows f32 rows run our own loop (matmul_small.h), more run oneDNN: both
// against the reference at every row count around the switch, odd K and N (vector tails), and
// a B large enough to be split over the pool.
TEST(KernelsCpu, MatMulWithFewRowsRunsItsOwnLoop) {
  uint64_t seed = 970;
  struct Case {
    int64_t K, N;
  };
  for (Case c : {Case{1, 1}, Case{3, 5}, Case{64, 16}, Case{64, 33}, Case{257, 100}, Case{17, 1031},
                 Case{512, 4096}}) {
    // B an input (not packed), as a decode step's attention has it.
    Tensor w = Tensor::random(DType::f32, {c.K, c.N}, seed++, -1, 1);
    GraphBuilder b;
    V x = b.input("x", DType::f32, {"m", c.K});
    V y = b.matmul(x, b.input("w", DType::f32, {c.K, c.N}));
    b.output("y", y);
    Graph g = b.build();
    const Node& n = *y->producer;
    auto k = cpu::make_op_kernel(n);
    for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), int64_t(4), int64_t(5), int64_t(7),
                      cpu::kSmallMatMulRows, cpu::kSmallMatMulRows + 1}) {
      SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(c.K) + " x " + std::to_string(c.N));
      const std::string impl = cpu::matmul_call_info(*k, {m, c.K}, {c.K, c.N}, DType::f32).impl;
      EXPECT_EQ(impl == "ubfuse:small_rows_f32",
                m <= 4 || (m <= cpu::kSmallMatMulRows && c.K * c.N <= (int64_t(1) << 18)))
          << impl;
      Tensor a = Tensor::random(DType::f32, {m, c.K}, seed++, -1, 1);
      auto want = ref::eval_node(n, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
      Tensor got(DType::f32, {m, c.N});
      std::vector<Tensor> outs{got};
      k->run({a, w}, outs, pool2());
      EXPECT_TRUE(close_to_ref(got, want, 1.0 + double(c.K) / 16.0));
    }
  }
  // Small batched products (a decode step's attention scores in eager mode) loop per matrix,
  // batch dims broadcast either way.
  {
    GraphBuilder b;
    V x = b.input("x", DType::f32, {2, 3, 1, 16});
    V y = b.matmul(x, b.input("w", DType::f32, {2, 3, 16, 7}));
    b.output("y", y);
    Graph g = b.build();
    auto k = cpu::make_op_kernel(*y->producer);
    EXPECT_EQ(cpu::matmul_call_info(*k, {2, 3, 1, 16}, {2, 3, 16, 7}, DType::f32).impl,
              "ubfuse:small_rows_f32");
  }
  for (MM c : {MM{{2, 3, 1, 16}, {2, 3, 16, 7}}, MM{{1, 3, 2, 16}, {2, 1, 16, 5}},
               MM{{4, 2, 8}, {4, 8, 9}}, MM{{2, 1, 3, 33}, {3, 33, 17}}}) {
    EXPECT_TRUE(check_op(
        {Tensor::random(DType::f32, c.a, seed++), Tensor::random(DType::f32, c.b, seed++)},
        [](GraphBuilder& b, std::vector<V>& v) { return b.matmul(v[0], v[1]); }, 4.0))
        << sizes_str(c.a) << " x " << sizes_str(c.b);
  }
  // A batched A folds into the rows: [2, 3, K] is 6 rows.
  EXPECT_TRUE(check_op(
      {Tensor::random(DType::f32, {2, 3, 40}, 5), Tensor::random(DType::f32, {40, 24}, 6)},
      [](GraphBuilder& b, std::vector<V>& v) { return b.matmul(v[0], v[1]); }, 4.0));
}

// Constant weights that oneDNN packs in 64-column panels (as it does on AVX-512) are read by our
// own loop for few rows (panel_matmul_applies): K and N off the 16 and 64 blocks, every row count
// up to kPanelMatMulRows + 1, and for a B past kPanelLargeB rows around kPanelMatMulRowsLargeB,
// from three threads at once.
TEST(KernelsCpu, MatMulReadsPackedPanelsForFewRows) {
  uint64_t seed = 1200;
  struct Case {
    int64_t K, N;
  };
  bool any_panels = false;
  for (Case c :
       {Case{1, 1}, Case{17, 63}, Case{64, 64}, Case{100, 130}, Case{768, 200}, Case{513, 1023}}) {
    const bool large = c.K * c.N >= cpu::kPanelLargeB;
    std::vector<int64_t> rows;
    for (int64_t m = 1; m <= cpu::kPanelMatMulRows + 1; m++) rows.push_back(m);
    if (large) {
      rows = {1, 7, 32, 33, 70, 131, cpu::kPanelMatMulRowsLargeB, cpu::kPanelMatMulRowsLargeB + 1};
    }
    Tensor w = Tensor::random(DType::f32, {c.K, c.N}, seed++, -1, 1);
    GraphBuilder b;
    V x = b.input("x", DType::f32, {"m", c.K});
    V y = b.matmul(x, b.constant(w, "w"));
    b.output("y", y);
    Graph g = b.build();
    auto k = cpu::make_op_kernel(*y->producer);
    const bool panels =
        cpu::matmul_call_info(*k, {1, c.K}, {c.K, c.N}, DType::f32).impl == "ubfuse:panels_f32";
    any_panels = any_panels || panels;
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < 3; ++t) {
      ts.emplace_back([&, t] {
        for (size_t i = size_t(t); i < rows.size(); i += 3) {
          const int64_t m = rows[i];
          const std::string impl = cpu::matmul_call_info(*k, {m, c.K}, {c.K, c.N}, DType::f32).impl;
          const bool applies = cpu::panel_matmul_applies(m, c.K, c.N);
          EXPECT_EQ(applies, m <= (large ? cpu::kPanelMatMulRowsLargeB : cpu::kPanelMatMulRows));
          if (panels != (impl == "ubfuse:panels_f32") && applies) bad++;
          if (!applies && impl == "ubfuse:panels_f32") bad++;
          Tensor a = Tensor::random(DType::f32, {m, c.K}, uint64_t(m) * 31 + 7, -1, 1);
          auto want =
              ref::eval_node(*y->producer, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
          Tensor got(DType::f32, {m, c.N});
          std::vector<Tensor> outs{got};
          k->run({a, w}, outs, pool2());
          if (!close_to_ref(got, want, 1.0 + double(c.K) / 16.0)) bad++;
        }
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_EQ(bad.load(), 0) << c.K << " x " << c.N;
  }
  if (!any_panels) std::cout << "(oneDNN does not pack f32 weights in panels on this CPU)\n";
}

// ubfuse's own 16-column panels (own_panel_matmul_f32), on Highway's AVX2 target (the one that
// runs them) and on the others this CPU has, where the build generated them (the sanitizer builds
// compile only -march=native's): K past and off the 256-row slices, N off the panels
// and the groups of four, every row count of one to three passes and larger ones, on 1-3 threads;
// every element against a double product.
TEST(KernelsCpu, OwnPanelsMatchADoubleProduct) {
  ThreadPool pool1(1), pool3(3);
  uint64_t seed = 1250;
  struct Case {
    int64_t K, N;
  };
  for (int64_t target : {int64_t(HWY_AVX2), int64_t(HWY_AVX3), int64_t(0)}) {
    if (target != 0 && (hwy::SupportedTargets() & HWY_TARGETS & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(target ? hwy::TargetName(target) : "best target");
    if (target == HWY_AVX2) {
      EXPECT_TRUE(cpu::own_panels_fit());
    }
    for (Case c :
         {Case{1, 1}, Case{17, 15}, Case{256, 16}, Case{257, 17}, Case{300, 100}, Case{600, 130}}) {
      const Tensor at = Tensor::random(DType::f32, {70, c.K}, seed++, -1, 1);
      const Tensor bt = Tensor::random(DType::f32, {c.K, c.N}, seed++, -1, 1);
      const float* a = at.data_as<float>();
      const float* b = bt.data_as<float>();
      std::vector<float> panels(size_t(cpu::own_panels_floats(c.K, c.N)), -1.0f);
      cpu::pack_own_panels_f32(b, c.K, c.N, panels.data());
      for (int64_t m : {1, 2, 3, 5, 6, 7, 8, 9, 12, 13, 19, 70}) {
        for (ThreadPool* pool : {&pool1, &pool2(), &pool3}) {
          std::vector<float> got(size_t(m * c.N), std::nanf(""));
          cpu::own_panel_matmul_f32(a, panels.data(), got.data(), m, c.K, c.N, *pool);
          int bad = 0;
          for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < c.N; j++) {
              double want = 0, mag = 0;
              for (int64_t k = 0; k < c.K; k++) {
                const double t = double(a[i * c.K + k]) * b[k * c.N + j];
                want += t;
                mag += std::fabs(t);
              }
              const double err = std::fabs(got[size_t(i * c.N + j)] - want);
              if (!(err <= 1e-7 * double(c.K) * mag + 1e-30)) bad++;
            }
          }
          EXPECT_EQ(bad, 0) << c.K << " x " << c.N << ", " << m << " rows, " << pool->size()
                            << " threads";
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// Where oneDNN's f32 kernel copies B into its panels inside every call (gemm:jit: CPUs without
// AVX-512), a MatMul by constant f32 weights packs them once in ubfuse's own panels and runs them
// from 2 to kOwnPanelMaxRows rows (one row: the small loop; past the limit: oneDNN on B as
// given), from three threads at once.
TEST(KernelsCpu, MatMulRunsOwnPanelsWhereOneDnnRepacks) {
  uint64_t seed = 1270;
  int own = 0;
  struct Case {
    int64_t K, N;
  };
  for (Case c : {Case{300, 100}, Case{64, 1000}, Case{768, 200}}) {
    const int64_t K = c.K, N = c.N;  // plain locals: lambdas below capture them (clang 14)
    Tensor w = Tensor::random(DType::f32, {K, N}, seed++, -1, 1);
    GraphBuilder b;
    V x = b.input("x", DType::f32, {"m", K});
    V y = b.matmul(x, b.constant(w, "w"));
    b.output("y", y);
    Graph g = b.build();
    auto k = cpu::make_op_kernel(*y->producer);
    const std::vector<int64_t> rows = {
        1, 2, 6, 7, 16, 100, cpu::kOwnPanelMaxRows, cpu::kOwnPanelMaxRows + 1};
    std::vector<std::thread> ts;
    std::atomic<int> bad{0}, runs_own{0};
    for (int t = 0; t < 3; ++t) {
      ts.emplace_back([&, t] {
        for (size_t i = size_t(t); i < rows.size(); i += 3) {
          const int64_t m = rows[i];
          const std::string impl = cpu::matmul_call_info(*k, {m, K}, {K, N}, DType::f32).impl;
          if (impl == "ubfuse:own_panels_f32") {
            runs_own++;
            if (m < 2 || m > cpu::kOwnPanelMaxRows) bad++;
          }
          Tensor a = Tensor::random(DType::f32, {m, K}, uint64_t(m) * 13 + 5, -1, 1);
          auto want =
              ref::eval_node(*y->producer, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
          Tensor got(DType::f32, {m, N});
          std::vector<Tensor> outs{got};
          k->run({a, w}, outs, pool2());
          if (!close_to_ref(got, want, 1.0 + double(K) / 16.0)) bad++;
        }
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_EQ(bad.load(), 0) << K << " x " << N;
    // All of the rows up to the limit, or none (oneDNN packs B once on this CPU).
    EXPECT_TRUE(runs_own == 0 || runs_own == int(rows.size()) - 2) << runs_own;
    own += runs_own;
  }
  if (own == 0) std::cout << "(oneDNN packs f32 weights once on this CPU: no own panels)\n";
}

// Past the rows panel_matmul_applies takes, products of constant f32 weights run split over the
// pool: by runs
// of panels (B of 10 and 16 panels at these sizes) or by runs of rows (4 panels, and [301,768] x
// [768,768], past the column split's size), on pools of 2 and 3 threads (uneven runs of panels and
// rows; a tail of 1-4 rows past whole 16-row blocks per part on the panel loop), each part on
// oneDNN's JIT kernel; every element against the double reference.
TEST(KernelsCpu, MatMulSplitsPackedProductsOverThePool) {
  uint64_t seed = 1300;
  ThreadPool pool3(3);
  struct Case {
    int64_t K, N;
  };
  int split = 0, rows = 0, columns = 0;
  for (Case c : {Case{100, 200}, Case{300, 600}, Case{64, 1000}, Case{768, 768}}) {
    Tensor w = Tensor::random(DType::f32, {c.K, c.N}, seed++, -1, 1);
    GraphBuilder b;
    V x = b.input("x", DType::f32, {"m", c.K});
    V y = b.matmul(x, b.constant(w, "w"));
    b.output("y", y);
    Graph g = b.build();
    auto k = cpu::make_op_kernel(*y->producer);
    for (ThreadPool* pool : {&pool2(), &pool3}) {
      // 196, 257 and 289 rows by rows: 1-4 rows past parts of whole 16-row blocks, which the
      // panel loop takes after oneDNN's parts.
      for (int64_t m : {33, 77, 128, 196, 257, 289, 301}) {
        const std::string impl =
            cpu::matmul_call_info(*k, {m, c.K}, {c.K, c.N}, DType::f32, pool->size()).impl;
        if (impl.find(" split by ") != std::string::npos) {
          split++;
          rows += impl.find(" split by rows over ") != std::string::npos;
          columns += impl.find(" split by columns over ") != std::string::npos;
          EXPECT_NE(impl.find(std::to_string(pool->size()) + " threads"), std::string::npos);
        }
        Tensor a = Tensor::random(DType::f32, {m, c.K}, uint64_t(m) * 17 + 3, -1, 1);
        auto want = ref::eval_node(*y->producer, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
        Tensor got(DType::f32, {m, c.N});
        std::vector<Tensor> outs{got};
        k->run({a, w}, outs, *pool);
        EXPECT_TRUE(close_to_ref(got, want, 1.0 + double(c.K) / 16.0))
            << c.K << " x " << c.N << ", " << m << " rows, " << pool->size() << " threads, "
            << impl;
      }
    }
  }
  if (split == 0) {
    std::cout << "(oneDNN does not pack f32 weights in panels on this CPU)\n";
  } else {
    EXPECT_EQ(rows + columns, split);
    EXPECT_GT(rows, 0);
    EXPECT_GT(columns, 0);
  }
}

// Threads split K and add their parts in the order of the parts: a result does not depend on
// which thread finished first (three threads, so two parts are added after the first).
TEST(KernelsCpu, MatMulWithFewRowsAddsThreadPartsInOrder) {
  Tensor w = Tensor::random(DType::f32, {1001, 300}, 990, -1, 1);
  GraphBuilder b;
  V x = b.input("x", DType::f32, {3, 1001});
  V y = b.matmul(x, b.constant(w, "w"));
  b.output("y", y);
  Graph g = b.build();
  auto k = cpu::make_op_kernel(*y->producer);
  Tensor a = Tensor::random(DType::f32, {3, 1001}, 991, -1, 1);
  auto want = ref::eval_node(*y->producer, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
  ThreadPool& pool3 = ThreadPool::with_threads(3);
  Tensor first(DType::f32, {3, 300});
  std::vector<Tensor> outs{first};
  k->run({a, w}, outs, pool3);
  EXPECT_TRUE(close_to_ref(first, want, 64.0));
  for (int rep = 0; rep < 20; rep++) {
    Tensor again(DType::f32, {3, 300});
    std::vector<Tensor> o{again};
    k->run({a, w}, o, pool3);
    ASSERT_EQ(std::memcmp(again.data(), first.data(), first.nbytes()), 0) << rep;
  }
}

TEST(KernelsCpu, MatMulConstantWeightsArePrepacked) {
  uint64_t seed = 950;
  for (DType dt : kFloats) {
    Tensor w = Tensor::random(dt, {256, 320}, seed++, -1, 1);
    // One kernel (weights packed once), run at several M, from several threads at once.
    GraphBuilder b;
    V x = b.input("x", dt, {"m", 256});
    V y = b.matmul(x, b.constant(w, "w"));
    b.output("y", y);
    Graph g = b.build();
    const Node& n = *y->producer;
    auto k = cpu::make_op_kernel(n);
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < 3; ++t) {
      ts.emplace_back([&, t] {
        for (int64_t m : {1, 7, 64, 300}) {
          Tensor a = Tensor::random(dt, {m, 256}, uint64_t(1000 + t * 10 + m), -1, 1);
          auto want = ref::eval_node(n, {ref::from_tensor(a), ref::from_tensor(w)}).at(0);
          Tensor got(dt, {m, 320});
          std::vector<Tensor> outs{got};
          k->run({a, w}, outs, pool2());
          if (!close_to_ref(got, want, 17.0)) bad++;
        }
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_EQ(bad.load(), 0) << dtype_name(dt);
  }
}

// ---------------------------------------------------------------------------------------------
// Data movement, gather, cast

TEST(KernelsCpu, ReshapeTransposeExpand) {
  uint64_t seed = 1100;
  for (DType dt : {DType::f32, DType::bf16, DType::i64, DType::boolean}) {
    Tensor x = Tensor::random(dt, {2, 3, 4, 5}, seed++, -5, 5);
    EXPECT_TRUE(check_op({x}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.reshape(v[0], {6, -1});
    }));
    for (std::vector<int64_t> perm : std::vector<std::vector<int64_t>>{
             {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {0, 1, 3, 2}, {2, 0, 3, 1}, {1, 0, 2, 3}}) {
      EXPECT_TRUE(check_op(
          {x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.transpose(v[0], perm); }))
          << dtype_name(dt) << " perm " << sizes_str(perm);
    }
    Tensor big = Tensor::random(dt, {67, 130, 3}, seed++, -5, 5);
    EXPECT_TRUE(check_op({big}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.transpose(v[0], {1, 0, 2});
    }));
    EXPECT_TRUE(check_op({big}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.transpose(v[0], {2, 1, 0});
    }));
    Tensor col = Tensor::random(dt, {3, 1}, seed++, -5, 5);
    EXPECT_TRUE(check_op({col}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.expand(v[0], {2, 3, 4097});
    }));
    Tensor row = Tensor::random(dt, {1, 5}, seed++, -5, 5);
    EXPECT_TRUE(check_op({row}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.expand(v[0], {4, 1, 5});
    }));
  }
  // Large blocked transpose (threaded).
  Tensor m = Tensor::random(DType::f32, {1000, 777}, 5, -1, 1);
  EXPECT_TRUE(check_op({m}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.transpose(v[0], {1, 0});
  }));
}

// ConstantOfShape fills whole parts of the pool's split by doubling copies: every element of
// every dtype's fill, at sizes that split unevenly and at one element.
TEST(KernelsCpu, ConstantOfShapeFillsEveryElement) {
  const std::vector<std::pair<DType, float>> fills = {
      {DType::f32, -0.75f}, {DType::i64, 123456789.0f}, {DType::bf16, 3.5f},
      {DType::i8, -7.0f},   {DType::boolean, 1.0f},     {DType::i32, -5.0f}};
  for (const Sizes& s : {Sizes{1}, Sizes{3, 1, 100003}, Sizes{2, 7}}) {
    // The shape as a graph input: a constant one would fold the op away.
    std::vector<float> dims(s.begin(), s.end());
    Tensor shape = Tensor::from_floats(DType::i64, {int64_t(s.size())}, dims);
    for (auto [dt, value] : fills) {
      Tensor fill = Tensor::from_floats(dt, {1}, {value});
      EXPECT_TRUE(check_op(
          {shape},
          [&](GraphBuilder& b, std::vector<V>& v) { return b.constant_of_shape(v[0], fill); }))
          << dtype_name(dt) << " " << sizes_str(s);
    }
  }
}

TEST(KernelsCpu, SliceStepsAndClamping) {
  Tensor x = Tensor::random(DType::f32, {6, 7, 9}, 31, -5, 5);
  struct S {
    std::vector<int64_t> st, en, ax, sp;
  };
  const std::vector<S> cases = {
      {{1}, {4}, {0}, {}},
      {{0, 2}, {6, 100}, {0, 2}, {2, 3}},
      {{-1}, {-100}, {1}, {-1}},   // reverse a whole dim
      {{5}, {1}, {2}, {-2}},       // reversed with step
      {{-3}, {1000}, {-1}, {1}},   // negative start, clamped end
      {{3}, {3}, {0}, {1}},        // empty
      {{100}, {-100}, {0}, {-3}},  // clamped start, reversed
      {{0, 0, 0}, {1, 1, 1}, {0, 1, 2}, {}},
  };
  for (DType dt : {DType::f32, DType::f16, DType::i32}) {
    Tensor xt = Tensor::random(dt, {6, 7, 9}, 32, -5, 5);
    for (const auto& c : cases) {
      EXPECT_TRUE(
          check_op({xt}, [&](GraphBuilder& b,
                             std::vector<V>& v) { return b.slice(v[0], c.st, c.en, c.ax, c.sp); }))
          << sizes_str(c.st) << " " << sizes_str(c.en) << " " << sizes_str(c.ax) << " "
          << sizes_str(c.sp);
    }
  }
}

TEST(KernelsCpu, Concat) {
  for (DType dt : {DType::f32, DType::bf16, DType::i64}) {
    Tensor a = Tensor::random(dt, {2, 3, 4}, 41, -5, 5);
    Tensor b2 = Tensor::random(dt, {2, 1, 4}, 42, -5, 5);
    Tensor c = Tensor::random(dt, {2, 5, 4}, 43, -5, 5);
    EXPECT_TRUE(check_op({a, b2, c}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.concat({v[0], v[1], v[2]}, 1);
    }));
    EXPECT_TRUE(check_op({a, a}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.concat({v[0], v[1]}, 0);
    }));
    EXPECT_TRUE(check_op({a, a}, [](GraphBuilder& b, std::vector<V>& v) {
      return b.concat({v[0], v[1]}, -1);
    }));
  }
  Tensor big = Tensor::random(DType::f32, {300, 4097}, 44, -1, 1);
  EXPECT_TRUE(check_op({big, big}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.concat({v[0], v[1]}, 1);
  }));
}

TEST(KernelsCpu, Gather) {
  Tensor data = Tensor::random(DType::f32, {5, 4, 3}, 51, -5, 5);
  Tensor idx = Tensor::from_floats(DType::i64, {2, 3}, {0, 4, -1, 2, -5, 3});
  Tensor idx32 = Tensor::from_floats(DType::i32, {4}, {3, 0, -2, 1});
  EXPECT_TRUE(check_op({data, idx},
                       [](GraphBuilder& b, std::vector<V>& v) { return b.gather(v[0], v[1], 0); }));
  EXPECT_TRUE(check_op({data, idx32},
                       [](GraphBuilder& b, std::vector<V>& v) { return b.gather(v[0], v[1], 1); }));
  Tensor idx_last = Tensor::from_floats(DType::i32, {4}, {2, 0, -3, 1});
  EXPECT_TRUE(check_op({data, idx_last}, [](GraphBuilder& b, std::vector<V>& v) {
    return b.gather(v[0], v[1], -1);
  }));
  Tensor emb = Tensor::random(DType::bf16, {1000, 512}, 52, -1, 1);
  Tensor tok = Tensor::random(DType::i64, {64, 33}, 53, 0, 1000);
  EXPECT_TRUE(check_op({emb, tok},
                       [](GraphBuilder& b, std::vector<V>& v) { return b.gather(v[0], v[1], 0); }));
}

TEST(KernelsCpu, GatherOutOfRangeNamesNodeAndIndex) {
  GraphBuilder b;
  V d = b.input("d", DType::f32, {5, 3});
  V i = b.input("i", DType::i64, {2});
  V y = b.gather(d, i, 0);
  b.name_last("embed");
  b.output("y", y);
  Graph g = b.build();
  Tensor td = Tensor::random(DType::f32, {5, 3}, 1, -1, 1);
  Tensor ti = Tensor::from_floats(DType::i64, {2}, {1, 7});
  Tensor out(DType::f32, {2, 3});
  std::vector<Tensor> outs{out};
  auto k = cpu::make_op_kernel(*y->producer);
  EXPECT_TRUE(throws_with(
      [&] {
        k->run({td, ti}, outs, pool2());
      },
      {"embed", "Gather", "index 7", "size 5"}));
  Tensor tn = Tensor::from_floats(DType::i64, {2}, {-6, 0});
  EXPECT_TRUE(throws_with([&] { k->run({td, tn}, outs, pool2()); }, {"embed", "index -6"}));
}

void cast_all_pairs() {
  const std::vector<DType> all = {DType::f32, DType::bf16, DType::f16,
                                  DType::i64, DType::i32,  DType::boolean};
  std::vector<float> vals;
  for (int i = 0; i < 4097; ++i) {
    const float v = float((i % 41) - 20) * 0.37f;  // fractions, negatives, zeros
    vals.push_back(v);
  }
  for (DType from : all) {
    Tensor x = Tensor::from_floats(from, {4097}, vals);
    for (DType to : all) {
      EXPECT_TRUE(
          check_op({x}, [&](GraphBuilder& b, std::vector<V>& v) { return b.cast(v[0], to); }))
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
  // bf16 rounds to nearest even (not truncation), f16 too; float -> bool is != 0.
  Tensor f = Tensor::from_floats(DType::f32, {4}, {1.00390625f, 1.01171875f, 0.0f, -0.0f});
  GraphBuilder b;
  V in = b.input("x", DType::f32, {4});
  V yb = b.cast(in, DType::bf16);
  V yo = b.cast(in, DType::boolean);
  b.output("yb", yb);
  b.output("yo", yo);
  Graph g = b.build();
  Tensor ob(DType::bf16, {4}), oo(DType::boolean, {4});
  std::vector<Tensor> o1{ob}, o2{oo};
  cpu::make_op_kernel(*yb->producer)->run({f}, o1, pool2());
  cpu::make_op_kernel(*yo->producer)->run({f}, o2, pool2());
  EXPECT_EQ(ob.data_as<uint16_t>()[0], 0x3f80);  // 1 + 2^-8: tie -> even (1.0)
  EXPECT_EQ(ob.data_as<uint16_t>()[1], 0x3f82);  // 1 + 3*2^-8: tie -> even (1 + 2^-6)
  EXPECT_EQ(oo.data_as<uint8_t>()[0], 1);
  EXPECT_EQ(oo.data_as<uint8_t>()[2], 0);
  EXPECT_EQ(oo.data_as<uint8_t>()[3], 0);
}

}  // namespace ubfuse::kernels_test
