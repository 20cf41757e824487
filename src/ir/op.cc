#include "ubfuse/op.h"

#include <array>

namespace ubfuse {

namespace {
// clang-format off
constexpr std::array<OpInfo, kNumOps> kOpTable = {{
#define UBF_OP(name, min_in, max_in, cls, onnx, onnx_name)                                  \
  {OpKind::name, #name, min_in, max_in, FusionClass::cls, MathTypes::None, "",             \
   OnnxImport::onnx, onnx_name},
// Unary math is Elementwise, binary and ternary math Broadcast (numpy broadcasting).
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name)   \
  {OpKind::name, #name, arity, arity,                                                      \
   arity == 1 ? FusionClass::Elementwise : FusionClass::Broadcast, MathTypes::types,       \
   #builder, OnnxImport::onnx, onnx_name},
#include "ubfuse/ops.def"
}};
// clang-format on

constexpr bool table_in_order() {
  for (size_t i = 0; i < kOpTable.size(); i++) {
    if (size_t(kOpTable[i].kind) != i) return false;
  }
  return true;
}
static_assert(table_in_order(), "op table out of step with ops.def");

// Unary math ops take Float, Number, Bool or Test operands, binary ones Number or Compare,
// Where-like ones Select: the layers generated from the rows (shape inference, eager kernels)
// rely on it.
constexpr bool math_rows_consistent() {
  for (const OpInfo& i : kOpTable) {
    if (i.math == MathTypes::None) continue;
    const bool unary = i.math == MathTypes::Float || i.math == MathTypes::Number ||
                       i.math == MathTypes::Bool || i.math == MathTypes::Test;
    const bool ok = i.min_inputs == 1 ? unary
                    : i.min_inputs == 2
                        ? i.math == MathTypes::Number || i.math == MathTypes::Compare
                    : i.min_inputs == 3 ? i.math == MathTypes::Select
                                        : false;
    if (!ok) return false;
  }
  return true;
}
static_assert(math_rows_consistent(), "an UBF_MATH row of ops.def has Types its arity cannot take");
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
