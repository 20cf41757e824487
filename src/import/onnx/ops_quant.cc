// Quantization ops (opset 10 to 13 forms): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, QLinearMatMul, ConvInteger. Absent optional zero points become zeros of their
// operand's dtype where a later input is present; the checks of dtypes and shapes are shape
// inference's (shape_infer_quant.cc), which name the node and the input.
#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

// Opset 19's float16/bfloat16 scales (and int32 inputs to QuantizeLinear) are forms ubfuse does not
// take: unsupported rather than the shape inference error a graph built by hand gets.
void require_f32_scale(NodeCtx& c, int i) {
  if (c.dtype(i) != DType::f32) {
    c.unsupported("scale (input " + std::to_string(i) + ") of element type " +
                  std::string(dtype_name(c.dtype(i))) + "; float32 scales are supported");
  }
}

// ONNX opset 19 and later add float8 and saturate; opset 21 block_size. Those attributes are not
// read, so check_attrs_used reports them.
void quantize_linear(NodeCtx& c) {
  require_float(c, 0);
  require_f32_scale(c, 1);
  std::vector<Value*> in{c.value(0), c.value(1)};
  if (c.has_input(2)) in.push_back(c.value(2));
  c.set_output(0, c.emit(OpKind::QuantizeLinear, in, {{"axis", c.attr_int("axis", 1)}}));
}

void dequantize_linear(NodeCtx& c) {
  require_f32_scale(c, 1);
  std::vector<Value*> in{c.value(0), c.value(1)};
  if (c.has_input(2)) in.push_back(c.value(2));
  c.set_output(0, c.emit(OpKind::DequantizeLinear, in, {{"axis", c.attr_int("axis", 1)}}));
}

void dynamic_quantize_linear(NodeCtx& c) {
  require_float(c, 0);
  std::vector<Value*> out = c.emit_outputs(OpKind::DynamicQuantizeLinear, {c.value(0)}, {}, 3);
  for (int i = 0; i < 3; i++) {
    if (c.output_used(i)) c.set_output(i, out[size_t(i)]);
  }
}

// An optional zero point: input i, or (when a later input needs the slot) a zero of the dtype
// of input `of`; null when absent and last.
Value* zero_point(NodeCtx& c, int i, int of, bool needed) {
  if (c.has_input(i)) return c.value(i);
  return needed ? c.scalar(0, c.dtype(of)) : nullptr;
}

void matmul_integer(NodeCtx& c) {
  std::vector<Value*> in{c.value(0), c.value(1)};
  Value* zb = zero_point(c, 3, 1, false);
  Value* za = zero_point(c, 2, 0, zb != nullptr);
  if (za) in.push_back(za);
  if (zb) in.push_back(zb);
  c.set_output(0, c.emit(OpKind::MatMulInteger, in));
}

void qlinear_matmul(NodeCtx& c) {
  for (int i : {1, 4, 6}) require_f32_scale(c, i);
  std::vector<Value*> in;
  for (int i = 0; i < 8; i++) in.push_back(c.value(i));
  c.set_output(0, c.emit(OpKind::QLinearMatMul, in));
}

void conv_integer(NodeCtx& c) {
  const Attrs a = conv_window_attrs(c, "ConvInteger", 2);
  std::vector<Value*> in{c.value(0), c.value(1)};
  Value* zw = zero_point(c, 3, 1, false);
  Value* zx = zero_point(c, 2, 0, zw != nullptr);
  if (zx) in.push_back(zx);
  if (zw) in.push_back(zw);
  c.set_output(0, c.emit(OpKind::ConvInteger, in, a));
}

}  // namespace

void add_quant_ops(ConverterMap& m) {
  m["QuantizeLinear"] = quantize_linear;
  m["DequantizeLinear"] = dequantize_linear;
  m["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  m["MatMulInteger"] = matmul_integer;
  m["QLinearMatMul"] = qlinear_matmul;
  m["ConvInteger"] = conv_integer;
}

const std::set<std::string>& int8_input_ops() {
  static const std::set<std::string> kOps = {
      // data movement and selection: the bytes move, no arithmetic
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Transpose",
      "Expand", "Tile", "Pad", "Gather", "GatherElements", "GatherND", "ScatterND",
      "ScatterElements", "Scatter", "Shape", "Size", "Identity", "If", "Where", "Cast", "CastLike",
      // a max moves one of its inputs
      "MaxPool",
      // integer elementwise arithmetic (Add, Sub, Mul wrap modulo 2^8; Div truncates toward
      // zero; Mod either sign) and comparisons, computed as for i32 and i64
      "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Clip", "Neg", "Abs", "Relu", "Sign",
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      // quantization
      "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
      "QLinearMatMul", "ConvInteger"};
  return kOps;
}

}  // namespace ubfuse::onnx_import
