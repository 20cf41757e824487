// Small helpers shared by the subcommands.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ubfuse/ubfuse.h"

namespace ubfuse::cli {

// "2,2048,4096" -> {2, 2048, 4096}; errors name the flag.
Sizes parse_sizes(const std::string& s, const std::string& flag);
// {"k=v", ...} -> Options; errors name the bad entry.
Options parse_kv_options(const std::vector<std::string>& kvs);
// The kernels of a model as JSON: name, nodes, ops, variant.
nlohmann::json kernels_json(const CompiledModel& m);

}  // namespace ubfuse::cli
