// Building generated kernels: the cache directory, units compiled in parallel, the progress
// callback (and cancelling through it), the progress line, and the build's numbers in stats, run
// --json and explain.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cpp_compile.h"
#include "compiler/progress_line.h"
#include "test_util.h"
#include "ubfuse/explain.h"
#include "util/machine_info.h"

namespace ubfuse {
namespace {

// The tests' shared kernel cache (its precompiled header is built once); sources carry a tag new
// to every run, so their units are not in the cache yet.
const std::string kCache = std::string(UBFUSE_BINARY_DIR) + "/kernel-cache";

std::string fresh_tag(const std::string& name) {
  return name + std::to_string(::getpid()) + "_" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

// `n` units, unit i defines `int unit_<tag>_<i>()` returning i * 10 + kernels.
std::vector<cpp::UnitSource> units(int n, const std::string& tag) {
  std::vector<cpp::UnitSource> u;
  for (int i = 0; i < n; i++) {
    int kernels = i + 1;
    u.push_back({"extern \"C\" int unit_" + tag + "_" + std::to_string(i) + "() { return " +
                     std::to_string(i * 10 + kernels) + "; }\n",
                 "unit " + std::to_string(i), kernels});
  }
  return u;
}

int call(const std::shared_ptr<void>& lib, const std::string& symbol) {
  return reinterpret_cast<int (*)()>(cpp::library_symbol(lib, symbol))();
}

// The kernel cache and the measurement caches (bandwidth, costs) share one directory, chosen by
// the same variables in the same order.
TEST(KernelBuild, CacheDirectoriesFollowTheEnvironment) {
  const char* names[] = {"UBFUSE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    saved.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    ::unsetenv(n);
  }
  auto expect_dir = [](const std::string& dir) {
    EXPECT_EQ(cpp::kernel_cache_dir(""), dir);
    EXPECT_EQ(machine_cache_path("costs.json"), dir + "/costs.json");
  };
  ::setenv("HOME", "/h", 1);
  expect_dir("/h/.cache/ubfuse");
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  expect_dir("/x/ubfuse");
  ::setenv("UBFUSE_CACHE_DIR", "/u", 1);
  expect_dir("/u");
  EXPECT_EQ(cpp::kernel_cache_dir("/opt"), "/opt");  // the cache_dir option comes first
  for (const char* n : names) ::setenv(n, "", 1);    // set but empty counts as unset
  EXPECT_EQ(cpp::kernel_cache_dir(""), "/tmp/ubfuse-cache-" + std::to_string(::getuid()));
  EXPECT_EQ(machine_cache_path("costs.json"), "");  // nowhere to keep a measurement
  for (size_t i = 0; i < saved.size(); i++) {
    if (saved[i]) {
      ::setenv(names[i], saved[i]->c_str(), 1);
    } else {
      ::unsetenv(names[i]);
    }
  }
}

TEST(KernelBuild, UnitsCompileInParallelAndReportProgress) {
  ASSERT_TRUE(cpp::toolchain().available) << cpp::toolchain().why_not;
  const std::string tag = fresh_tag("p");
  std::vector<CompileProgress> seen;
  CompileProgress last;
  auto before = cpp::build_counters();
  auto libs = cpp::build_libraries(
      units(3, tag), kCache, 2, [&](const CompileProgress& p) { seen.push_back(p); }, &last);
  ASSERT_EQ(libs.size(), 3u);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(call(libs[i], "unit_" + tag + "_" + std::to_string(i)), i * 11 + 1);
  }
  EXPECT_EQ(cpp::build_counters().compiles, before.compiles + 3);
  ASSERT_GE(seen.size(), 2u);
  // First: nothing done of 1 + 2 + 3 kernels; last: all done, none from the cache.
  EXPECT_EQ(seen.front().kernels_done, 0);
  EXPECT_EQ(seen.front().kernels_total, 6);
  EXPECT_FALSE(seen.front().finished);
  EXPECT_TRUE(seen.back().finished);
  EXPECT_EQ(seen.back().kernels_done, 6);
  EXPECT_EQ(seen.back().kernels_cached, 0);
  EXPECT_EQ(seen.back().jobs, 2);
  for (size_t i = 1; i < seen.size(); i++)
    EXPECT_GE(seen[i].kernels_done, seen[i - 1].kernels_done);
  EXPECT_EQ(last.kernels_done, 6);
  EXPECT_TRUE(last.finished);

  // Again: every unit from the cache, no compiler run.
  libs.clear();
  auto mid = cpp::build_counters();
  CompileProgress again;
  libs = cpp::build_libraries(units(3, tag), kCache, 2, {}, &again);
  EXPECT_EQ(cpp::build_counters().compiles, mid.compiles);
  EXPECT_EQ(cpp::build_counters().cache_hits, mid.cache_hits + 3);
  EXPECT_EQ(again.kernels_cached, 6);
  EXPECT_EQ(again.jobs, 0);
  EXPECT_EQ(call(libs[2], "unit_" + tag + "_2"), 23);
}

// Two builds of the same new unit at once (as two processes starting one model): the key's lock
// file lets one compile while the other waits and then loads the result.
TEST(KernelBuild, ConcurrentBuildsOfOneUnitCompileItOnce) {
  ASSERT_TRUE(cpp::toolchain().available) << cpp::toolchain().why_not;
  const std::string tag = fresh_tag("l");
  auto before = cpp::build_counters();
  std::vector<std::shared_ptr<void>> got[2];
  std::thread other([&] { got[1] = cpp::build_libraries(units(1, tag), kCache, 1, {}, nullptr); });
  got[0] = cpp::build_libraries(units(1, tag), kCache, 1, {}, nullptr);
  other.join();
  const auto after = cpp::build_counters();
  // Each call found the unit missing when it looked; one compiled it and the other found it
  // after waiting (counted as a cache hit), unless it came late enough to find it at once.
  EXPECT_EQ(after.compiles, before.compiles + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  for (auto& libs : got) EXPECT_EQ(call(libs.at(0), "unit_" + tag + "_0"), 1);
  // The unit's lock file (ubk-<key>.lock beside its ubk-<key>.so) is gone with the build. Only
  // this one: tests running beside this one hold locks of their own units in the shared cache.
  Dl_info info{};
  ASSERT_NE(::dladdr(cpp::library_symbol(got[0].at(0), "unit_" + tag + "_0"), &info), 0);
  std::string lock = info.dli_fname;
  ASSERT_TRUE(lock.size() > 3 && lock.compare(lock.size() - 3, 3, ".so") == 0) << lock;
  lock.replace(lock.size() - 3, 3, ".lock");
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(lock).parent_path())) << lock;
  EXPECT_FALSE(std::filesystem::exists(lock)) << lock;
}

TEST(KernelBuild, AFailingUnitNamesItselfAndTheOthersStillLoadLater) {
  ASSERT_TRUE(cpp::toolchain().available) << cpp::toolchain().why_not;
  const std::string tag = fresh_tag("f");
  auto u = units(2, tag);
  u.push_back({"this is not C++;\n", "FusedBrokenGroup", 1});
  EXPECT_TRUE(testing::throws_with([&] { cpp::build_libraries(u, kCache, 2, {}, nullptr); },
                                   {"FusedBrokenGroup", "failed-", "codegen=interpreter"}));
  u.pop_back();
  auto libs = cpp::build_libraries(u, kCache, 2, {}, nullptr);
  EXPECT_EQ(call(libs[1], "unit_" + tag + "_1"), 12);
}

TEST(KernelBuild, AThrowingCallbackCancelsTheBuild) {
  ASSERT_TRUE(cpp::toolchain().available) << cpp::toolchain().why_not;
  const std::string tag = fresh_tag("c");
  // Throws at the first report after the compilers started (the one before them has 0 ms).
  int calls = 0;
  auto cancel = [&](const CompileProgress& p) {
    calls++;
    if (!p.finished && p.elapsed_ms > 0) throw std::runtime_error("stop requested");
  };
  try {
    cpp::build_libraries(units(4, tag), kCache, 2, cancel, nullptr);
    FAIL() << "the build was not cancelled";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "stop requested");
  }
  EXPECT_GE(calls, 2);
  // Nothing half-built is left to be mistaken for a cache entry: a new build works.
  auto libs = cpp::build_libraries(units(4, tag), kCache, 2, {}, nullptr);
  EXPECT_EQ(call(libs[3], "unit_" + tag + "_3"), 34);
}

TEST(KernelBuild, CompileReportsTheBuildAndTakesACallback) {
  ASSERT_TRUE(cpp::toolchain().available) << cpp::toolchain().why_not;
  Graph g = testing::seed_block({"batch", 80});
  Options o = {{"cache_dir", kCache}, {"compile_jobs", "2"}, {"progress", "off"}};
  int calls = 0;
  CompiledModel m = compile(g, o, [&](const CompileProgress&) { calls++; });
  EXPECT_GE(calls, 2);
  const CompileProgress& k = m.stats().kernels;
  EXPECT_EQ(k.kernels_total, 1);                     // the seed block is one fused kernel
  EXPECT_EQ(k.jobs, k.kernels_cached == 0 ? 1 : 0);  // one unit: at most one compiler
  EXPECT_TRUE(k.finished);
  EXPECT_GT(k.elapsed_ms, 0);
  CompiledModel again = compile(g, o);
  EXPECT_EQ(again.stats().kernels.kernels_cached, 1);
  EXPECT_EQ(again.stats().kernels.jobs, 0);
  // Eager mode generates nothing.
  o["fusion"] = "0";
  EXPECT_EQ(compile(g, o).stats().kernels.kernels_total, 0);
  // A callback's exception comes out of compile() (the first report comes before any compiler).
  o.erase("fusion");
  EXPECT_THROW(compile(g, o, [](const CompileProgress&) { throw std::runtime_error("no"); }),
               std::runtime_error);
}

TEST(KernelBuild, OptionsAreChecked) {
  Graph g = testing::seed_block({"batch", 8});
  EXPECT_TRUE(testing::throws_with(
      [&] {
        compile(g, {{"compile_jobs", "-1"}});
      },
      {"compile_jobs", "-1", "[0, 1024]"}));
  EXPECT_TRUE(testing::throws_with(
      [&] {
        compile(g, {{"progress", "yes"}});
      },
      {"progress", "yes", "auto, on, off"}));
}

std::string line_output(const std::string& mode, const std::vector<CompileProgress>& steps) {
  std::FILE* f = std::tmpfile();
  {
    ProgressLine line(mode, f);  // a file: not a terminal
    for (auto& p : steps) line.update(p);
  }
  std::rewind(f);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  std::fclose(f);
  return out;
}

TEST(KernelBuild, ProgressLineOffATerminalOnlyWhenAsked) {
  std::vector<CompileProgress> cold = {{0, 5, 1, 2, 0, false},
                                       {0, 5, 1, 2, 100, false},
                                       {3, 5, 1, 2, 900, false},
                                       {5, 5, 1, 2, 2300, true}};
  EXPECT_EQ(line_output("auto", cold), "");
  EXPECT_EQ(line_output("off", cold), "");
  EXPECT_EQ(line_output("on", cold),
            "[ubfuse] compiling fused kernels 0/5 (1 cached, 2 jobs)\n"
            "[ubfuse] compiling fused kernels 3/5 (1 cached, 2 jobs)\n"
            "[ubfuse] compiled 4 fused kernels in 2.3 s (2 jobs, 1 from the cache)\n");
  std::vector<CompileProgress> warm = {{4, 4, 4, 0, 0, false}, {4, 4, 4, 0, 1, true}};
  EXPECT_EQ(line_output("on", warm), "[ubfuse] 4 fused kernels from the cache\n");
  EXPECT_EQ(line_output("auto", warm), "");
}

TEST(KernelBuild, ExplainReportsCompileTimeAndCacheHits) {
  Graph g = testing::seed_block({"batch", 64});
  ExplainOptions eo;
  eo.dims = {{"batch", 2}};
  eo.options = {{"progress", "off"}};
  ExplainReport r = explain(g, eo);
  EXPECT_NE(format_explain(r).find("Compile: graph mode "), std::string::npos);
  const std::string text = format_explain(r);
  EXPECT_TRUE(text.find("1 generated kernel: 1 compiled (1 job, ") != std::string::npos ||
              text.find("1 generated kernel, all from the kernel cache") != std::string::npos)
      << text;
  nlohmann::json j = nlohmann::json::parse(explain_json(r));
  EXPECT_EQ(j["graph"]["compile"]["generated_kernels"], 1);
  EXPECT_EQ(j["eager"]["compile"]["generated_kernels"], 0);
  EXPECT_GT(j["graph"]["compile"]["compile_ms"].get<double>(), 0);
  EXPECT_EQ(j["graph"]["compile"]["kernels_compiled"].get<int>() +
                j["graph"]["compile"]["kernel_cache_hits"].get<int>(),
            1);
}

}  // namespace
}  // namespace ubfuse
