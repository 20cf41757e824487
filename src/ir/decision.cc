#include "ubfuse/decision.h"

namespace ubfuse {

std::string_view fusion_reason_name(FusionReason r) {
  switch (r) {
    case FusionReason::Fused:
      return "Fused";
    case FusionReason::HostSync:
      return "HostSync";
    case FusionReason::DynamicShape:
      return "DynamicShape";
    case FusionReason::BufferCapacity:
      return "BufferCapacity";
    case FusionReason::NotFusible:
      return "NotFusible";
    case FusionReason::DisabledByRule:
      return "DisabledByRule";
    case FusionReason::ShapeMismatch:
      return "ShapeMismatch";
    case FusionReason::Cycle:
      return "Cycle";
    case FusionReason::GroupLimit:
      return "GroupLimit";
    case FusionReason::NotProfitable:
      return "NotProfitable";
  }
  return "?";
}

}  // namespace ubfuse
