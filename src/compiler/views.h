// Reshapes as views. Every tensor here is contiguous and row-major, so a Reshape only renames
// the shape of its input's bytes: like a view in PyTorch, it needs no kernel and no copy. A
// Reshape whose output the caller receives still copies (graph outputs are the caller's buffers).
#pragma once

#include "runtime/compiled_model_impl.h"

namespace ubfuse {

// Removes the kernels of Reshapes that run as views and records them in m.view_of.
void elide_view_kernels(CompiledModelImpl& m);

}  // namespace ubfuse
