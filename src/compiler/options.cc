#include "compiler/options.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "codegen/kernel_ir.h"
#include "compiler/cost_calibration.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  throw Error("option '" + key + "': bad value '" + v + "'; valid: 0, 1 (or true/false, on/off)");
}

int64_t parse_int(const std::string& key, const std::string& v, int64_t lo, int64_t hi) {
  size_t pos = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos != v.size() || v.empty() || x < lo || x > hi) {
    throw Error("option '" + key + "': bad value '" + v + "'; valid: an integer in [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

using Setter = std::function<void(CompileConfig&, const std::string& key, const std::string& v)>;

struct Entry {
  OptionSpec spec;
  Setter set;
};

// where: "option 'cost_model'" or the environment variable.
std::string cost_model_value(const std::string& where, const std::string& v) {
  if (v != "calibrated" && v != "builtin" && v != "off") {
    throw Error(where + ": bad value '" + v + "'; valid: calibrated, builtin, off");
  }
  return v;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {{"ge.exec.enableOperatorFusion", "0|1", "graph mode fusion on (1) or eager (0)"},
       [](auto& c, auto& k, auto& v) { c.fusion = parse_bool(k, v); }},
      {{"fusion", "0|1", "native alias of ge.exec.enableOperatorFusion"},
       [](auto& c, auto& k, auto& v) { c.fusion = parse_bool(k, v); }},
      {{"ge.common_graph_optimizer", "0|1", "run the simplify and canonicalize passes"},
       [](auto& c, auto& k, auto& v) { c.graph_optimizer = parse_bool(k, v); }},
      {{"ge.fusion_optimizer_config_path", "PATH", "fusion rules file (JSON)"},
       [](auto& c, auto&, auto& v) { c.rules_path = v; }},
      {{"ge.fusionSwitchFile", "PATH", "fusion rules file (JSON), the CANN key"},
       [](auto& c, auto&, auto& v) { c.rules_path = v; }},
      {{"rules", "PATH", "native alias of the rules file path"},
       [](auto& c, auto&, auto& v) { c.rules_path = v; }},
      {{"ub_bytes", "bytes", "per-thread unified buffer size (e.g. 196608 = Ascend 910's 192 KiB)"},
       [](auto& c, auto& k, auto& v) { c.ub_bytes = parse_int(k, v, 64, int64_t(1) << 30); }},
      {{"num_threads", "N", "worker threads (0: all cores)"},
       [](auto& c, auto& k, auto& v) { c.num_threads = int(parse_int(k, v, 0, 1024)); }},
      {{"matmul_block_bytes", "bytes",
        "MatMul output rows per oneDNN call before the fused epilogue (0: chosen per MatMul)"},
       [](auto& c, auto& k, auto& v) {
         c.matmul_block_bytes = parse_int(k, v, 0, int64_t(1) << 40);
       }},
      {{"codegen", "cpp|interpreter", "fused kernels as generated C++ or the tile interpreter"},
       [](auto& c, auto& k, auto& v) {
         if (v != "cpp" && v != "interpreter") {
           throw Error("option '" + k + "': bad value '" + v + "'; valid: cpp, interpreter");
         }
         c.codegen = v;
       }},
      {{"ge.dynamic_dims", "\"d,d;d,d\"", "gears of symbolic dims to pre-plan"},
       [](auto& c, auto&, auto& v) { c.dynamic_dims = v; }},
      {{"ge.dynamicDims", "\"d,d;d,d\"", "gears of symbolic dims to pre-plan, the GE key"},
       [](auto& c, auto&, auto& v) { c.dynamic_dims = v; }},
      {{"ge.inputShape", "\"name:d,d;...\"", "input shapes with -1 for the dims the gears fill"},
       [](auto& c, auto&, auto& v) { c.input_shape = v; }},
      {{"ge.dynamic_dims_strict", "0|1", "reject shapes outside the gears"},
       [](auto& c, auto& k, auto& v) { c.dynamic_dims_strict = parse_bool(k, v); }},
      {{"dynamic_dims_strict", "0|1", "native alias of ge.dynamic_dims_strict"},
       [](auto& c, auto& k, auto& v) { c.dynamic_dims_strict = parse_bool(k, v); }},
      {{"memory_limit", "bytes", "fail at compile time if planned memory exceeds this"},
       [](auto& c, auto& k, auto& v) { c.memory_limit = parse_int(k, v, 0, INT64_MAX); }},
      {{"cache_dir", "PATH", "where generated kernels are cached"},
       [](auto& c, auto&, auto& v) { c.cache_dir = v; }},
      {{"compile_jobs", "N",
        "compiler processes run at once for generated kernels (0: one per core)"},
       [](auto& c, auto& k, auto& v) { c.compile_jobs = int(parse_int(k, v, 0, 1024)); }},
      {{"progress", "auto|on|off",
        "the 'compiling fused kernels 3/18' line on stderr: auto shows it on a terminal"},
       [](auto& c, auto& k, auto& v) {
         if (v != "auto" && v != "on" && v != "off") {
           throw Error("option '" + k + "': bad value '" + v + "'; valid: auto, on, off");
         }
         c.progress = v;
       }},
      {{"cost_model", "calibrated|builtin|off",
        "keep a fused group only when predicted faster than its parts, by figures measured once "
        "per machine (calibrated, the default; UBFUSE_COST_MODEL sets it), fixed figures "
        "(builtin), or keep every group the checks allow (off)"},
       [](auto& c, auto& k, auto& v) { c.cost_model = cost_model_value("option '" + k + "'", v); }},
  };
  return e;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> t = [] {
    std::vector<OptionSpec> out;
    for (auto& e : entries()) out.push_back(e.spec);
    return out;
  }();
  return t;
}

CompileConfig parse_options(const Options& opts) {
  CompileConfig c;
  for (auto& [k, v] : opts) {
    const Entry* found = nullptr;
    for (auto& e : entries()) {
      if (e.spec.key == k) found = &e;
    }
    if (!found) {
      std::string known;
      for (auto& e : entries()) known += (known.empty() ? "" : ", ") + e.spec.key;
      throw Error("unknown option '" + k + "'; valid options: " + known);
    }
    found->set(c, k, v);
  }
  return c;
}

RunConfig run_config(const CompileConfig& c) {
  RunConfig r;
  r.ub_bytes = c.ub_bytes > 0 ? c.ub_bytes : default_ub_bytes();
  r.matmul_block_bytes = c.matmul_block_bytes;
  r.memory_limit = c.memory_limit;
  r.dynamic_dims_strict = c.dynamic_dims_strict;
  r.pool = c.num_threads > 0 ? &ThreadPool::with_threads(c.num_threads) : &ThreadPool::global();
  return r;
}

FusionConfig fusion_config(const CompileConfig& c) {
  FusionConfig f;
  f.ub_bytes = c.ub_bytes > 0 ? c.ub_bytes : default_ub_bytes();
  f.ub_bytes_per_row = ub_bytes_per_row;  // what the generated kernel keeps (codegen)
  std::string model = c.cost_model;
  if (model.empty()) {
    const char* e = std::getenv("UBFUSE_COST_MODEL");
    model = e && *e ? cost_model_value("UBFUSE_COST_MODEL", e) : "calibrated";
  }
  if (model == "builtin") {
    f.costs = []() -> const CostParams& { return builtin_costs(); };
  } else if (model == "calibrated") {
    const int threads = run_config(c).pool->size();
    f.costs = [threads]() -> const CostParams& { return calibrated_costs(threads); };
    f.time_attention = [threads](const AttentionProbe& probe) {
      return timed_attention(threads, probe);
    };
  }
  f.lowers = [](const FusedGroup& g, std::string* why) {
    return g.kind == GroupKind::Attention || kir::lower_group(g, why) != nullptr;
  };
  return f;
}

CodegenConfig codegen_config(const CompileConfig& c) {
  CodegenConfig g;
  g.engine = c.codegen;
  g.cache_dir = c.cache_dir;
  g.jobs =
      c.compile_jobs > 0 ? c.compile_jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  g.progress = c.on_progress;
  g.report = c.kernel_build;
  return g;
}

int64_t default_ub_bytes() {
  static const int64_t v = [] {
    int64_t l2 = 0;
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index2/size");
    std::string s;
    if (f >> s && !s.empty()) {
      int64_t mul = 1;
      if (s.back() == 'K') mul = 1024;
      if (s.back() == 'M') mul = 1024 * 1024;
      try {
        l2 = std::stoll(s.substr(0, s.size() - (mul > 1 ? 1 : 0))) * mul;
      } catch (...) {
        l2 = 0;
      }
    }
    if (l2 <= 0) return int64_t(196608);
    return std::clamp<int64_t>(l2 / 4, 64 * 1024, 1024 * 1024);
  }();
  return v;
}

}  // namespace ubfuse
