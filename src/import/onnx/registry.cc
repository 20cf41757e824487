#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

const ConverterMap& converters() {
  static const ConverterMap m = [] {
    ConverterMap out;
    add_math_ops(out);
    add_activation_ops(out);
    add_shape_ops(out);
    add_movement_ops(out);
    add_nn_ops(out);
    add_reduce_ops(out);
    return out;
  }();
  return m;
}

void require_float(NodeCtx& c, int input) {
  DType t = c.dtype(input);
  if (!is_float(t)) {
    c.unsupported("input " + std::to_string(input) + " has element type " +
                  std::string(dtype_name(t)) + "; this op supports float, float16 and bfloat16");
  }
}

Value* binary(NodeCtx& c, OpKind k, Value* a, Value* b) { return c.emit(k, {a, b}); }

Value* scalar_like(NodeCtx& c, double v, Value* like) { return c.scalar(v, like->dtype); }

}  // namespace ubfuse::onnx_import

namespace ubfuse {

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> out;
  for (auto& [name, _] : onnx_import::converters()) out.push_back(name);
  return out;  // std::map keeps them sorted
}

}  // namespace ubfuse
