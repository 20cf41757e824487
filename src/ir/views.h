// Reshapes as views, and Transposes read as row maps. Every tensor here is contiguous and
// row-major, so a Reshape only renames the shape of its input's bytes: like a view in PyTorch,
// it needs no kernel and no copy. A Reshape whose output the caller receives still copies
// (graph outputs are the caller's buffers).
#pragma once

#include "ubfuse/graph.h"

namespace ubfuse {

// Whether node n of g runs as a view (the rule above; the partitioner's messages say so too).
bool runs_as_view(const Graph& g, const Node& n);

// Whether n is a Transpose that keeps the last axis last (perm ends with rank - 1): each output
// row is one whole input row, so a fused kernel reads it through a strided row map of the input
// instead of a copy (codegen/row_args.cc).
bool transpose_keeps_rows(const Node& n);

}  // namespace ubfuse
