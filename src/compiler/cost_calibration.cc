#include "compiler/cost_calibration.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "kernels/cpu/attention.h"
#include "runtime/trace_hook.h"
#include "ubfuse/builder.h"
#include "ubfuse/compile.h"
#include "ubfuse/error.h"
#include "ubfuse/model.h"
#include "util/env.h"
#include "util/machine_info.h"

namespace ubfuse {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Best wall seconds of `runs` runs of m on random inputs (after one warm-up).
double best_seconds(const CompiledModel& m, const std::map<std::string, Tensor>& in, int runs) {
  std::map<std::string, Tensor> out = m.run(in);
  double best = 1e30;
  for (int i = 0; i < runs; i++) {
    const auto t0 = std::chrono::steady_clock::now();
    m.run_into(in, out);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

Options base_options(int threads, bool fusion) {
  return {{"fusion", fusion ? "1" : "0"},
          {"num_threads", std::to_string(threads)},
          {"cost_model", "off"},  // what is measured is each form as such
          {"progress", "off"}};
}

double measure_bytes_per_s(int threads) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2048, 4096});
  auto y = b.input("y", DType::f32, {2048, 4096});
  b.output("z", b.add(x, y));
  CompiledModel m = compile(b.build(), base_options(threads, false));
  const std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {2048, 4096}, 1)},
                                            {"y", Tensor::random(DType::f32, {2048, 4096}, 2)}};
  return 3.0 * 2048 * 4096 * 4 / best_seconds(m, in, 5);
}

double measure_launch_s(int threads) {
  constexpr int kChain = 64;
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {8});
  auto y = b.input("y", DType::f32, {8});
  auto v = x;
  for (int i = 0; i < kChain; i++) v = b.add(v, y);  // nothing the simplifier folds away
  b.output("z", v);
  CompiledModel m = compile(b.build(), base_options(threads, false));
  if (m.kernels().size() != size_t(kChain)) {
    throw Error("cost calibration: the launch chain has " + std::to_string(m.kernels().size()) +
                " kernels, not " + std::to_string(kChain));
  }
  return best_seconds(
             m,
             {{"x", Tensor::random(DType::f32, {8}, 1)}, {"y", Tensor::random(DType::f32, {8}, 2)}},
             20) /
         kChain;
}

double measure_matmul_flops_per_s(int threads) {
  GraphBuilder b;
  auto x = b.input("a", DType::f32, {512, 512});
  auto y = b.input("b", DType::f32, {512, 512});
  b.output("c", b.matmul(x, y));
  CompiledModel m = compile(b.build(), base_options(threads, false));
  const std::map<std::string, Tensor> in = {{"a", Tensor::random(DType::f32, {512, 512}, 1)},
                                            {"b", Tensor::random(DType::f32, {512, 512}, 2)}};
  return 2.0 * 512 * 512 * 512 / best_seconds(m, in, 5);
}

// Wall seconds of the attention chain over `heads` matrices of q_len x dim queries against
// k_len keys, as one kernel or (rules_path given) as MatMuls.
double time_attention_chain(int threads, DType dt, int64_t heads, int64_t q_len, int64_t k_len,
                            int64_t dim, const std::string& rules_path) {
  GraphBuilder b;
  auto q = b.input("q", dt, {1, heads, q_len, dim});
  auto kt = b.input("kt", dt, {1, heads, dim, k_len});
  auto v = b.input("v", dt, {1, heads, k_len, dim});
  b.output("o", b.matmul(b.softmax(b.mul(b.matmul(q, kt), 0.125)), v));
  Options o = base_options(threads, true);
  if (!rules_path.empty()) o["rules"] = rules_path;
  CompiledModel m = compile(b.build(), o);
  const std::map<std::string, Tensor> in = {{"q", Tensor::random(dt, {1, heads, q_len, dim}, 1)},
                                            {"kt", Tensor::random(dt, {1, heads, dim, k_len}, 2)},
                                            {"v", Tensor::random(dt, {1, heads, k_len, dim}, 3)}};
  const double flops = 4.0 * double(heads) * double(q_len) * double(k_len) * double(dim);
  return best_seconds(m, in, flops > 2e8 ? 3 : 10);
}

// A rules file that turns the flash-style kernel off, for the other form; removed with it.
class SplitRules {
 public:
  SplitRules() {
    std::string name =
        (fs::temp_directory_path() / "ubfuse-calibration-XXXXXX.json").string();  // mkstemps'
    const int fd = ::mkstemps(name.data(), 5);  // a fresh file of ours (no planted symlink)
    if (fd < 0) throw Error("cost calibration: cannot create " + name);
    const std::string text = R"({"Switch": {"UBFusion": {"AttentionFusion": "off"}}})";
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    path_ = name;
    if (!ok) {
      std::error_code ec;
      fs::remove(path_, ec);
      throw Error("cost calibration: cannot write " + name);
    }
  }
  ~SplitRules() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  SplitRules(const SplitRules&) = delete;
  SplitRules& operator=(const SplitRules&) = delete;
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

CostParams measure(int threads, const std::string& key) {
  TraceMute mute;  // not the user's compiles and runs
  CostParams p;
  p.source = "measured";
  p.machine = key;
  p.bytes_per_s = measure_bytes_per_s(threads);
  p.launch_s = measure_launch_s(threads);
  p.matmul_flops_per_s = measure_matmul_flops_per_s(threads);
  const SplitRules rules;
  constexpr int64_t kHeads = 4, kDim = 64;
  for (int d = 0; d < 2; d++) {
    const DType dt = d == 0 ? DType::f32 : DType::bf16;
    for (int l = 0; l < 2; l++) {
      const int64_t len = p.attention_lengths[l];
      const double flops = 4.0 * kHeads * double(len) * double(len) * kDim;
      p.flash_flops_per_s[d][l] =
          flops / time_attention_chain(threads, dt, kHeads, len, len, kDim, "");
      p.split_flops_per_s[d][l] =
          flops / time_attention_chain(threads, dt, kHeads, len, len, kDim, rules.path());
    }
  }
  return p;
}

json to_json(const CostParams& p) {
  return {{"bytes_per_s", p.bytes_per_s},
          {"launch_s", p.launch_s},
          {"matmul_flops_per_s", p.matmul_flops_per_s},
          {"attention_lengths", {p.attention_lengths[0], p.attention_lengths[1]}},
          {"flash_flops_per_s",
           {{p.flash_flops_per_s[0][0], p.flash_flops_per_s[0][1]},
            {p.flash_flops_per_s[1][0], p.flash_flops_per_s[1][1]}}},
          {"split_flops_per_s",
           {{p.split_flops_per_s[0][0], p.split_flops_per_s[0][1]},
            {p.split_flops_per_s[1][0], p.split_flops_per_s[1][1]}}},
          {"kernels", kCostsKernelRevision},
          {"measured_unix", unix_now()}};
}

// Whether a cache entry is fresh and was measured with these kernels.
bool current(const json& e) {
  return machine_cache_fresh(e) && e.contains("kernels") && e["kernels"].is_number_integer() &&
         e["kernels"].get<int>() == kCostsKernelRevision;
}

// The entry's figures, when each is there and positive (else nullopt: measure again).
std::optional<CostParams> from_json(const json& e, const std::string& key) {
  auto pos = [](const json& v) { return v.is_number() && v.get<double>() > 0; };
  auto pair = [&](const json& v) {
    return v.is_array() && v.size() == 2 && pos(v[0]) && pos(v[1]);
  };
  if (!current(e) || !e.contains("bytes_per_s") || !pos(e["bytes_per_s"]) ||
      !e.contains("launch_s") || !pos(e["launch_s"]) || !e.contains("matmul_flops_per_s") ||
      !pos(e["matmul_flops_per_s"]) || !e.contains("attention_lengths") ||
      !pair(e["attention_lengths"]) || !e.contains("flash_flops_per_s") ||
      !e.contains("split_flops_per_s")) {
    return std::nullopt;
  }
  for (const char* k : {"flash_flops_per_s", "split_flops_per_s"}) {
    const json& v = e[k];
    if (!v.is_array() || v.size() != 2 || !pair(v[0]) || !pair(v[1])) return std::nullopt;
  }
  CostParams p;
  p.source = "cache";
  p.machine = key;
  p.bytes_per_s = e["bytes_per_s"].get<double>();
  p.launch_s = e["launch_s"].get<double>();
  p.matmul_flops_per_s = e["matmul_flops_per_s"].get<double>();
  for (int l = 0; l < 2; l++) {
    const double len = e["attention_lengths"][size_t(l)].get<double>();
    if (!(len >= 1 && len < double(int64_t(1) << 31))) return std::nullopt;
    p.attention_lengths[l] = int64_t(len);
    for (int d = 0; d < 2; d++) {
      p.flash_flops_per_s[d][l] = e["flash_flops_per_s"][size_t(d)][size_t(l)].get<double>();
      p.split_flops_per_s[d][l] = e["split_flops_per_s"][size_t(d)][size_t(l)].get<double>();
    }
  }
  if (p.attention_lengths[0] < 1 || p.attention_lengths[1] <= p.attention_lengths[0]) {
    return std::nullopt;
  }
  return p;
}

}  // namespace

const CostParams& builtin_costs() {
  static const CostParams p = [] {
    CostParams c;  // the defaults in fusion/cost.h: the flash-style kernel wins in f32
    // oneDNN's bf16 matmuls run at twice the f32 rate on AVX512_BF16; elsewhere bf16 is
    // converted and the flash-style kernel, computing in f32, wins.
    const double bf16_split = cpu::has_bf16_dot_products() ? 200e9 : 50e9;
    c.split_flops_per_s[1][0] = c.split_flops_per_s[1][1] = bf16_split;
    c.source = "builtin";
    return c;
  }();
  return p;
}

namespace {
// One lock for both writers of costs.json in this process.
std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

const CostParams& calibrated_costs(int threads) {
  // By cache path and key; an entry is never replaced (callers hold references to it).
  static std::map<std::string, CostParams> done;
  std::lock_guard<std::mutex> lock(cache_mutex());
  const std::string key = machine_key(threads);
  const std::string path = machine_cache_path("costs.json");
  const std::string slot = path + "\n" + key;
  if (auto it = done.find(slot); it != done.end()) return it->second;
  if (!env_on("UBFUSE_REMEASURE_COSTS")) {
    json j = read_machine_cache(path);
    if (j.contains("machines") && j["machines"].contains(key)) {
      if (auto p = from_json(j["machines"][key], key)) return done[slot] = *p;
    }
  }
  CostParams p;
  try {
    p = measure(threads, key);
  } catch (const std::exception& e) {
    // The model still decides, on fixed figures, and says so in every NotProfitable note.
    p = builtin_costs();
    p.source = std::string("builtin: calibration failed: ") + e.what();
    return done[slot] = p;
  }
  json j = read_machine_cache(path);  // re-read: another process may have added its machine
  if (!j.contains("machines")) j["machines"] = json::object();
  j["machines"][key] = to_json(p);  // timings of single chains (timed_attention) start over
  write_machine_cache(path, j);
  return done[slot] = p;
}

std::optional<AttentionTiming> timed_attention(int threads, const AttentionProbe& probe) {
  const double flops = 4.0 * double(probe.heads) * double(probe.q_len) * double(probe.k_len) *
                       double(probe.head_dim);
  if (flops > 4e9) return std::nullopt;
  // Every answer of this process, failures included, by cache path, key and probe: each probe is
  // timed at most once per process (the partition asks again in each of its rounds).
  static std::map<std::string, std::optional<AttentionTiming>> done;
  std::lock_guard<std::mutex> lock(cache_mutex());
  const std::string key = machine_key(threads);
  const std::string path = machine_cache_path("costs.json");
  const std::string slot = path + "\n" + key + "\n" + probe.key();
  if (auto it = done.find(slot); it != done.end()) {
    std::optional<AttentionTiming> t = it->second;
    if (t) t->source = "cache";
    return t;
  }
  json j = read_machine_cache(path);
  if (!env_on("UBFUSE_REMEASURE_COSTS") && j.contains("machines") && j["machines"].contains(key)) {
    const json& e = j["machines"][key];
    if (current(e) && e.contains("attention") && e["attention"].is_object() &&
        e["attention"].contains(probe.key())) {
      const json& t = e["attention"][probe.key()];
      if (t.is_array() && t.size() == 2 && t[0].is_number() && t[1].is_number() &&
          t[0].get<double>() > 0 && t[1].get<double>() > 0) {
        return done[slot] = AttentionTiming{t[0].get<double>(), t[1].get<double>(), "cache"};
      }
    }
  }
  AttentionTiming t;
  t.source = "measured";
  try {
    TraceMute mute;
    const SplitRules rules;
    t.flash_s = time_attention_chain(threads, probe.dtype, probe.heads, probe.q_len, probe.k_len,
                                     probe.head_dim, "");
    t.split_s = time_attention_chain(threads, probe.dtype, probe.heads, probe.q_len, probe.k_len,
                                     probe.head_dim, rules.path());
  } catch (const std::exception&) {
    return done[slot] = std::nullopt;  // the estimates decide
  }
  // Kept beside the calibration's figures; an entry without them gets them on its first use.
  j = read_machine_cache(path);
  if (!j.contains("machines")) j["machines"] = json::object();
  json& e = j["machines"][key];
  // An entry of other kernels starts over (its calibration is measured again when next read).
  if (!e.is_object() || !current(e)) e = json::object({{"kernels", kCostsKernelRevision}});
  if (!e.contains("attention") || !e["attention"].is_object()) e["attention"] = json::object();
  e["attention"][probe.key()] = {t.flash_s, t.split_s};
  if (!e.contains("measured_unix")) e["measured_unix"] = unix_now();
  write_machine_cache(path, j);
  return done[slot] = t;
}

}  // namespace ubfuse
