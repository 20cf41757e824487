// The safety net: a group the kernel IR cannot express (integer dtypes, unusual broadcasts) runs
// its member nodes one after another with their eager kernels, through temporaries. Correct
// whatever the group; slower than eager mode (temporaries and shape inference per call), so the
// cost model refuses such groups and it runs only with cost_model=off. KernelInfo::variant says
// "op-by-op" and why.
#pragma once

#include <memory>
#include <string>

#include "fusion/group.h"
#include "runtime/kernel.h"

namespace ubfuse {

std::unique_ptr<Kernel> make_op_by_op_kernel(const FusedGroup& g, const std::string& why);

}  // namespace ubfuse
