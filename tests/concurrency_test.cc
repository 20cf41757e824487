// One CompiledModel shared by 8 threads: every concurrent run, each with its own inputs, must give
// the bytes a sequential run gives (eager, graph with generated code, graph with the interpreter).
// scripts/extra-tests.sh also runs these under ThreadSanitizer (build-tsan, Concurrency*).
#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "test_util.h"

namespace ubfuse {
namespace {

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 3;

using Inputs = std::map<std::string, Tensor>;
using Outputs = std::map<std::string, Tensor>;

// A DAG with a matmul, a matmul epilogue, a softmax and a second output that shares a value.
Graph matmul_dag() {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 48});
  auto wt = b.input("wt", f32, {48, 80});
  auto bias = b.input("bias", f32, {80});
  auto h = b.gelu(b.add(b.matmul(x, wt), bias));
  auto s = b.softmax(h);
  b.output("h", h);
  b.output("p", b.mul(s, b.rms_norm(h, nullptr)));
  return b.build();
}

Inputs seed_block_inputs(uint64_t seed, int64_t rows) {
  return {{"x", Tensor::random(f32, {rows, 256}, seed)},
          {"residual", Tensor::random(f32, {rows, 256}, seed + 1)},
          {"w", Tensor::random(f32, {256}, seed + 2, 0.5, 1.5)},
          {"b", Tensor::random(f32, {256}, seed + 3)}};
}

Inputs dag_inputs(uint64_t seed, int64_t rows) {
  return {{"x", Tensor::random(f32, {rows, 48}, seed)},
          {"wt", Tensor::random(f32, {48, 80}, seed + 1, -0.2, 0.2)},
          {"bias", Tensor::random(f32, {80}, seed + 2)}};
}

bool bitwise_equal(const Outputs& a, const Outputs& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = "different output count";
    return false;
  }
  for (auto& [name, t] : a) {
    const Tensor& u = b.at(name);
    if (t.sizes() != u.sizes() || t.dtype() != u.dtype() ||
        std::memcmp(t.data(), u.data(), t.nbytes()) != 0) {
      *why = "output '" + name + "' differs";
      return false;
    }
  }
  return true;
}

// Runs `m` on kThreads x kRunsPerThread input sets at once (all threads released together) and
// checks each result against the sequential run of the same inputs.
void expect_concurrent_matches_sequential(const CompiledModel& m,
                                          const std::function<Inputs(int)>& make_inputs,
                                          bool use_run_into) {
  const int n = kThreads * kRunsPerThread;
  std::vector<Inputs> inputs;
  std::vector<Outputs> want;
  for (int i = 0; i < n; i++) {
    inputs.push_back(make_inputs(i));
    want.push_back(m.run(inputs.back()));
  }
  std::vector<Outputs> got(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      ready++;
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int k = 0; k < kRunsPerThread; k++) {
        size_t i = size_t(t * kRunsPerThread + k);
        try {
          if (use_run_into) {
            m.run_into(inputs[i], got[i]);
          } else {
            got[i] = m.run(inputs[i]);
          }
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < n; i++) {
    ASSERT_EQ(errors[size_t(i)], "") << "run " << i;
    std::string why;
    EXPECT_TRUE(bitwise_equal(got[size_t(i)], want[size_t(i)], &why)) << "run " << i << ": " << why;
  }
}

struct Mode {
  const char* name;
  Options opts;
};

std::vector<Mode> modes() {
  return {
      {"eager", {{"ge.exec.enableOperatorFusion", "0"}}},
      {"graph", {{"ge.exec.enableOperatorFusion", "1"}}},
      {"graph-interpreter", {{"ge.exec.enableOperatorFusion", "1"}, {"codegen", "interpreter"}}}};
}

TEST(Concurrency, SeedBlockStaticShapeFromEightThreads) {
  Graph g = testing::seed_block({32, 256});
  for (auto& mode : modes()) {
    SCOPED_TRACE(mode.name);
    CompiledModel m = compile(g, mode.opts);
    expect_concurrent_matches_sequential(
        m, [](int i) { return seed_block_inputs(100 + 10 * uint64_t(i), 32); }, false);
  }
}

TEST(Concurrency, SeedBlockSymbolicShapesPlannedConcurrently) {
  // Every thread brings its own row count, so plans for new shapes are built while others run.
  Graph g = testing::seed_block({"batch", 256});
  for (auto& mode : modes()) {
    SCOPED_TRACE(mode.name);
    CompiledModel m = compile(g, mode.opts);
    expect_concurrent_matches_sequential(
        m, [](int i) { return seed_block_inputs(7 + 10 * uint64_t(i), 1 + (i * 5) % 41); }, false);
    // A fresh model: the first runs of each shape race to build its plan.
    CompiledModel fresh = compile(g, mode.opts);
    std::vector<std::thread> threads;
    std::vector<Outputs> got(kThreads);
    for (int t = 0; t < kThreads; t++) {
      threads.emplace_back(
          [&, t] { got[size_t(t)] = fresh.run(seed_block_inputs(900, 3 + t % 3)); });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; t++) {
      std::string why;
      EXPECT_TRUE(bitwise_equal(got[size_t(t)], m.run(seed_block_inputs(900, 3 + t % 3)), &why))
          << why;
    }
  }
}

TEST(Concurrency, MatMulDagFromEightThreads) {
  Graph g = matmul_dag();
  for (auto& mode : modes()) {
    SCOPED_TRACE(mode.name);
    CompiledModel m = compile(g, mode.opts);
    expect_concurrent_matches_sequential(
        m, [](int i) { return dag_inputs(300 + 10 * uint64_t(i), 24 + i % 3 * 8); }, false);
  }
}

TEST(Concurrency, RunIntoReusedOutputsFromEightThreads) {
  Graph g = matmul_dag();
  for (auto& mode : modes()) {
    SCOPED_TRACE(mode.name);
    CompiledModel m = compile(g, mode.opts);
    expect_concurrent_matches_sequential(
        m, [](int i) { return dag_inputs(500 + 10 * uint64_t(i), 16); }, true);
  }
}

TEST(Concurrency, ConcurrentResultsMatchReference) {
  // Identical to sequential is only useful if sequential is right.
  Graph g = testing::seed_block({32, 256});
  auto in = seed_block_inputs(42, 32);
  for (auto& mode : modes()) {
    SCOPED_TRACE(mode.name);
    EXPECT_TRUE(testing::matches_reference(g, in, mode.opts));
  }
}

}  // namespace
}  // namespace ubfuse
