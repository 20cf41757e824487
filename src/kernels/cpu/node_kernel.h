// Eager lowering: one Kernel per node (Constant nodes become data, not kernels).
#pragma once

#include <memory>
#include <vector>

#include "runtime/kernel.h"

namespace ubfuse {

std::unique_ptr<Kernel> make_node_kernel(const Node& n);
std::vector<std::unique_ptr<Kernel>> build_eager_kernels(const Graph& g);

}  // namespace ubfuse
