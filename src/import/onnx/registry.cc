#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

// An ONNX op that is an elementwise math op of ubfuse (ops.def's Onnx column Direct): the same
// inputs, no attributes, operand types checked as shape inference would (Types column).
template <OpKind K>
void direct(NodeCtx& c) {
  const OpInfo& info = op_info(K);
  for (int i = 0; i < info.min_inputs; i++) {
    if (info.math == MathTypes::Float || info.math == MathTypes::Test) require_float(c, i);
    if (info.math == MathTypes::Bool && c.dtype(i) != DType::boolean) {
      c.invalid(std::string(info.name) + " needs a bool input");
    }
  }
  std::vector<Value*> in;
  for (int i = 0; i < info.min_inputs; i++) in.push_back(c.value(i));
  c.set_output(0, c.emit(K, in));
}

void add_direct_ops(ConverterMap& m) {
#define UBF_ONNX_Direct(name, onnx_name) m[onnx_name] = direct<OpKind::name>;
#define UBF_ONNX_Own(name, onnx_name)
#define UBF_ONNX_None(name, onnx_name)
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, builder, ir, fn, form, cost, bf16, onnx, onnx_name) \
  UBF_ONNX_##onnx(name, onnx_name)
#include "ubfuse/ops.def"
#undef UBF_ONNX_Direct
#undef UBF_ONNX_Own
#undef UBF_ONNX_None
}

// The default domain's converters and onnxruntime's com.microsoft ones (ops_contrib.cc,
// ops_contrib_attention.cc).
struct Tables {
  ConverterMap onnx, microsoft;
};

const Tables& tables() {
  static const Tables t = [] {
    Tables out;
    add_direct_ops(out.onnx);
    add_math_ops(out.onnx);
    add_activation_ops(out.onnx);
    add_shape_ops(out.onnx);
    add_movement_ops(out.onnx);
    add_index_ops(out.onnx);
    add_nn_ops(out.onnx);
    add_reduce_ops(out.onnx);
    add_control_ops(out.onnx);
    add_einsum_ops(out.onnx);
    add_quant_ops(out.onnx);
    add_loss_ops(out.onnx);
    add_recurrent_ops(out.onnx);
    add_spectral_ops(out.onnx);
    add_contrib_ops(out.onnx, out.microsoft);
    add_contrib_attention_ops(out.microsoft);
    add_contrib_gqa_ops(out.microsoft);
    return out;
  }();
  return t;
}

}  // namespace

const ConverterMap& converters() { return tables().onnx; }
const ConverterMap& microsoft_converters() { return tables().microsoft; }

void require_float(NodeCtx& c, int input) {
  DType t = c.dtype(input);
  if (!is_float(t)) {
    c.unsupported("input " + std::to_string(input) + " has element type " +
                  std::string(dtype_name(t)) + "; this op supports float, float16 and bfloat16");
  }
}

Value* binary(NodeCtx& c, OpKind k, Value* a, Value* b) { return c.emit(k, {a, b}); }

Attrs conv_window_attrs(NodeCtx& c, const std::string& op, int max_spatial) {
  const int64_t r = c.rank(0);
  if (r < 3 || r > 2 + max_spatial) {
    c.unsupported(op + " over " + std::to_string(r - 2) + " spatial axes (1-D" +
                  (max_spatial == 3 ? ", 2-D and 3-D" : " and 2-D") + " are supported)");
  }
  std::string ap = c.attr_str("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  Attrs a{{"group", c.attr_int("group", 1)}, {"auto_pad", ap}};
  for (const char* k : {"kernel_shape", "strides", "pads", "dilations"}) {
    if (c.has_attr(k)) a[k] = c.attr_ints(k);
  }
  return a;
}

Value* cast_value(NodeCtx& c, Value* v, DType to) {
  if (v->dtype == to) return v;
  return c.emit(OpKind::Cast, {v}, {{"to", std::string(dtype_name(to))}});
}

Value* positions(NodeCtx& c, const Sizes& sizes) {
  Tensor t(DType::i64, sizes);
  for (int64_t i = 0; i < t.numel(); i++) t.data_as<int64_t>()[i] = i;
  return c.constant(t);
}

Value* slice_axis(NodeCtx& c, Value* x, int64_t axis, int64_t start, int64_t end) {
  return c.emit(OpKind::Slice, {x},
                {{"starts", std::vector<int64_t>{start}},
                 {"ends", std::vector<int64_t>{end}},
                 {"axes", std::vector<int64_t>{axis}},
                 {"steps", std::vector<int64_t>{1}}});
}

Value* scalar_like(NodeCtx& c, double v, Value* like) { return c.scalar(v, like->dtype); }

int64_t runtime_values_length(NodeCtx& c, int i, const std::string& what) {
  if (c.dtype(i) != DType::i64 && c.dtype(i) != DType::i32) {
    c.invalid(what + " must be int64, got " + std::string(dtype_name(c.dtype(i))));
  }
  const Shape& s = c.shape(i);
  if (s.size() != 1 || !s[0].is_static()) {
    c.unsupported(what +
                  " given at run time must be a 1-D tensor of a known length, got the "
                  "shape " +
                  shape_str(s) + " (their number sets the rank of the result)");
  }
  return s[0].value();
}

Value* axes_shape(NodeCtx& c, Value* x, Value* values, const std::string& mode, int64_t axis) {
  Attrs a{{"mode", mode}};
  if (mode == "split") a["axis"] = axis;
  return c.emit(OpKind::AxesShape, {c.emit(OpKind::Shape, {x}), values}, a);
}

}  // namespace ubfuse::onnx_import

namespace ubfuse {

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> out;
  for (auto& [name, _] : onnx_import::converters()) out.push_back(name);
  return out;  // std::map keeps them sorted
}

std::vector<std::string> onnx_supported_microsoft_ops() {
  std::vector<std::string> out;
  for (auto& [name, _] : onnx_import::microsoft_converters()) out.push_back(name);
  return out;
}

}  // namespace ubfuse
