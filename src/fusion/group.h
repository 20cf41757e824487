// A fused group: the unit graph mode launches as one kernel. The grouping analysis
// (fusion/partition.cc) builds groups; codegen/group_kernels.cc turns each into a Kernel.
#pragma once

#include <string>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse {

enum class GroupKind : uint8_t {
  Single,          // one node run by its eager kernel (MatMul alone, Gather, movement, Host)
  Elementwise,     // elementwise/broadcast chain over one iteration domain
  RowReduction,    // elementwise prologue -> last-axis row reductions -> elementwise epilogue
  MatMulEpilogue,  // MatMul (or Conv) whose output gets an elementwise epilogue while in cache
  Attention,       // MatMul -> scale/mask -> Softmax -> MatMul: one flash-style kernel
};

namespace fusion {
// An op with a kernel of its own (oneDNN) whose output an epilogue group may follow, reading it
// right after it is computed: MatMul, Conv, DynamicQuantMatMul and DynamicQuantConv
// (fusion_checks.cc). Codegen runs such a group as a MatMulEpilogue kernel.
bool heads_epilogue(const Node* n);
}  // namespace fusion

struct FusedGroup {
  GroupKind kind = GroupKind::Single;
  std::string name;                   // "FusedAddLayerNormSilu", or the op name for Single
  std::vector<const Node*> nodes;     // topological order; Constant nodes are never members
  std::vector<const Value*> inputs;   // read from outside: graph inputs, constants, other groups
  std::vector<const Value*> outputs;  // needed outside: graph outputs or read by other groups
  // Iteration domain of Elementwise/RowReduction groups: the (symbolic) shape of the widest
  // value; rows = product of all but the last dim, cols = last dim. Every member's output is
  // this shape, or this shape with the last dim reduced (1 or dropped) for a row reduction.
  Shape domain;
  // Set when the planner found at compile time that the UB cannot hold what this group keeps
  // per row: the kernel must re-read its inputs (two-pass variant) instead of keeping the row.
  bool reread = false;
};

}  // namespace ubfuse
