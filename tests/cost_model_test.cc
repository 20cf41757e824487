// The fusion cost model (fusion/cost.h) and its calibration (compiler/cost_calibration.h): what
// it estimates, the groups it refuses and why, and the per-machine cache of its figures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "codegen/group_kernels.h"
#include "compiler/cost_calibration.h"
#include "fusion/cost.h"
#include "fusion/partition.h"
#include "profiler_test_util.h"
#include "test_util.h"
#include "ubfuse/profiler.h"
#include "util/machine_info.h"

namespace ubfuse {
namespace {

using nlohmann::json;
using namespace testing;

Graph add_exp(Shape s) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, s);
  auto y = b.input("y", DType::f32, s);
  b.output("z", b.exp(b.add(x, y)));
  return b.build();
}

TEST(CostModel, EstimatesCountBytesKernelsAndFlops) {
  CostParams p;
  p.bytes_per_s = 1e9;
  p.launch_s = 1e-6;
  for (bool symbolic : {false, true}) {
    Graph g = add_exp(symbolic ? Shape{Dim("rows"), Dim(256)} : Shape{Dim(64), Dim(256)});
    const double n = double(symbolic ? kSymbolSize : 64) * 256 * 4;  // bytes of one value
    std::vector<const Node*> nodes;
    for (const Node* x : g.topo_order()) nodes.push_back(x);
    const CostEstimate parts = estimate_parts(g, nodes, p);
    EXPECT_EQ(parts.kernels, 2);
    EXPECT_DOUBLE_EQ(parts.bytes, 5 * n);  // Add: 2 in, 1 out; Exp: 1 in, 1 out
    EXPECT_NEAR(parts.seconds, 2e-6 + 5 * n / 1e9, 1e-12);
    FusedGroup fg;
    fg.kind = GroupKind::Elementwise;
    fg.nodes = nodes;
    fg.inputs = {g.inputs()[0], g.inputs()[1]};
    fg.outputs = {nodes.back()->out()};
    const CostEstimate fused = estimate_fused(g, fg, false, p);
    EXPECT_EQ(fused.kernels, 1);
    EXPECT_DOUBLE_EQ(fused.bytes, 3 * n);
    fg.reread = true;  // the two-pass variant reads its inputs twice
    EXPECT_DOUBLE_EQ(estimate_fused(g, fg, false, p).bytes, 5 * n);
    // Op by op: its parts, plus a launch per member and the intermediate first touched.
    EXPECT_NEAR(estimate_fused(g, fg, true, p).seconds, parts.seconds + 2e-6 + n / 1e9, 1e-12);
    EXPECT_NE(fused.str().find("(1 kernel, "), std::string::npos) << fused.str();
  }
}

Graph attention_f32(int64_t len) {
  GraphBuilder b;
  auto q = b.input("q", DType::f32, {1, 4, len, 64});
  auto kt = b.input("kt", DType::f32, {1, 4, 64, len});
  auto v = b.input("v", DType::f32, {1, 4, len, 64});
  b.output("o", b.matmul(b.softmax(b.mul(b.matmul(q, kt), 0.125)), v));
  return b.build();
}

// The flash kernel against MatMul + MatMul at the rates given: refused with both estimates when
// predicted slower; the rates between the two key lengths follow log(length).
TEST(CostModel, AttentionStaysApartWhenTheFlashKernelIsPredictedSlower) {
  for (double flash : {10e9, 1000e9}) {
    CostParams p;
    for (auto& r : p.flash_flops_per_s) r[0] = r[1] = flash;
    for (auto& r : p.split_flops_per_s) r[0] = r[1] = 100e9;
    FusionConfig c;
    c.ub_bytes_per_row = ub_bytes_per_row;
    c.costs = [&p]() -> const CostParams& { return p; };
    Graph g = attention_f32(256);
    Partition part = partition_graph(g, c, FusionRules{});
    int attention = 0, refused = 0;
    for (auto& grp : part.groups) attention += grp.kind == GroupKind::Attention;
    for (auto& d : part.decisions) {
      if (d.reason != FusionReason::NotProfitable) continue;
      refused++;
      EXPECT_NE(d.message.find("as the flash-style kernel, "), std::string::npos) << d.message;
      EXPECT_NE(d.message.find(" us (1 kernel, "), std::string::npos) << d.message;
      EXPECT_NE(d.message.find(" us (2 kernels, "), std::string::npos) << d.message;
    }
    EXPECT_EQ(attention, flash > 100e9 ? 1 : 0) << flash;
    EXPECT_EQ(refused, flash > 100e9 ? 0 : 1) << flash;
  }
  // Interpolation: halfway in log(length) between 128 and 1024 keys is the rates' mean.
  CostParams p;
  p.flash_flops_per_s[0][0] = 100e9;
  p.flash_flops_per_s[0][1] = 200e9;
  p.launch_s = 0;
  p.bytes_per_s = 1e30;
  Graph g = attention_f32(362);  // sqrt(128 * 1024) = 362.04
  const Node* scores = nullptr;
  const Node* context = nullptr;
  for (const Node* n : g.topo_order()) {
    if (n->op == OpKind::MatMul) (scores ? context : scores) = n;
  }
  const CostEstimate e = estimate_attention(scores, context, true, p);
  EXPECT_NEAR(e.flops, 4.0 * 4 * 362 * 362 * 64, 1);
  EXPECT_NEAR(e.flops / e.seconds, 150e9, 0.1e9);
}

// An i64 chain would run op by op: it runs as its parts, says why with both estimates, and
// computes the same; cost_model=off keeps the op-by-op group.
TEST(CostModel, OpByOpGroupRunsAsItsParts) {
  GraphBuilder b;
  auto x = b.input("x", DType::i64, {5, 7});
  auto y = b.input("y", DType::i64, {5, 1});
  auto a = b.input("a", DType::f32, {5, 7});
  auto c = b.less(b.sub(x, y), b.scalar(0, DType::i64));
  b.output("z", b.where(c, a, b.scalar(-1e4)));
  Graph g = b.build();
  const std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::i64, {5, 7}, 1, -9, 9)},
                                            {"y", Tensor::random(DType::i64, {5, 1}, 2, -9, 9)},
                                            {"a", Tensor::random(DType::f32, {5, 7}, 3)}};
  Options builtin = graph_opts(), off = graph_opts();
  builtin["cost_model"] = "builtin";
  off["cost_model"] = "off";
  CompiledModel apart = compile(g, builtin), together = compile(g, off);
  EXPECT_EQ(apart.kernels().size(), 3u);
  ASSERT_EQ(together.kernels().size(), 1u);
  EXPECT_EQ(together.kernels()[0].variant.rfind("op-by-op", 0), 0u);
  int refused = 0;
  for (auto& d : apart.decisions()) {
    if (d.reason != FusionReason::NotProfitable) continue;
    refused++;
    EXPECT_NE(d.message.find("is predicted slower as one kernel (it would run op by op: input "
                             "'x' is i64"),
              std::string::npos)
        << d.message;
    EXPECT_NE(d.message.find("than as its parts, "), std::string::npos) << d.message;
    EXPECT_NE(d.message.find("(builtin)"), std::string::npos) << d.message;
  }
  EXPECT_EQ(refused, 2);  // sub -> less, less -> where
  for (const CompiledModel* m : {&apart, &together}) {
    EXPECT_TRUE(close_to_ref(m->run(in).at("z"), ref::run_graph(g, in).at("z")));
  }
  for (auto& d : together.decisions()) EXPECT_NE(d.reason, FusionReason::NotProfitable);
}

// A spectrogram's power, the sum of a complex value's squared parts: rows of 2 values. As one
// kernel each row takes a whole vector (charged 16 values), where eager Mul streams and eager
// ReduceSum sums a vector of rows at once: refused, with both estimates, and the same answer.
// Rows of 16 values fuse.
TEST(CostModel, ReductionOverNarrowRowsStaysApart) {
  for (int64_t cols : {int64_t(2), int64_t(16)}) {
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {4096, 64, cols});
    b.output("p", b.reduce_sum(b.mul(x, x)));
    Graph g = b.build();
    Options o = graph_opts();
    o["cost_model"] = "builtin";
    CompiledModel m = compile(g, o);
    int refused = 0;
    for (auto& d : m.decisions()) {
      if (d.reason != FusionReason::NotProfitable) continue;
      refused++;
      EXPECT_NE(d.message.find("is predicted slower as one kernel"), std::string::npos)
          << d.message;
    }
    EXPECT_EQ(refused, cols == 2 ? 1 : 0) << cols;
    EXPECT_EQ(m.kernels().size(), cols == 2 ? 2u : 1u) << cols;
    const std::map<std::string, Tensor> in = {
        {"x", Tensor::random(DType::f32, {4096, 64, cols}, 4)}};
    EXPECT_TRUE(close_to_ref(m.run(in).at("p"), ref::run_graph(g, in).at("p")));
  }
}

TEST(CostModel, BadValuesNameTheOptionOrVariable) {
  Graph g = add_exp({Dim(4), Dim(8)});
  Options o = graph_opts();
  o["cost_model"] = "fast";
  EXPECT_TRUE(throws_with([&] { compile(g, o); },
                          {"option 'cost_model'", "'fast'", "calibrated, builtin, off"}));
  const char* saved = std::getenv("UBFUSE_COST_MODEL");
  const std::string keep = saved ? saved : "";
  ::setenv("UBFUSE_COST_MODEL", "maybe", 1);
  EXPECT_TRUE(throws_with([&] { compile(g, graph_opts()); }, {"UBFUSE_COST_MODEL", "'maybe'"}));
  if (saved) {
    ::setenv("UBFUSE_COST_MODEL", keep.c_str(), 1);
  } else {
    ::unsetenv("UBFUSE_COST_MODEL");
  }
}

// The figures come from the machine's cache entry when it is fresh and whole; otherwise they are
// measured (each positive), without the measuring models reaching a recording profiler, and
// written back under the machine's key.
TEST(CostModel, CalibrationIsCachedPerMachine) {
  ::unsetenv("UBFUSE_REMEASURE_COSTS");
  const std::string key = machine_key(2);
  const std::string cached = temp_dir("costs_cached");
  ::setenv("UBFUSE_CACHE_DIR", cached.c_str(), 1);
  {
    std::ofstream f(cached + "/costs.json");
    f << json({{"machines",
                {{key,
                  {{"bytes_per_s", 31e9},
                   {"launch_s", 1.5e-6},
                   {"matmul_flops_per_s", 333e9},
                   {"attention_lengths", {128, 1024}},
                   {"flash_flops_per_s", {{101e9, 102e9}, {103e9, 104e9}}},
                   {"split_flops_per_s", {{91e9, 92e9}, {93e9, 94e9}}},
                   {"kernels", kCostsKernelRevision},
                   {"measured_unix", unix_now()}}}}}})
             .dump();
  }
  const CostParams& c = calibrated_costs(2);
  EXPECT_EQ(c.source, "cache");
  EXPECT_EQ(c.machine, key);
  EXPECT_DOUBLE_EQ(c.bytes_per_s, 31e9);
  EXPECT_DOUBLE_EQ(c.flash_flops_per_s[1][1], 104e9);
  EXPECT_DOUBLE_EQ(c.split_flops_per_s[0][1], 92e9);

  // A stale entry is measured again and replaced: one two weeks old, or (here) one whole and
  // fresh but measured with other kernels (an older kCostsKernelRevision).
  EXPECT_FALSE(machine_cache_fresh(json{{"measured_unix", unix_now() - 14 * 86400}}));
  EXPECT_TRUE(machine_cache_fresh(json{{"measured_unix", unix_now()}}));
  const std::string stale = temp_dir("costs_stale");
  ::setenv("UBFUSE_CACHE_DIR", stale.c_str(), 1);
  {
    json e = read_json(cached + "/costs.json")["machines"][key];
    e["kernels"] = kCostsKernelRevision - 1;
    std::ofstream f(stale + "/costs.json");
    f << json({{"machines", {{key, e}}}}).dump();
  }
  // Measured inside a recording profiler, which does not see the calibration's models.
  fixed_bandwidth();
  Profiler prof({.trace_dir = stale, .name = "calibration"});
  const CostParams& m = calibrated_costs(2);
  prof.stop();
  json trace = json::parse(prof.trace_json());
  for (auto& e : trace["traceEvents"]) {
    EXPECT_TRUE(e["ph"] != "X" || (e["cat"] != "kernel" && e["cat"] != "compile")) << e;
  }
  EXPECT_EQ(m.source, "measured");
  EXPECT_GT(m.bytes_per_s, 1e8);
  EXPECT_GT(m.launch_s, 0);
  EXPECT_GT(m.matmul_flops_per_s, 1e8);
  for (int d = 0; d < 2; d++) {
    for (int l = 0; l < 2; l++) {
      EXPECT_GT(m.flash_flops_per_s[d][l], 1e8);
      EXPECT_GT(m.split_flops_per_s[d][l], 1e8);
    }
  }
  json j = read_json(stale + "/costs.json");
  ASSERT_TRUE(j["machines"].contains(key));
  EXPECT_DOUBLE_EQ(j["machines"][key]["bytes_per_s"].get<double>(), m.bytes_per_s);
  EXPECT_EQ(j["machines"][key]["kernels"], kCostsKernelRevision);
  EXPECT_EQ(&calibrated_costs(2), &m);  // once per process and cache file
  ::unsetenv("UBFUSE_CACHE_DIR");
}

// Where the two estimates of an attention chain are close, both forms are timed at its sizes at
// compile time; the timing is kept per machine and read back by the next compile.
TEST(CostModel, UnsureAttentionIsTimedAndTheTimingCached) {
  ::unsetenv("UBFUSE_REMEASURE_COSTS");
  const std::string key = machine_key(2);
  const std::string dir = temp_dir("costs_unsure");
  ::setenv("UBFUSE_CACHE_DIR", dir.c_str(), 1);
  {
    // Both forms at the same rate: the estimates differ by one launch.
    std::ofstream f(dir + "/costs.json");
    f << json({{"machines",
                {{key,
                  {{"bytes_per_s", 1e12},
                   {"launch_s", 1e-7},
                   {"matmul_flops_per_s", 1e11},
                   {"attention_lengths", {128, 1024}},
                   {"flash_flops_per_s", {{1e11, 1e11}, {1e11, 1e11}}},
                   {"split_flops_per_s", {{1e11, 1e11}, {1e11, 1e11}}},
                   {"kernels", kCostsKernelRevision},
                   {"measured_unix", unix_now()}}}}}})
             .dump();
  }
  Options o = graph_opts();
  o["cost_model"] = "calibrated";
  o["num_threads"] = "2";
  Graph g = attention_f32(128);
  const std::string probe = "f32 h4 q128 k128 d64";
  for (const char* source : {"(measured)", "(cache)"}) {
    CompiledModel m = compile(g, o);
    int timed = 0;
    for (auto& d : m.decisions()) {
      if (d.message.find("; timed at " + probe + " " + source + ": ") == std::string::npos) {
        continue;
      }
      timed++;
      EXPECT_TRUE(d.reason == FusionReason::Fused || d.reason == FusionReason::NotProfitable);
      // Kept as one kernel exactly when timed faster (within the margin).
      int flash = 0;
      for (auto& k : m.kernels()) flash += k.variant == "flash attention";
      EXPECT_EQ(flash, d.reason == FusionReason::Fused ? 1 : 0) << d.message;
    }
    EXPECT_EQ(timed, 1) << source;
    const std::map<std::string, Tensor> in = {
        {"q", Tensor::random(DType::f32, {1, 4, 128, 64}, 1)},
        {"kt", Tensor::random(DType::f32, {1, 4, 64, 128}, 2)},
        {"v", Tensor::random(DType::f32, {1, 4, 128, 64}, 3)}};
    EXPECT_TRUE(close_to_ref(m.run(in).at("o"), ref::run_graph(g, in).at("o")));
  }
  json j = read_json(dir + "/costs.json");
  const json& t = j["machines"][key]["attention"][probe];
  ASSERT_TRUE(t.is_array() && t.size() == 2) << j.dump();
  EXPECT_GT(t[0].get<double>(), 0);
  EXPECT_GT(t[1].get<double>(), 0);
  ::unsetenv("UBFUSE_CACHE_DIR");
}

}  // namespace
}  // namespace ubfuse
