// Reshapes that run as views (ir/views.h) need no kernel: after lowering, their kernels are
// dropped and the executable records whose bytes each view reads.
#pragma once

#include "runtime/executable.h"

namespace ubfuse {

// Removes the kernels of Reshapes that run as views and records them in exe.view_of.
void elide_view_kernels(Executable& exe);

}  // namespace ubfuse
