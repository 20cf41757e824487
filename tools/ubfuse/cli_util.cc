#include "cli_util.h"

#include <atomic>
#include <csignal>

namespace ubfuse::cli {

namespace {

std::atomic<bool> g_compiling{false}, g_interrupted{false};

extern "C" void on_sigint(int) {
  if (!g_compiling.load() || g_interrupted.load()) {
    std::signal(SIGINT, SIG_DFL);  // not compiling, or a second Ctrl-C: end as usual
    std::raise(SIGINT);
    return;
  }
  g_interrupted.store(true);
}

}  // namespace

InterruptibleCompile::InterruptibleCompile() {
  g_interrupted = false;
  g_compiling = true;
  std::signal(SIGINT, on_sigint);
}

InterruptibleCompile::~InterruptibleCompile() {
  g_compiling = false;
  std::signal(SIGINT, SIG_DFL);
}

CompileProgressFn InterruptibleCompile::callback() const {
  return [](const CompileProgress&) {
    if (g_interrupted.load()) throw Interrupted();
  };
}

Sizes parse_sizes(const std::string& s, const std::string& flag) {
  Sizes out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    if (used != part.size() || part.empty() || v <= 0) {
      throw Error(flag + " '" + s + "': '" + part +
                  "' is not a positive integer; e.g. 2,2048,4096");
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

SymbolBindings parse_dims(const std::vector<std::string>& kvs) {
  SymbolBindings b;
  for (auto& kv : kvs) {
    auto eq = kv.find('=');
    int64_t v = 0;
    size_t used = 0;
    try {
      if (eq != std::string::npos) v = std::stoll(kv.substr(eq + 1), &used);
    } catch (...) {
      used = 0;
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || used != kv.size() - eq - 1 || v <= 0) {
      throw Error("--dim '" + kv + "' must have the form NAME=N with N > 0, e.g. --dim batch=2");
    }
    b[kv.substr(0, eq)] = v;
  }
  return b;
}

Options parse_kv_options(const std::vector<std::string>& kvs) {
  Options o;
  for (auto& kv : kvs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error("--option '" + kv + "' must have the form key=value");
    }
    o[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return o;
}

nlohmann::json kernels_json(const CompiledModel& m) {
  nlohmann::json ks = nlohmann::json::array();
  for (auto& k : m.kernels()) {
    ks.push_back(
        {{"name", k.name}, {"nodes", k.node_names}, {"ops", k.op_types}, {"variant", k.variant}});
  }
  return ks;
}

}  // namespace ubfuse::cli
