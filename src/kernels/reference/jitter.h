// The reference's jitter (ref::Jitter, reference.h): how run_graph nudges one node's computed
// results to show how far a kernel's f32 arithmetic may move the outputs.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/reference.h"

namespace ubfuse::ref {

// Nudges the float results `d` of node n (the node_index-th node of g in topological order) as
// `jitter` says, before any rounding to their dtype. `input0` is n's first input (GELU's x), or
// null when n has none.
void nudge_results(const Graph& g, const Node& n, const Jitter& jitter, uint64_t node_index,
                   const std::vector<double>* input0, std::vector<double>& d);

}  // namespace ubfuse::ref
