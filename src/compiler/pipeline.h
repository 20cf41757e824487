// The pass list for a configuration, and the compile-time planning step.
#pragma once

#include <memory>
#include <vector>

#include "passes/pass.h"
#include "runtime/compiled_model_impl.h"

namespace ubfuse {

std::vector<std::unique_ptr<Pass>> make_pipeline(const CompileConfig& config);
// Pre-builds the plans of static shapes and of the ge.dynamic_dims gears; enforces memory_limit.
void prepare_plans(CompiledModelImpl& impl);

}  // namespace ubfuse
