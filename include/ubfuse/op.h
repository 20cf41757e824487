// Op kinds and fusion classes, generated from ubfuse/ops.def (the one op table).
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
#define UBF_OP(name, ...) name,
#define UBF_MATH(name, ...) name,
#include "ubfuse/ops.def"
};

inline constexpr int kNumOps = 0
#define UBF_OP(...) +1
#define UBF_MATH(...) +1
#include "ubfuse/ops.def"
    ;

// The operand types of an elementwise math op (ops.def's Types column); None: not a math op.
enum class MathTypes : uint8_t {
  None,
  Float,    // float -> the same dtype
  Number,   // float or integer -> the same dtype
  Bool,     // bool -> bool
  Test,     // float -> bool
  Compare,  // two operands of one dtype -> bool
  Select,   // a bool condition and two values of one dtype -> their dtype
};

// How an ONNX model reaches an op (ops.def's Onnx column).
enum class OnnxImport : uint8_t {
  Direct,  // ONNX op `onnx` imports 1:1 through the generic converter
  Own,     // ONNX op `onnx` has a converter of its own
  None,    // no ONNX op imports to it; `onnx` says why
};

struct OpInfo {
  OpKind kind;
  std::string_view name;
  int min_inputs;
  int max_inputs;  // -1: variadic
  FusionClass fusion_class;
  MathTypes math = MathTypes::None;  // an elementwise math op (UBF_MATH row) unless None
  std::string_view builder;          // math ops: the GraphBuilder method
  OnnxImport onnx = OnnxImport::None;
  std::string_view onnx_name;  // the ONNX op, or (OnnxImport::None) why there is none
};

const OpInfo& op_info(OpKind k);
inline std::string_view op_name(OpKind k) { return op_info(k).name; }
inline FusionClass fusion_class(OpKind k) { return op_info(k).fusion_class; }
inline bool is_math_op(OpKind k) { return op_info(k).math != MathTypes::None; }
std::string_view fusion_class_name(FusionClass c);
// Looks an op up by name; false if unknown.
bool op_from_name(std::string_view name, OpKind* out);

}  // namespace ubfuse
