// Pieces of the explain report's JSON that the CLI's own reports share (ubfuse run/demo --json).
#pragma once

#include <nlohmann/json.hpp>

#include "ubfuse/model.h"

namespace ubfuse {

// Compile time and the generated kernels' build: compiled, from the cache, jobs, wall time.
nlohmann::json compile_stats_json(const CompileStats& s);

}  // namespace ubfuse
