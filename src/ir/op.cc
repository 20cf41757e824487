#include "ubfuse/op.h"

#include <array>

namespace ubfuse {

namespace {
constexpr std::array<OpInfo, kNumOps> kOpTable = {{
#define UBF_OP(name, min_in, max_in, cls) {OpKind::name, #name, min_in, max_in, FusionClass::cls},
#include "ubfuse/ops.def"
#undef UBF_OP
}};
static_assert(kOpTable.size() == kNumOps, "op table out of step with ops.def");
}  // namespace

const OpInfo& op_info(OpKind k) { return kOpTable[size_t(k)]; }

std::string_view fusion_class_name(FusionClass c) {
  switch (c) {
    case FusionClass::Elementwise:
      return "Elementwise";
    case FusionClass::Broadcast:
      return "Broadcast";
    case FusionClass::Injective:
      return "Injective";
    case FusionClass::RowReduction:
      return "RowReduction";
    case FusionClass::Opaque:
      return "Opaque";
    case FusionClass::RowPermute:
      return "RowPermute";
    case FusionClass::Host:
      return "Host";
    case FusionClass::Constant:
      return "Constant";
  }
  return "?";
}

bool op_from_name(std::string_view name, OpKind* out) {
  for (auto& info : kOpTable) {
    if (info.name == name) {
      *out = info.kind;
      return true;
    }
  }
  return false;
}

}  // namespace ubfuse
