// Op kinds and fusion classes, generated from src/ir/ops.def (the one op table).
#pragma once

#include <cstdint>
#include <string_view>

namespace ubfuse {

enum class FusionClass : uint8_t {
  Elementwise,
  Broadcast,
  Injective,
  RowReduction,
  Opaque,
  RowPermute,
  Host,
  Constant
};

enum class OpKind : uint16_t {
#define UBF_OP(name, min_in, max_in, cls) name,
#include "ubfuse/ops.def"
#undef UBF_OP
};

inline constexpr int kNumOps = 0
#define UBF_OP(name, min_in, max_in, cls) +1
#include "ubfuse/ops.def"
#undef UBF_OP
    ;

struct OpInfo {
  OpKind kind;
  std::string_view name;
  int min_inputs;
  int max_inputs;  // -1: variadic
  FusionClass fusion_class;
};

const OpInfo& op_info(OpKind k);
inline std::string_view op_name(OpKind k) { return op_info(k).name; }
inline FusionClass fusion_class(OpKind k) { return op_info(k).fusion_class; }
std::string_view fusion_class_name(FusionClass c);
// Looks an op up by name; false if unknown.
bool op_from_name(std::string_view name, OpKind* out);

}  // namespace ubfuse
