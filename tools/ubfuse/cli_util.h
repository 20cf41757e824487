// Small helpers shared by the subcommands.
#pragma once

#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ubfuse/ubfuse.h"

namespace ubfuse::cli {

// "2,2048,4096" -> {2, 2048, 4096}; errors name the flag.
Sizes parse_sizes(const std::string& s, const std::string& flag);
// {"NAME=N", ...} (--dim) -> symbol bindings; errors name the bad entry.
SymbolBindings parse_dims(const std::vector<std::string>& kvs);
// {"k=v", ...} -> Options; errors name the bad entry.
Options parse_kv_options(const std::vector<std::string>& kvs);
// The kernels of a model as JSON: name, nodes, ops, variant.
nlohmann::json kernels_json(const CompiledModel& m);
// Ctrl-C while fused kernels compile: their compilers run in process groups of their own, out of
// the terminal's reach, so the CLI cancels the build itself. Hold an InterruptibleCompile around
// compile() and pass its callback; a Ctrl-C then throws Interrupted (main exits 130). Outside
// one, Ctrl-C ends the process as usual.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};
class InterruptibleCompile {
 public:
  InterruptibleCompile();
  ~InterruptibleCompile();
  InterruptibleCompile(const InterruptibleCompile&) = delete;
  InterruptibleCompile& operator=(const InterruptibleCompile&) = delete;
  CompileProgressFn callback() const;
};

}  // namespace ubfuse::cli
