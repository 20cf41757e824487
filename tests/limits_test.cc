// Resource limits and IEEE special values:
// * memory_limit: a static model (or a ge.dynamic_dims gear) whose planned memory exceeds the
//   limit fails at compile(), a symbolic model at run() for the first too-big shape, both with a
//   message giving the need and the limit; the limit is inclusive. A tensor larger than the
//   machine's memory is an error naming its sizes.
// * NaN and Inf inputs pass through with IEEE semantics in eager and graph mode and never hang.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <mutex>
#include <regex>
#include <thread>

#include "test_util.h"

namespace ubfuse {
namespace {

using testing::throws_with;

using testing::kInf;
using testing::kNaN;

Graph seed_block_no_affine(Shape s) {
  GraphBuilder b;
  auto x = b.input("x", f32, s);
  auto r = b.input("residual", f32, s);
  b.output("y", b.silu(b.layer_norm(b.add(x, r), nullptr, nullptr)));
  return b.build();
}

std::vector<Options> all_modes() {
  return {{{"ge.exec.enableOperatorFusion", "0"}},
          {{"ge.exec.enableOperatorFusion", "1"}},
          {{"ge.exec.enableOperatorFusion", "1"}, {"codegen", "interpreter"}}};
}

std::string mode_name(const Options& o) {
  if (o.at("ge.exec.enableOperatorFusion") == "0") return "eager";
  return o.count("codegen") ? "graph-interpreter" : "graph";
}

// The bytes in "planned memory N bytes", or -1.
int64_t planned_bytes(const std::string& msg) {
  std::smatch m;
  if (!std::regex_search(msg, m, std::regex("planned memory ([0-9]+) bytes"))) return -1;
  return std::stoll(m[1]);
}

std::string compile_error(const Graph& g, const Options& o) {
  try {
    compile(g, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryLimit, StaticModelOverTheLimitFailsAtCompile) {
  Graph g = seed_block_no_affine({512, 1024});  // every tensor is 2 MiB
  const int64_t out_bytes = 512 * 1024 * 4;
  for (auto opts : all_modes()) {
    SCOPED_TRACE(mode_name(opts));
    opts["memory_limit"] = "1048576";
    std::string msg = compile_error(g, opts);
    ASSERT_NE(msg, "") << "compile() accepted a model over memory_limit";
    EXPECT_NE(msg.find("exceeds memory_limit 1048576 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hint: raise memory_limit"), std::string::npos) << msg;
    int64_t need = planned_bytes(msg);
    EXPECT_GE(need, out_bytes) << msg;  // at least the output itself
    // The limit is inclusive: exactly the need compiles and runs, one byte less does not.
    opts["memory_limit"] = std::to_string(need);
    CompiledModel m = compile(g, opts);
    auto y = m.run({{"x", Tensor::random(f32, {512, 1024}, 1)},
                    {"residual", Tensor::random(f32, {512, 1024}, 2)}});
    EXPECT_EQ(y.at("y").sizes(), (Sizes{512, 1024}));
    opts["memory_limit"] = std::to_string(need - 1);
    EXPECT_EQ(planned_bytes(compile_error(g, opts)), need);
  }
}

TEST(MemoryLimit, FusionLowersTheNeed) {
  // Eager keeps x+residual and layer_norm's output in memory; the fused kernel keeps neither.
  Graph g = seed_block_no_affine({512, 1024});
  int64_t eager = planned_bytes(
      compile_error(g, {{"ge.exec.enableOperatorFusion", "0"}, {"memory_limit", "1"}}));
  int64_t fused = planned_bytes(
      compile_error(g, {{"ge.exec.enableOperatorFusion", "1"}, {"memory_limit", "1"}}));
  EXPECT_EQ(fused, 512 * 1024 * 4);
  EXPECT_GT(eager, fused);
}

TEST(MemoryLimit, SymbolicModelFailsAtRunForTooBigShape) {
  Graph g = seed_block_no_affine({"batch", 1024});
  for (auto opts : all_modes()) {
    SCOPED_TRACE(mode_name(opts));
    opts["memory_limit"] = std::to_string(64 * 1024 * 4 * 3);  // room for about 64 rows
    CompiledModel m = compile(g, opts);                        // nothing to plan yet: compiles
    auto in = [](int64_t rows) {
      return std::map<std::string, Tensor>{{"x", Tensor::random(f32, {rows, 1024}, 1)},
                                           {"residual", Tensor::random(f32, {rows, 1024}, 2)}};
    };
    EXPECT_EQ(m.run(in(16)).at("y").sizes(), (Sizes{16, 1024}));
    EXPECT_TRUE(throws_with([&] { m.run(in(4096)); },
                            {"planned memory", "exceeds memory_limit 786432 bytes for this shape",
                             "hint: raise memory_limit or use smaller shapes"}));
    // The failure leaves the model usable, and is not cached as a plan.
    EXPECT_EQ(m.run(in(3)).at("y").sizes(), (Sizes{3, 1024}));
    EXPECT_THROW(m.run(in(4096)), Error);
  }
}

TEST(MemoryLimit, GearOverTheLimitFailsAtCompile) {
  Graph g = seed_block_no_affine({"batch", 1024});
  Options o = {{"ge.exec.enableOperatorFusion", "1"},
               {"ge.dynamic_dims", "1;8;4096"},
               {"memory_limit", "1000000"}};
  EXPECT_TRUE(throws_with(
      [&] { compile(g, o); },
      {"planned memory 16777216 bytes", "exceeds memory_limit 1000000 bytes", "for this shape"}));
  o["ge.dynamic_dims"] = "1;8";
  EXPECT_NO_THROW(compile(g, o));
}

TEST(MemoryLimit, BadValuesAreErrors) {
  Graph g = seed_block_no_affine({4, 8});
  for (const char* v : {"-1", "1.5e9", "lots", "", "99999999999999999999"}) {
    EXPECT_TRUE(throws_with(
        [&] {
          compile(g, {{"memory_limit", v}});
        },
        {"option 'memory_limit': bad value", "valid: an integer"}))
        << v;
  }
  EXPECT_NO_THROW(compile(g, {{"memory_limit", "0"}}));  // 0: no limit
}

// A tensor larger than the machine's memory is refused with its sizes before any allocation
// (the allocator could abort, or, with overcommit, the OOM killer end the process later); a size
// product past 2^64 does not wrap around.
TEST(MemoryLimit, TensorsLargerThanMemoryAreErrors) {
  EXPECT_TRUE(throws_with(
      [] {
        Tensor t(f32, {1 << 20, 1 << 20, 1 << 20});
      },
      {"f32 tensor of sizes [1048576,1048576,1048576]", "more than this machine's memory",
       "hint"}));
  EXPECT_TRUE(throws_with([] { Tensor t(bf16, {int64_t(1) << 62, 8}); }, {"more than 2^64"}));
  EXPECT_EQ(Tensor(f32, {int64_t(1) << 40, 0}).nbytes(), 0u);  // a zero dim needs nothing
  EXPECT_EQ(Tensor(f16, {3, 5}).nbytes(), 30u);
}

// ---- NaN / Inf ----

// Runs fn on another thread; a hang fails the whole binary loudly instead of stalling CI.
template <typename F>
void within_seconds(int seconds, F fn) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::thread t([&] {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu);
    done = true;
    cv.notify_one();
  });
  {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, std::chrono::seconds(seconds), [&] { return done; })) {
      std::fprintf(stderr, "HANG: a kernel did not finish within %d s\n", seconds);
      std::_Exit(3);
    }
  }
  t.join();
  if (error) std::rethrow_exception(error);
}

std::map<std::string, Tensor> run_mode(const Graph& g, const Options& o,
                                       const std::map<std::string, Tensor>& in) {
  std::map<std::string, Tensor> out;
  within_seconds(120, [&] { out = compile(g, o).run(in); });
  return out;
}

// x: rows of `cols` (>= 3) values with specials planted where SIMD bodies and tails read them.
Tensor special_rows(DType dt, int64_t cols) {
  Tensor t = Tensor::random(dt, {6, cols}, 11);
  t.set(0 * cols + 1, kNaN);         // row 0: one NaN
  t.set(1 * cols + cols - 1, kInf);  // row 1: +Inf at the tail
  t.set(2 * cols + 0, -kInf);        // row 2: -Inf first
  t.set(3 * cols + 1, kInf);         // row 3: +Inf and -Inf
  t.set(3 * cols + cols - 1, -kInf);
  return t;  // rows 4, 5: finite
}

class Special : public ::testing::TestWithParam<std::tuple<int, DType, int64_t>> {
 protected:
  Options opts() const { return all_modes()[size_t(std::get<0>(GetParam()))]; }
  DType dt() const { return std::get<1>(GetParam()); }
  int64_t cols() const { return std::get<2>(GetParam()); }
};

TEST_P(Special, AddAndSiluFollowIeee) {
  GraphBuilder b;
  auto x = b.input("x", dt(), {6, cols()});
  auto r = b.input("r", dt(), {6, cols()});
  auto s = b.add(x, r);
  b.output("sum", s);
  b.output("silu", b.silu(s));
  Graph g = b.build();
  Tensor xv = special_rows(dt(), cols()), rv = Tensor::zeros(dt(), {6, cols()});
  rv.set(4 * cols() + 2, kInf);   // row 4: Inf + finite
  rv.set(3 * cols() + 1, -kInf);  // row 3: Inf + -Inf = NaN
  auto out = run_mode(g, opts(), {{"x", xv}, {"r", rv}});
  const Tensor &sum = out.at("sum"), &silu = out.at("silu");
  int64_t c = cols();
  EXPECT_TRUE(std::isnan(sum.get(0 * c + 1)));
  EXPECT_TRUE(std::isnan(silu.get(0 * c + 1)));
  EXPECT_EQ(sum.get(1 * c + c - 1), kInf);
  EXPECT_EQ(silu.get(1 * c + c - 1), kInf);
  EXPECT_EQ(sum.get(2 * c), -kInf);
  EXPECT_TRUE(std::isnan(sum.get(3 * c + 1)));
  EXPECT_TRUE(std::isnan(silu.get(3 * c + 1)));
  EXPECT_EQ(sum.get(4 * c + 2), kInf);
  // Finite elements are untouched by their neighbours' specials.
  EXPECT_TRUE(testing::close_to_ref(sum, ref::run_graph(g, {{"x", xv}, {"r", rv}}).at("sum")));
  for (int64_t i = 0; i < 6 * c; i++) {
    double v = sum.get(i);
    if (std::isfinite(v)) {
      EXPECT_TRUE(std::isfinite(silu.get(i))) << "element " << i;
    }
  }
}

// Softmax skips exp's range test on rows whose min - max >= -87 (eager softmax.cc, fused
// ExpInRangeIf): rows just inside and outside that range, a masked logit, and a NaN after a very
// negative value in the same vector lane (x86's min skips the NaN) must all match the reference.
TEST_P(Special, SoftmaxRangeTestedRowsMatchTheReference) {
  GraphBuilder b;
  auto x = b.input("x", dt(), {6, cols()});
  b.output("sm", b.softmax(b.mul(x, 2.0)));  // a fused group in graph mode, not one op
  Graph g = b.build();
  const int64_t c = cols();
  Tensor xv = Tensor::random(dt(), {6, c}, 12, -3, 3);  // logits are 2x these
  for (int64_t j = 0; j < c; j++) {
    xv.set(0 * c + j, 0.0);  // rows 0, 1: zeros but one element near -87
    xv.set(1 * c + j, 0.0);
  }
  xv.set(0 * c + c / 2, -43.25);  // row 0: a logit inside the range (-86.5)
  xv.set(1 * c + c / 2, -43.75);  // row 1: outside it (-87.5)
  xv.set(2 * c + c - 1, -5e3);    // row 2: an attention mask's value
  xv.set(3 * c + 0, -100.0);      // row 3: a NaN 8 lanes after -200
  if (c > 8) xv.set(3 * c + 8, kNaN);
  auto out = run_mode(g, opts(), {{"x", xv}});
  auto want = ref::run_graph(g, {{"x", xv}});
  EXPECT_TRUE(testing::close_to_ref(out.at("sm"), want.at("sm")));
  EXPECT_EQ(out.at("sm").get(2 * c + c - 1), 0.0);
  if (c > 8) {
    EXPECT_TRUE(std::isnan(out.at("sm").get(3 * c)));
  }
}

TEST_P(Special, RowOpsPoisonOnlyTheirRow) {
  GraphBuilder b;
  auto x = b.input("x", dt(), {6, cols()});
  b.output("ln", b.layer_norm(x, nullptr, nullptr));
  b.output("sm", b.softmax(x));
  b.output("y", b.silu(b.layer_norm(b.add(x, x), nullptr, nullptr)));
  Graph g = b.build();
  Tensor xv = special_rows(dt(), cols());
  auto out = run_mode(g, opts(), {{"x", xv}});
  auto want = ref::run_graph(g, {{"x", xv}});
  int64_t c = cols();
  auto row_all = [&](const Tensor& t, int64_t row, auto pred) {
    for (int64_t j = 0; j < c; j++) {
      if (!pred(t.get(row * c + j))) return false;
    }
    return true;
  };
  auto is_nan = [](double v) { return std::isnan(v); };
  auto finite = [](double v) { return std::isfinite(v); };
  for (const char* name : {"ln", "y"}) {
    const Tensor& t = out.at(name);
    SCOPED_TRACE(name);
    // NaN or +-Inf in a row: mean or variance is NaN/Inf, so the whole row is NaN.
    for (int64_t row : {0, 1, 2, 3}) EXPECT_TRUE(row_all(t, row, is_nan)) << "row " << row;
    for (int64_t row : {4, 5}) EXPECT_TRUE(row_all(t, row, finite)) << "row " << row;
  }
  const Tensor& sm = out.at("sm");
  EXPECT_TRUE(row_all(sm, 0, is_nan));
  // A -Inf logit (an attention mask) gets probability 0 and the row stays a distribution.
  EXPECT_EQ(sm.get(2 * c), 0.0);
  EXPECT_TRUE(row_all(sm, 2, finite));
  for (int64_t row : {4, 5}) EXPECT_TRUE(row_all(sm, row, finite));
  // Finite rows match the reference; special rows match it NaN for NaN (close_to_ref).
  for (auto& [name, w] : want) EXPECT_TRUE(testing::close_to_ref(out.at(name), w)) << name;
}

TEST_P(Special, MatMulPropagatesNaNAlongItsRow) {
  GraphBuilder b;
  auto x = b.input("x", dt(), {6, cols()});
  auto w = b.constant(Tensor::random(dt(), {cols(), 8}, 3));
  b.output("y", b.add(b.matmul(x, w), 1.0));
  Graph g = b.build();
  Tensor xv = special_rows(dt(), cols());
  auto y = run_mode(g, opts(), {{"x", xv}}).at("y");
  for (int64_t j = 0; j < 8; j++) {
    EXPECT_TRUE(std::isnan(y.get(j))) << j;             // row 0 had a NaN
    EXPECT_TRUE(std::isfinite(y.get(4 * 8 + j))) << j;  // finite rows stay finite
  }
}

INSTANTIATE_TEST_SUITE_P(
    Limits, Special,
    ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Values(f32, bf16),
                       ::testing::Values(int64_t(3), int64_t(64), int64_t(1000))),
    [](const auto& info) {
      std::string mode = mode_name(all_modes()[size_t(std::get<0>(info.param))]);
      std::replace(mode.begin(), mode.end(), '-', '_');
      return mode + "_" + std::string(dtype_name(std::get<1>(info.param))) + "_" +
             std::to_string(std::get<2>(info.param));
    });

TEST(Special, OverflowToInfIsNotAnError) {
  // exp overflows to +Inf in f32; 1/Inf is 0; nothing throws or hangs.
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 33});
  b.output("y", b.reciprocal(b.exp(b.mul(x, 200.0))));
  Graph g = b.build();
  Tensor xv = Tensor::random(f32, {4, 33}, 5, 0.5, 1.0);
  for (auto& o : all_modes()) {
    auto y = run_mode(g, o, {{"x", xv}}).at("y");
    for (int64_t i = 0; i < y.numel(); i++) EXPECT_EQ(y.get(i), 0.0) << mode_name(o) << " " << i;
  }
}

}  // namespace
}  // namespace ubfuse
