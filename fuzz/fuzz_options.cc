// Fuzzes the options parser and what compile() does with the parsed options. The bytes are lines
// "key=value" (a line without '=' is a key with an empty value). Every map either parses or throws
// ubfuse::Error; the options that parse then compile and run a small symbolic model, where an
// Error (a bad gear, a missing rules file, memory_limit) is acceptable and a crash is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/options.h"
#include "ubfuse/ubfuse.h"

namespace {

ubfuse::Options decode(const std::string& text) {
  ubfuse::Options o;
  size_t at = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      o[line] = "";
    } else {
      o[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return o;
}

const ubfuse::Graph& model() {
  static const ubfuse::Graph g = [] {
    ubfuse::GraphBuilder b;
    auto x = b.input("x", ubfuse::f32, {"batch", 16});
    auto r = b.input("r", ubfuse::f32, {"batch", 16});
    b.output("y", b.silu(b.layer_norm(b.add(x, r), nullptr, nullptr)));
    return b.build();
  }();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ubfuse::Options opts = decode(std::string(reinterpret_cast<const char*>(data), size));
  ubfuse::CompileConfig c;
  try {
    c = ubfuse::parse_options(opts);
  } catch (const ubfuse::Error&) {
    return 0;
  }
  // Keep each input cheap and local: no g++ per input, no writes outside the tree, no huge UBs
  // or thread counts (those are valid options, just expensive for a fuzzer).
  if (c.ub_bytes > (int64_t(4) << 20) || c.num_threads > 4) return 0;
  opts.erase("cache_dir");
  opts["codegen"] = "interpreter";
  // Rules files only from the rules corpus (a path like /dev/zero would read forever).
  for (const char* k : {"ge.fusion_optimizer_config_path", "ge.fusionSwitchFile", "rules"}) {
    auto it = opts.find(k);
    if (it != opts.end() && it->second.rfind("fuzz/corpus/rules/", 0) != 0) {
      it->second = "/nonexistent/rules.json";
    }
  }
  try {
    ubfuse::CompiledModel m = ubfuse::compile(model(), opts);
    for (int64_t rows : {1, 3}) {
      auto out = m.run({{"x", ubfuse::Tensor::random(ubfuse::f32, {rows, 16}, 1)},
                        {"r", ubfuse::Tensor::random(ubfuse::f32, {rows, 16}, 2)}});
      if (out.at("y").sizes() != ubfuse::Sizes{rows, 16}) __builtin_trap();
    }
  } catch (const ubfuse::Error&) {
  }
  return 0;
}
