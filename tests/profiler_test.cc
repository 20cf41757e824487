// Profiler: the Chrome trace is valid JSON with the required fields, rows never overlap, eager and
// graph traces hold the kernels users look for with their source ops, bytes equal the planner's.
#include "ubfuse/profiler.h"

#include <chrono>
#include <thread>

#include "profiler/roofline.h"
#include "profiler_test_util.h"
#include "ubfuse/explain.h"
#include "util/machine_info.h"

namespace ubfuse {
namespace {

using nlohmann::json;
using namespace ubfuse::testing;

const Sizes kTraceShape = {2, 8, 256};

// Runs `model` `steps` times under a profiler writing <dir>/<name>.trace.json; returns the trace.
json record(const CompiledModel& model, const std::string& dir, const std::string& name,
            int steps = 3) {
  auto in = seed_inputs(kTraceShape);
  Profiler prof({.trace_dir = dir, .record_shapes = true, .name = name});
  prof.record_compile(model, name);
  for (int i = 0; i < steps; i++) {
    model.run(in);
    prof.step();
  }
  prof.stop();
  return read_json(dir + "/" + name + ".trace.json");
}

std::vector<json> events_of(const json& trace, const std::string& cat) {
  std::vector<json> out;
  for (auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == cat) out.push_back(e);
  }
  return out;
}

int64_t ns(const json& us) { return std::llround(us.get<double>() * 1000); }

TEST(Profiler, TraceIsChromeTraceJsonWithRequiredFields) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_fields");
  json t = record(compile(seed_graph(kTraceShape), eager_opts()), dir, "eager");
  ASSERT_TRUE(t["traceEvents"].is_array());
  bool process_name = false, thread_name = false;
  for (auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"))
        << e;
    if (e["ph"] == "M") {
      process_name |= e["name"] == "process_name";
      thread_name |= e["name"] == "thread_name";
      EXPECT_TRUE(e["args"].contains("name") || e["args"].contains("sort_index")) << e;
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e;
    EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e;
    EXPECT_GE(e["ts"].get<double>(), 0) << e;
    EXPECT_GE(e["dur"].get<double>(), 0) << e;
    std::string cat = e["cat"];
    EXPECT_TRUE(cat == "kernel" || cat == "host" || cat == "compile" || cat == "step") << cat;
    ASSERT_TRUE(e["args"].is_object()) << e;
  }
  EXPECT_TRUE(process_name);
  EXPECT_TRUE(thread_name);
  auto kernels = events_of(t, "kernel");
  ASSERT_FALSE(kernels.empty());
  for (auto& k : kernels) {
    const json& a = k["args"];
    for (const char* key :
         {"nodes", "ops", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes",
          "bytes_read", "bytes_written", "gb_per_s", "pct_of_bandwidth", "variant"}) {
      EXPECT_TRUE(a.contains(key)) << key << " missing in " << k;
    }
    EXPECT_EQ(a["input_shapes"].size(), a["input_dtypes"].size());
    EXPECT_EQ(a["output_dtypes"][0], "f32");
    EXPECT_NEAR(a["pct_of_bandwidth"].get<double>(), 100 * a["gb_per_s"].get<double>() / 20, 1e-6);
  }
  EXPECT_EQ(events_of(t, "step").size(), 3u);
  EXPECT_EQ(t["otherData"]["bandwidth_gb_per_s"], 20.0);
}

TEST(Profiler, EagerTraceShowsAddLayerNormSiluApart) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_eager");
  json t = record(compile(seed_graph(kTraceShape), eager_opts()), dir, "eager", 2);
  std::map<std::string, int> calls;
  for (auto& k : events_of(t, "kernel")) {
    calls[k["name"]]++;
    EXPECT_EQ(k["args"]["ops"].size(), 1u) << k;
  }
  EXPECT_EQ(calls["Add"], 2);
  EXPECT_EQ(calls["LayerNorm"], 2);
  EXPECT_EQ(calls["Silu"], 2);
}

TEST(Profiler, GraphTraceShowsOneFusedKernelWithItsSourceOps) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_graph");
  json t = record(compile(seed_graph(kTraceShape), graph_opts()), dir, "graph", 2);
  auto kernels = events_of(t, "kernel");
  ASSERT_EQ(kernels.size(), 2u);
  for (auto& k : kernels) {
    EXPECT_EQ(k["name"], "FusedAddLayerNormSilu");
    EXPECT_EQ(k["args"]["ops"], json({"Add", "LayerNorm", "Silu"}));
    EXPECT_EQ(k["args"]["nodes"], json({"add", "layer_norm", "silu"}));
    EXPECT_EQ(k["args"]["model"], "graph");
  }
}

TEST(Profiler, HostPrintBreaksTheFusedKernelAndShowsAsHostEvent) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_print");
  json t = record(compile(seed_graph(kTraceShape, true), graph_opts()), dir, "graph", 1);
  std::vector<std::string> names;
  for (auto& e : t["traceEvents"]) {
    if (e["ph"] == "X" && (e["cat"] == "kernel" || e["cat"] == "host")) names.push_back(e["name"]);
  }
  ASSERT_EQ(names.size(), 3u) << json(names);
  EXPECT_EQ(names[0], "FusedAddLayerNorm");
  EXPECT_EQ(names[2], "Silu");
  auto host = events_of(t, "host");
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0]["args"]["nodes"], json({"print"}));
  std::string boundaries = host[0]["args"]["fusion_boundaries"].dump();
  EXPECT_NE(boundaries.find("HostSync"), std::string::npos) << boundaries;
}

TEST(Profiler, EventsOnOneThreadRowNeverOverlapWithConcurrentCallers) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_threads");
  CompiledModel m = compile(seed_graph(kTraceShape), eager_opts());
  auto in = seed_inputs(kTraceShape);
  {
    Profiler prof({.trace_dir = dir, .name = "threads"});
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++) {
      ts.emplace_back([&] {
        for (int i = 0; i < 5; i++) m.run(in);
      });
    }
    for (auto& t : ts) t.join();
  }  // the destructor writes the trace
  json t = read_json(dir + "/threads.trace.json");
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> rows;
  for (auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") rows[e["tid"]].push_back({ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])});
  }
  int kernel_rows = 0;
  for (auto& [tid, spans] : rows) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); i++) {
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "tid " << tid << " event " << i;
    }
    if (spans.size() == 15) kernel_rows++;  // 5 runs x 3 kernels on each caller's row
  }
  EXPECT_EQ(kernel_rows, 3);
}

TEST(Profiler, BytesInTraceEqualThePlannersPrediction) {
  fixed_bandwidth();
  for (bool fusion : {false, true}) {
    std::string dir = temp_dir(fusion ? "prof_bytes_g" : "prof_bytes_e");
    CompiledModel m = compile(seed_graph(kTraceShape), fusion ? graph_opts() : eager_opts());
    json t = record(m, dir, "bytes", 1);
    auto kernels = events_of(t, "kernel");
    auto want = predicted_traffic(m, {});
    ASSERT_EQ(kernels.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
      EXPECT_EQ(kernels[i]["name"], want[i].name);
      EXPECT_EQ(kernels[i]["args"]["bytes_read"].get<int64_t>(), want[i].bytes_read) << i;
      EXPECT_EQ(kernels[i]["args"]["bytes_written"].get<int64_t>(), want[i].bytes_written) << i;
    }
  }
}

TEST(Profiler, CompileEventsForEachPass) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_compile");
  CompiledModel before = compile(seed_graph(kTraceShape), eager_opts());
  Profiler prof({.trace_dir = dir, .name = "compile"});
  CompiledModel during = compile(seed_graph(kTraceShape), graph_opts());  // recorded by itself
  prof.record_compile(before, "before");
  prof.record_compile(during, "during");  // already recorded: only relabels
  prof.stop();
  json t = read_json(prof.trace_path());
  auto passes = events_of(t, "compile");
  size_t want = before.stats().pass_ms.size() + during.stats().pass_ms.size();
  ASSERT_EQ(passes.size(), want);
  std::set<std::string> models, names;
  for (auto& p : passes) {
    models.insert(p["args"]["model"]);
    names.insert(p["name"]);
  }
  EXPECT_EQ(models, (std::set<std::string>{"before", "during"}));
  for (auto& [pass, _] : during.stats().pass_ms) EXPECT_TRUE(names.count(pass)) << pass;
}

TEST(Profiler, SummaryRowsPerKernelSortedByTotalTime) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_summary");
  CompiledModel m = compile(seed_graph(kTraceShape), eager_opts());
  auto in = seed_inputs(kTraceShape);
  Profiler prof({.trace_dir = dir, .name = "summary"});
  for (int i = 0; i < 4; i++) {
    m.run(in);
    prof.step();
  }
  prof.stop();
  ProfilerSummary s = prof.summary();
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.steps, 4);
  EXPECT_DOUBLE_EQ(s.bandwidth_gb_per_s, 20);
  for (size_t i = 0; i < s.rows.size(); i++) {
    EXPECT_EQ(s.rows[i].calls, 4);
    EXPECT_GT(s.rows[i].bytes, 0);
    EXPECT_NEAR(s.rows[i].mean_us * 4, s.rows[i].total_us, 1e-6);
    if (i > 0) {
      EXPECT_GE(s.rows[i - 1].total_us, s.rows[i].total_us);
    }
  }
  std::string table = s.table();
  for (const char* want : {"Kernel", "Calls", "GB/s", "% BW", "Add", "LayerNorm", "Silu"}) {
    EXPECT_NE(table.find(want), std::string::npos) << want << " in\n" << table;
  }
}

TEST(Profiler, OneAtATimeAndBadOptionsAreErrors) {
  fixed_bandwidth();
  std::string dir = temp_dir("prof_errors");
  Profiler a({.trace_dir = dir, .name = "a"});
  try {
    Profiler b({.trace_dir = dir, .name = "b"});
    FAIL() << "a second Profiler started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already recording"), std::string::npos) << e.what();
  }
  a.stop();
  EXPECT_THROW(Profiler({.trace_dir = dir, .name = "x/y"}), Error);
  EXPECT_THROW(Profiler({.trace_dir = "", .name = "x"}), Error);
  Profiler c({.trace_dir = dir, .name = "c"});  // fine once a has stopped
}

// The figure is remembered per cache file: a second directory is read, not the first's figure
// (nor one an earlier test in the same process measured).
TEST(Profiler, BandwidthComesFromTheCacheFileKeyedByMachine) {
  ::unsetenv("UBFUSE_BANDWIDTH_GBPS");
  ::unsetenv("UBFUSE_REMEASURE_BANDWIDTH");
  std::string key = machine_key(prof::threads_for_measurement());
  for (double gbps : {77.25, 123.5}) {
    std::string cache = temp_dir("prof_bwcache_" + std::to_string(int(gbps)));
    ::setenv("UBFUSE_CACHE_DIR", cache.c_str(), 1);
    {
      std::ofstream f(cache + "/bandwidth.json");
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      f << json({{"machines",
                  {{key, {{"add_gb_per_s", gbps}, {"threads", 2}, {"measured_unix", now}}}}}})
               .dump();
    }
    prof::Roofline r = prof::machine_roofline();
    EXPECT_EQ(r.source, "cache");
    EXPECT_DOUBLE_EQ(r.gb_per_s, gbps);
    EXPECT_EQ(r.machine, key);
  }
  ::setenv("UBFUSE_BANDWIDTH_GBPS", "abc", 1);
  EXPECT_THROW(prof::machine_roofline(), Error);
  ::unsetenv("UBFUSE_CACHE_DIR");
  fixed_bandwidth();
}

}  // namespace
}  // namespace ubfuse
