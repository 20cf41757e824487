// Explain: fused groups with their bytes, every kernel boundary with its reason and hint, eager vs
// graph traffic, and DOT pictures Graphviz accepts.
#include "ubfuse/explain.h"

#include "profiler_test_util.h"

namespace ubfuse {
namespace {

using nlohmann::json;
using namespace ubfuse::testing;

const Sizes kShape = {2, 8, 256};

const ExplainBoundary* find_boundary(const ExplainReport& r, FusionReason why) {
  for (auto& b : r.boundaries) {
    if (b.decision.reason == why) return &b;
  }
  return nullptr;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Explain, SeedBlockIsOneKernelMovingLessThanHalfTheBytes) {
  ExplainReport r = explain(seed_graph(kShape));
  ASSERT_EQ(r.graph_kernels.size(), 1u);
  EXPECT_EQ(r.graph_kernels[0].name, "FusedAddLayerNormSilu");
  EXPECT_EQ(r.graph_kernels[0].ops, (std::vector<std::string>{"Add", "LayerNorm", "Silu"}));
  ASSERT_EQ(r.eager_kernels.size(), 3u);
  EXPECT_TRUE(r.boundaries.empty());
  EXPECT_EQ(r.fused.size(), 2u);  // add -> layer_norm, layer_norm -> silu
  const int64_t n = 2 * 8 * 256 * 4, w = 256 * 4;
  // eager: add 2n -> n, layer_norm n + 2w -> n, silu n -> n; graph: 2n + 2w -> n.
  EXPECT_EQ(r.eager_bytes, 7 * n + 2 * w);
  EXPECT_EQ(r.graph_bytes, 3 * n + 2 * w);
  EXPECT_EQ(r.graph_kernels[0].bytes_read, 2 * n + 2 * w);
  EXPECT_EQ(r.graph_kernels[0].bytes_written, n);
  EXPECT_NEAR(r.speedup_bound, double(7 * n + 2 * w) / double(3 * n + 2 * w), 1e-12);
  std::string text = format_explain(r);
  for (const char* part : {"FusedAddLayerNormSilu", "speedup bound", "eager", "graph"}) {
    EXPECT_TRUE(has(text, part)) << part << " in\n" << text;
  }
}

TEST(Explain, HostPrintReportsHostSyncWithNodeNames) {
  ExplainReport r = explain(seed_graph(kShape, true));
  const ExplainBoundary* b = find_boundary(r, FusionReason::HostSync);
  ASSERT_NE(b, nullptr) << format_explain(r);
  EXPECT_EQ(b->decision.producer, "layer_norm");
  EXPECT_EQ(b->decision.consumer, "print");
  EXPECT_TRUE(has(b->decision.message, "'print'")) << b->decision.message;
  EXPECT_TRUE(has(b->decision.hint, "print")) << b->decision.hint;
  EXPECT_EQ(b->bytes, 2 * 8 * 256 * 4);
  EXPECT_EQ(r.graph_kernels.size(), 3u);
  EXPECT_GT(r.graph_bytes, explain(seed_graph(kShape)).graph_bytes);
  std::string text = format_explain(r);
  EXPECT_TRUE(has(text, "HostSync layer_norm -> print")) << text;
  EXPECT_TRUE(has(text, "hint:")) << text;
}

TEST(Explain, TinyUnifiedBufferReportsBufferCapacity) {
  ExplainReport r = explain(seed_graph({1, 4, 4096}), {.options = {{"ub_bytes", "1024"}}});
  std::vector<FusionDecision> all = r.notes;
  for (auto& b : r.boundaries) all.push_back(b.decision);
  bool found = false;
  for (auto& d : all) {
    if (d.reason != FusionReason::BufferCapacity) continue;
    found = true;
    EXPECT_TRUE(has(d.hint, "raise ub_bytes to at least")) << d.hint;
    EXPECT_TRUE(has(d.message, "1024")) << d.message;
  }
  EXPECT_TRUE(found) << format_explain(r);
  EXPECT_EQ(r.ub_bytes, 1024);
  EXPECT_TRUE(has(format_explain(r), "BufferCapacity"));
}

TEST(Explain, RulesFileReportsDisabledByRuleNamingTheFile) {
  std::string dir = temp_dir("explain_rules");
  std::string rules = dir + "/rules.json";
  std::ofstream(rules)
      << R"({"Switch": {"UBFusion": {"ALL": "on", "ReductionEpilogueFusion": "off"}}})";
  ExplainReport r =
      explain(seed_graph(kShape), {.options = {{"ge.fusion_optimizer_config_path", rules}}});
  const ExplainBoundary* b = find_boundary(r, FusionReason::DisabledByRule);
  ASSERT_NE(b, nullptr) << format_explain(r);
  EXPECT_EQ(b->decision.producer, "layer_norm");
  EXPECT_EQ(b->decision.consumer, "silu");
  EXPECT_TRUE(has(b->decision.message, "ReductionEpilogueFusion")) << b->decision.message;
  EXPECT_TRUE(has(b->decision.message, rules)) << b->decision.message;
  EXPECT_FALSE(b->decision.hint.empty());
  EXPECT_EQ(r.graph_kernels.size(), 2u);
}

TEST(Explain, SymbolicDimsNeedValues) {
  Graph g = seed_graph(kShape, false, true);
  try {
    explain(g);
    FAIL() << "explain without dims";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "--dim batch=N")) << e.what();
    EXPECT_TRUE(has(e.what(), "seq")) << e.what();
  }
  EXPECT_THROW(explain(g, {.dims = {{"batch", 2}, {"seq", 8}, {"heads", 4}}}), Error);
  ExplainReport r = explain(g, {.dims = {{"batch", 2}, {"seq", 8}}});
  EXPECT_EQ(r.graph_bytes, explain(seed_graph(kShape)).graph_bytes);
}

TEST(Explain, JsonHoldsKernelsBoundariesAndBytes) {
  ExplainReport r = explain(seed_graph(kShape, true));
  json j = json::parse(explain_json(r));
  EXPECT_EQ(j["graph"]["kernels"].size(), 3u);
  EXPECT_EQ(j["eager"]["bytes"].get<int64_t>(), r.eager_bytes);
  EXPECT_EQ(j["graph"]["bytes"].get<int64_t>(), r.graph_bytes);
  ASSERT_FALSE(j["boundaries"].empty());
  EXPECT_EQ(j["boundaries"][0]["reason"], "HostSync");
  for (const char* key : {"producer", "consumer", "message", "hint", "bytes", "values"}) {
    EXPECT_TRUE(j["boundaries"][0].contains(key)) << key;
  }
  EXPECT_GT(j["speedup_bound"].get<double>(), 1.0);
}

TEST(Explain, DotPicturesNameKernelsAndReasons) {
  ExplainReport r = explain(seed_graph(kShape, true));
  std::string before = before_dot(r), after = after_dot(r);
  for (const char* op : {"add", "layer_norm", "print", "silu"}) {
    EXPECT_TRUE(has(before, op)) << op;
    EXPECT_TRUE(has(after, op)) << op;
  }
  EXPECT_FALSE(has(before, "cluster"));
  EXPECT_TRUE(has(after, "subgraph cluster_k0"));
  EXPECT_TRUE(has(after, "label=\"FusedAddLayerNorm"));
  EXPECT_TRUE(has(after, "HostSync"));
  EXPECT_TRUE(has(after, "label=\"UB\""));  // add -> layer_norm stays in the unified buffer
}

TEST(Explain, DotFilesAreAcceptedByGraphviz) {
  std::string dir = temp_dir("explain_dot");
  ExplainReport r = explain(seed_graph(kShape, true));
  DotFiles f = write_dot_files(r, dir);
  EXPECT_TRUE(std::filesystem::exists(dir + "/before.dot"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/after.dot"));
  if (!have_graphviz()) GTEST_SKIP() << "Graphviz dot not installed: " << f.note;
  EXPECT_EQ(f.note, "");
  EXPECT_EQ(f.written.size(), 4u);
  for (const char* svg : {"/before.svg", "/after.svg"}) {
    std::ifstream in(dir + svg);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(has(text, "<svg")) << svg;
  }
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

// docs/profiling.md explains every reason code and shows the pictures it links.
TEST(Explain, DocsListEveryReasonCodeAndTheirPictures) {
  std::ifstream f(std::string(UBFUSE_SOURCE_DIR) + "/docs/profiling.md");
  std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (int r = int(FusionReason::HostSync); r <= int(FusionReason::NotProfitable); r++) {
    std::string name(fusion_reason_name(FusionReason(r)));
    EXPECT_TRUE(has(doc, "| `" + name + "` |")) << name << " is not in the reason table";
  }
  for (const char* img : {"demo-before.svg", "demo-after.svg", "demo-print-mid-after.svg"}) {
    EXPECT_TRUE(has(doc, std::string("img/") + img)) << img;
    EXPECT_TRUE(std::filesystem::exists(std::string(UBFUSE_SOURCE_DIR) + "/docs/img/" + img))
        << img;
  }
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

// The issue's acceptance commands, through the CLI binary when it is built beside the tests.
TEST(Cli, DemoTraceAndExplainPrintMidDot) {
  std::string cli = std::string(UBFUSE_BINARY_DIR) + "/ubfuse";
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << cli << " is not built";
  fixed_bandwidth();
  std::string dir = temp_dir("cli");
  std::string log = dir + "/log", out = dir + "/out";
  ASSERT_EQ(std::system((cli + " demo --shape 1,8,64 --iters 2 --trace " + log + " > " + dir +
                         "/demo.txt 2>&1")
                            .c_str()),
            0);
  json eager = read_json(log + "/eager.trace.json"), graph = read_json(log + "/graph.trace.json");
  std::set<std::string> eager_names, graph_names;
  for (auto& e : eager["traceEvents"]) {
    if (e["cat"] == "kernel") eager_names.insert(e["name"]);
  }
  for (auto& e : graph["traceEvents"]) {
    if (e["cat"] == "kernel") graph_names.insert(e["name"]);
  }
  EXPECT_EQ(eager_names, (std::set<std::string>{"Add", "LayerNorm", "Silu"}));
  EXPECT_EQ(graph_names, (std::set<std::string>{"FusedAddLayerNormSilu"}));

  ASSERT_EQ(std::system((cli + " explain demo --print-mid --shape 1,8,64 --dot " + out + " > " +
                         dir + "/explain.txt 2>&1")
                            .c_str()),
            0);
  std::ifstream f(dir + "/explain.txt");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "HostSync layer_norm -> print")) << text;
  EXPECT_TRUE(std::filesystem::exists(out + "/after.dot"));
  if (have_graphviz()) {
    EXPECT_TRUE(std::filesystem::exists(out + "/after.svg"));
  }
}

// The demo names the store profile in effect; UBFUSE_STORE_PROFILE overrides the CPU's, and a
// bad one is an error that lists the profiles.
TEST(Cli, DemoReportsTheStoreProfile) {
  std::string cli = std::string(UBFUSE_BINARY_DIR) + "/ubfuse";
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << cli << " is not built";
  std::string dir = temp_dir("cli_profile");
  ASSERT_EQ(std::system(("UBFUSE_STORE_PROFILE=zen3 " + cli +
                         " demo --shape 1,8,64 --iters 1 --json > " + dir + "/demo.json")
                            .c_str()),
            0);
  EXPECT_EQ(read_json(dir + "/demo.json")["store_profile"], "zen3");
  // The CLI restarts itself with OpenMP's idle threads sleeping (util/omp_env.h) unless told not
  // to, and keeps a policy the user set.
  for (const char* env : {"env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ",
                          "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=ACTIVE ",
                          "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT UBFUSE_KEEP_OMP_WAIT=1 "}) {
    ASSERT_EQ(
        std::system(
            (env + cli + " demo --shape 1,8,64 --iters 1 --json > " + dir + "/omp.json").c_str()),
        0);
    const std::string want = std::string(env).find("ACTIVE") != std::string::npos ? "ACTIVE"
                             : std::string(env).find("KEEP") != std::string::npos ? ""
                                                                                  : "PASSIVE";
    EXPECT_EQ(read_json(dir + "/omp.json")["omp_wait_policy"], want) << env;
    EXPECT_EQ(read_json(dir + "/omp.json")["gomp_spincount"], want == "PASSIVE" ? "0" : "") << env;
  }
  EXPECT_NE(std::system(("UBFUSE_STORE_PROFILE=fastest " + cli + " demo --shape 1,8,64 > " + dir +
                         "/bad.txt 2>&1")
                            .c_str()),
            0);
  std::ifstream f(dir + "/bad.txt");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "UBFUSE_STORE_PROFILE: 'fastest' is not a store profile; valid: zen3"))
      << text;
}

}  // namespace
}  // namespace ubfuse
