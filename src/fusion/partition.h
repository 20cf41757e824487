// Fusion analysis: partitions a graph into FusedGroups and records a FusionDecision for every
// producer -> consumer edge (fused or not, and why).
//
// Algorithm (greedy producer-into-consumer merging, after TVM's graph_partitioner): every
// non-Constant node starts in its own group; each attention chain (fusion/attention_match.h) then
// becomes one group. Nodes are visited in topological order; for each
// input edge p -> n the groups of p and n merge unless one of the checks below objects. They are
// asked in this order and the first objection is the edge's decision. A check marked "each
// member" is asked of every member of the merged group; the consecutive ones go member by member
// (topological order), all of them for one member before the next. A row Transpose is one that
// keeps the last axis. The list is fusion_checks() (fusion_checks.cc); it is printed here and in
// docs/architecture.md, and tests/fusion_checks_test.cc keeps both equal to it:
//   HostNode            HostSync        neither side is a Host node
//   AttentionKernel     NotFusible      neither group is an attention chain (AttentionFusion),
//                                       which runs as its own flash-style kernel
//   Profitable          NotProfitable   the edge is not inside a group the cost model refused: one
//                                       predicted slower than its parts (fusion/cost.h), after
//                                       which the partition runs again
//   OpClass             NotFusible      both ops are Elementwise, Broadcast, RowReduction,
//                                       RowPermute or a row Transpose, or p is a MatMul or Conv
//                                       that takes n's group as its epilogue
//   Int8Value           NotFusible      neither op reads or writes an i8 or u8 value (fused kernels
//                                       load and store float and bool values) but a
//                                       DynamicQuantMatMul's own int8 weights
//   MatMulPrologue      NotFusible      n's group holds no MatMul or Conv: an epilogue takes
//                                       nothing computed before its MatMul or Conv
//   VectorMatMulRows    NotFusible      the MatMul of p's group, if any, has matrix operands, or
//                                       n's group holds no row reduction
//   PermutedInput       NotFusible      no RowPermute op reads a value p passes to n (while
//                                       RowPermuteFusion is on; n then reads it from memory)
//   RuleOff             DisabledByRule  the rule for this kind of edge is on (rules file, options)
//   Domain              ShapeMismatch   both groups iterate over the same rows x columns (one may
//                                       hold only per-row values of the other's); a MatMul or Conv
//                                       p's output is that domain
//   TransposeIntoMatMul NotFusible      each member: no row Transpose joins a group with a MatMul
//                                       or Conv (the epilogue reads by its output's rows)
//   InputFromMemory     NotFusible      each member: what a RowPermute op or row Transpose reads is
//                                       not computed in the group (a rotation of a row Transpose's
//                                       output may be)
//   OneRowMap           NotFusible      each member: a value read through a row Transpose is read
//                                       by no other member but through the same permutation
//   RunTimeBroadcast    DynamicShape    each input's dims equal the domain's or are a fixed 1, none
//                                       agreeing only by a 1 at run time
//   GroupLimit          GroupLimit      the merged group stays within kMaxGroupOps,
//                                       kMaxGroupInputs, kMaxGroupOutputs and kMaxGroupReductions
//   ForbiddenPattern    DisabledByRule  no forbidden pattern of the rules file occurs in the merged
//                                       group's ops
//   MultiOutput         DisabledByRule  MultiOutputFusion is on, or only the last member's value
//                                       leaves the merged group
//   Cycle               Cycle           no path leaves the merged group and comes back into it
//   UbCapacity          BufferCapacity  a reduction prologue's fused row fits ub_bytes (checked
//                                       when the row length is fixed)
// Groups that still cannot keep their row in the UB are marked `reread` (two-pass variant).
// With a cost model (FusionConfig::costs), each group of several nodes is then estimated as one
// kernel and as its parts; one predicted slower (by more than kProfitMargin; an op-by-op group at
// all) is refused: its edges go to the Profitable check and the partition runs again, until no
// group is refused. An attention chain is estimated as the flash-style kernel and as MatMul +
// MatMul before it forms.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "fusion/cost.h"
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
  // Per decision, the name of the check that objected (fusion_checks()); empty for an edge that
  // fused and for the notes on whole groups (two-pass variant, symbolic row length).
  std::vector<std::string_view> objected_by;
};

// What the partitioner reads. The UB a group needs per row is decided by the kernel lowering
// (codegen), which sits above this layer, so it comes in as a callback.
struct FusionConfig {
  int64_t ub_bytes = 196608;  // per thread
  // Bytes of UB one row of `cols` columns needs for what the group keeps between its phases.
  std::function<int64_t(const FusedGroup&, int64_t cols)> ub_bytes_per_row;
  // Nodes the plan computes (shape values, compiler/shape_values.h): like constants, they join
  // no group and their outputs are group inputs.
  std::function<bool(const Node&)> planned;
  // The cost model's figures, asked the first time a decision needs them (the compiler may
  // measure them then); unset: no cost model, every group the checks allow is kept.
  std::function<const CostParams&()> costs;
  // Times both forms of an attention chain where the estimates are unsure (kUnsureRatio); unset
  // or nullopt: the estimates decide.
  std::function<std::optional<AttentionTiming>(const AttentionProbe&)> time_attention;
  // Whether codegen expresses a group as one generated kernel (else it runs op by op; *why says
  // why not). Unset: every group is.
  std::function<bool(const FusedGroup&, std::string* why)> lowers;
};

Partition partition_graph(const Graph& g, const FusionConfig& config, const FusionRules& rules);

// One check the partitioner asks of an edge before merging its groups.
struct FusionCheck {
  std::string_view name;  // "HostNode"
  FusionReason reason;    // the decision's reason when it objects
  bool each_member;       // asked of each member of the merged group rather than of the edge
  std::string_view when;  // what must hold for the edge to fuse, one sentence
};

// The checks in the order they are asked.
const std::vector<FusionCheck>& fusion_checks();

// "FusedAddLayerNormSilu" from the member ops (a user pattern's name wins when its ops match).
std::string group_name(const std::vector<const Node*>& nodes, const FusionRules& rules);

}  // namespace ubfuse
