// Predicted main-memory traffic of a compiled model: every kernel reads each of its inputs once
// and writes each of its outputs once, at the sizes the run-time plan gives for concrete dims.
#pragma once

#include <memory>

#include "runtime/executor.h"
#include "ubfuse/explain.h"

namespace ubfuse::explain_detail {

// The model's input symbols bound from `dims`; throws Error naming the missing or unknown ones.
SymbolBindings bind_dims(const Graph& g, const SymbolBindings& dims);

int64_t value_bytes(const Value* v, const Plan& plan);

}  // namespace ubfuse::explain_detail
