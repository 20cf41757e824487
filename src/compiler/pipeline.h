// The pass list for a configuration, and the shapes planned at compile time.
#pragma once

#include <memory>
#include <vector>

#include "compiler/options.h"
#include "passes/pass.h"
#include "runtime/executor.h"

namespace ubfuse {

// `notes`: where passes that take or leave patterns fusion reports on (quant_matmul) add their
// decisions.
std::vector<std::unique_ptr<Pass>> make_pipeline(const CompileConfig& config,
                                                 std::vector<FusionDecision>* notes = nullptr);
// The ge.dynamic_dims gears as symbol bindings (checked against ge.inputShape and the graph).
std::vector<SymbolBindings> parse_gears(const Graph& g, const CompileConfig& config);
// Pre-builds the plans of static shapes and of the gears; enforces memory_limit.
void prepare_plans(const Executor& ex);

}  // namespace ubfuse
