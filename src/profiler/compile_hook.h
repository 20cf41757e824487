// compile() reports each model it builds here, so a recording Profiler adds its pass events
// without the user calling record_compile().
#pragma once

#include "ubfuse/compile.h"

namespace ubfuse::prof {

// No-op unless a Profiler is recording. Thread-safe.
void note_compiled(const CompiledModel& m);

}  // namespace ubfuse::prof
