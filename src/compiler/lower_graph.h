// Graph mode lowering: partition the graph into fused groups (analysis, with a FusionDecision for
// every edge that crosses a group boundary), then build one Kernel per group (codegen or the tile
// interpreter) in launch order.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "compiler/options.h"
#include "kernels/cpu/node_kernel.h"
#include "runtime/kernel.h"

namespace ubfuse {

// `planned`: nodes the plan computes (shape values), which join no group.
std::vector<std::unique_ptr<Kernel>> build_fused_kernels(
    const Graph& g, const CompileConfig& c, std::vector<FusionDecision>* decisions,
    const std::function<bool(const Node&)>& planned = {}, const OwnKernelFn& own = {});

}  // namespace ubfuse
