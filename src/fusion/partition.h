// Fusion analysis: partitions a graph into FusedGroups and records a FusionDecision for every
// producer -> consumer edge (fused or not, and why).
//
// Algorithm (greedy producer-into-consumer merging, after TVM's graph_partitioner): every
// non-Constant node starts in its own group. Nodes are visited in topological order; for each
// input edge p -> n the groups of p and n merge when all of these hold, checked in this order
// (the first that fails is the edge's reason):
//   HostSync        neither side is a Host node
//   NotFusible      both are fusible classes (Elementwise, Broadcast, RowReduction,
//                   RowPermute), or p is a MatMul taking an epilogue (elementwise ops, and row
//                   reductions when both operands are matrices: the epilogue sees blocks of
//                   whole rows)
//   NotFusible      no RowPermute op (RotateHalf) reads the value p passes to n: that value is
//                   written to memory for the permuted read, so n reads it from there (while
//                   RowPermuteFusion is on)
//   DisabledByRule  the rule for this kind of edge is on (rules file / options)
//   ShapeMismatch   both groups iterate over the same domain (or one holds only per-row values
//                   of the other's domain)
//   NotFusible      no RowPermute op of the merged group reads a value computed in it (it reads
//                   other columns of the row than the one being computed)
//   GroupLimit      the merged group stays within kMaxGroupOps / Inputs / Outputs / Reductions
//   DisabledByRule  no forbidden pattern, and MultiOutputFusion is on if an inner value escapes
//   Cycle           no path leaves the merged group and comes back into it
//   BufferCapacity  what the merged group keeps per row fits the unified buffer (static cols)
// Groups that still cannot keep their row in the UB are marked `reread` (two-pass variant).
#pragma once

#include <functional>
#include <vector>

#include "fusion/group.h"
#include "fusion/rules.h"
#include "ubfuse/decision.h"

namespace ubfuse {

inline constexpr int kMaxGroupOps = 24;
inline constexpr int kMaxGroupInputs = 12;
inline constexpr int kMaxGroupOutputs = 4;
inline constexpr int kMaxGroupReductions = 4;

struct Partition {
  std::vector<FusedGroup> groups;  // launch order
  std::vector<FusionDecision> decisions;
};

// What the partitioner reads. The UB a group needs per row is decided by the kernel lowering
// (codegen), which sits above this layer, so it comes in as a callback.
struct FusionConfig {
  int64_t ub_bytes = 196608;  // per thread
  // Bytes of UB one row of `cols` columns needs for what the group keeps between its phases.
  std::function<int64_t(const FusedGroup&, int64_t cols)> ub_bytes_per_row;
};

Partition partition_graph(const Graph& g, const FusionConfig& config, const FusionRules& rules);

// "FusedAddLayerNormSilu" from the member ops (a user pattern's name wins when its ops match).
std::string group_name(const std::vector<const Node*>& nodes, const FusionRules& rules);

}  // namespace ubfuse
