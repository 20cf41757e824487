// Why two ops run in one kernel or not: the partitioner's verdict on every producer -> consumer
// edge, which `ubfuse explain`, the profiler and CompiledModel::decisions() report.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ubfuse {

enum class FusionReason : uint8_t {
  Fused,           // the edge is inside one kernel
  HostSync,        // a Host node forces a sync
  DynamicShape,    // a shape prevents fusion
  BufferCapacity,  // the unified buffer cannot hold what the group keeps
  NotFusible,      // an op class that does not fuse here
  DisabledByRule,  // switched off by options or the rules file
  ShapeMismatch,   // the two sides iterate over different domains
  Cycle,           // fusing would create a cycle through another kernel
  GroupLimit,      // the group reached kMaxGroupOps / kMaxGroupInputs
  NotProfitable,   // the fused form is predicted slower than its parts
};
std::string_view fusion_reason_name(FusionReason r);

// One decision for a producer -> consumer edge (or for a node, where consumer is empty).
struct FusionDecision {
  FusionReason reason = FusionReason::Fused;
  std::string producer;  // node names
  std::string consumer;
  std::string message;  // says why, naming the nodes
  std::string hint;     // what a user can do about it
};

}  // namespace ubfuse
