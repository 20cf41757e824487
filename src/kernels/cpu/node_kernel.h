// Eager lowering: one Kernel per node (Constant nodes become data, not kernels).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/kernel.h"

namespace ubfuse {

std::unique_ptr<Kernel> make_node_kernel(const Node& n);
// Skips constants and the nodes `planned` names (shape values the plan computes).
std::vector<std::unique_ptr<Kernel>> build_eager_kernels(
    const Graph& g, const std::function<bool(const Node&)>& planned = {});

}  // namespace ubfuse
