// Eager lowering: one Kernel per node (Constant nodes become data, not kernels).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/kernel.h"

namespace ubfuse {

// Kernels for nodes that run graphs of their own (If), made by the layer that compiles graphs:
// a kernel for n, or null for the ordinary ones.
using OwnKernelFn = std::function<std::unique_ptr<Kernel>(const Node&)>;

std::unique_ptr<Kernel> make_node_kernel(const Node& n, const OwnKernelFn& own = {});
// Skips constants and the nodes `planned` names (shape values the plan computes).
std::vector<std::unique_ptr<Kernel>> build_eager_kernels(
    const Graph& g, const std::function<bool(const Node&)>& planned = {},
    const OwnKernelFn& own = {});

}  // namespace ubfuse
