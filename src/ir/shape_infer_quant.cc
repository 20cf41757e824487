// Shape inference of the quantization ops (ONNX opset 13 forms) and the 8-bit integer gate: which
// ops take i8/u8 operands at all (data movement, Cast, Where, the integer elementwise arithmetic
// and comparisons, the quantization ops).
#include "ir/shape_infer_internal.h"
#include "ubfuse/error.h"

namespace ubfuse::shape_infer {

namespace {

std::string dt(const Value* v) { return std::string(dtype_name(v->dtype)); }

// Whether v holds one element by its (static) shape: [] or [1] or [1, 1].
bool one_element(const Value* v) {
  for (const Dim& d : v->shape) {
    if (!d.is_static() || d.value() != 1) return false;
  }
  return true;
}

void require_f32_scale(const Node& n, int i, const char* what) {
  const Value* s = n.inputs[size_t(i)];
  if (s->dtype != DType::f32) {
    fail(n, std::string(what) + " (input " + std::to_string(i) + ") must be f32, got " + dt(s),
         "scales are float32 tensors, as ONNX's opset 13 quantization ops define them");
  }
}

void require_int8(const Node& n, int i, const char* what) {
  const Value* v = n.inputs[size_t(i)];
  if (!is_int8(v->dtype)) {
    fail(n, std::string(what) + " (input " + std::to_string(i) + ") must be u8 or i8, got " + dt(v),
         "quantized tensors are uint8 or int8");
  }
}

// A zero point (input zi) must have its data's dtype (input di).
void require_zero_point_dtype(const Node& n, int zi, int di, const char* what) {
  const Value* z = n.inputs[size_t(zi)];
  const Value* d = n.inputs[size_t(di)];
  if (z->dtype != d->dtype) {
    fail(n,
         std::string(what) + " (input " + std::to_string(zi) + ") is " + dt(z) + " but input " +
             std::to_string(di) + " is " + dt(d),
         "a zero point has the dtype of the tensor it belongs to");
  }
}

// Scale (and zero point) of QuantizeLinear / DequantizeLinear: one element (per tensor), or 1-D of
// the length of x's axis `axis` (per axis; the attribute is normalized in place).
void check_axis_params(Node& n) {
  const Value* x = n.inputs[0];
  const Value* s = n.inputs[1];
  if (n.inputs.size() > 2 && n.inputs[2]->shape != s->shape) {
    fail(n,
         "zero point shape " + shape_str(n.inputs[2]->shape) + " differs from the scale's " +
             shape_str(s->shape),
         "the zero point has the scale's shape: both per tensor ([]) or both per axis");
  }
  if (one_element(s) && s->shape.size() <= 1) return;  // per tensor
  const int64_t r = int64_t(x->shape.size());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 1), r);
  n.attrs["axis"] = axis;
  if (s->shape.size() != 1 || s->shape[0] != x->shape[size_t(axis)]) {
    fail(n,
         "scale " + shape_str(s->shape) + " is neither one element (per tensor) nor [" +
             x->shape[size_t(axis)].str() + "] (per axis " + std::to_string(axis) + " of " +
             shape_str(x->shape) + ")",
         "per-axis quantization takes a 1-D scale with one element per slice of the attribute "
         "axis (default 1)");
  }
}

// A MatMulInteger / QLinearMatMul parameter of operand a (per row: [M] or [M, 1]) or b (per
// column: [N] or [1, N]), or one element.
void check_row_col_param(const Node& n, int i, bool of_a, const char* what) {
  const Value* v = n.inputs[size_t(i)];
  if (one_element(v) && v->shape.size() <= 2) return;
  const Value* op = n.inputs[of_a ? 0 : (n.op == OpKind::QLinearMatMul ? 3 : 1)];
  const Shape& s = op->shape;
  const Dim len =
      of_a ? (s.size() >= 2 ? s[s.size() - 2] : Dim(1)) : (s.size() >= 2 ? s.back() : Dim(1));
  const bool ok = (v->shape.size() == 1 && v->shape[0] == len) ||
                  (v->shape.size() == 2 && of_a && v->shape[0] == len && v->shape[1] == Dim(1)) ||
                  (v->shape.size() == 2 && !of_a && v->shape[0] == Dim(1) && v->shape[1] == len);
  if (!ok) {
    fail(n,
         std::string(what) + " (input " + std::to_string(i) + ") has shape " + shape_str(v->shape) +
             "; it must be one element or one per " +
             (of_a ? "row of a: [" + len.str() + "]" : "column of b: [" + len.str() + "]"),
         of_a ? "a's parameters are per tensor or per row (M)"
              : "b's parameters are per tensor or per column (N)");
  }
}

// The elementwise math that takes 8-bit integers: Where selects them (input 0 is its bool
// condition); the integer arithmetic of the eager kernels (Add, Sub, Mul wrap modulo 2^8; Div
// truncates toward zero; Mod and Fmod; Max, Min; Neg, Abs, Relu, Sign) and the comparisons compute
// on them as on i32 and i64. No float math (Exp, PowTensor, ...): those need a Cast first.
bool takes_int8_math(OpKind op, int i) {
  if (op == OpKind::Where) return i > 0;
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min,
                   OpKind::Mod, OpKind::Fmod, OpKind::Neg, OpKind::Abs, OpKind::Relu, OpKind::Sign,
                   OpKind::Equal, OpKind::Less, OpKind::Greater}) {
    if (op == k) return true;
  }
  return false;
}

}  // namespace

bool takes_int8(const Node& n, int i) {
  switch (n.op) {
#define UBF_OP(...)
#define UBF_MATH(name, ...) case OpKind::name:
#include "ubfuse/ops.def"
    return takes_int8_math(n.op, i);
    case OpKind::Cast:
    case OpKind::Gather:
    case OpKind::GatherElements:
    case OpKind::GatherND:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Concat:
    case OpKind::Expand:
    case OpKind::Pad:
    case OpKind::Shape:
    case OpKind::If:
    case OpKind::Constant:
    case OpKind::Host:
      return true;
    case OpKind::ScatterND:
    case OpKind::ScatterElements:
      return i != 1;  // a reduction other than none is checked by check_reduction
    case OpKind::QuantizeLinear:
      return i == 2;
    case OpKind::DequantizeLinear:
      return i == 0 || i == 2;
    case OpKind::DynamicQuantizeLinear:
      return false;
    case OpKind::MatMulInteger:
    case OpKind::ConvInteger:
    case OpKind::MaxPool:  // a max moves one of its inputs
      return true;
    case OpKind::QLinearMatMul:
      return i == 0 || i == 2 || i == 3 || i == 5 || i == 7;
    case OpKind::DynamicQuantMatMul:
    case OpKind::DynamicQuantConv:
    case OpKind::MatMulNBits:  // its packed weight and zero points
      return i == 1 || i == 3;
    case OpKind::Gelu:
    case OpKind::Pow:
    case OpKind::LayerNorm:
    case OpKind::RMSNorm:
    case OpKind::Softmax:
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
    case OpKind::RotateHalf:
    case OpKind::MatMul:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
    case OpKind::CumSum:
    case OpKind::TopK:
    case OpKind::Conv:
    case OpKind::RNN:
    case OpKind::GRU:
    case OpKind::LSTM:
    case OpKind::AveragePool:
    case OpKind::ReduceProd:
    case OpKind::GroupNorm:
    case OpKind::Resize:
    case OpKind::Range:
    case OpKind::ConstantOfShape:
    case OpKind::AxesShape:  // shape vectors and axes: i64 or i32
      return false;
  }
  return false;
}

void infer_quantize_linear(Node& n) {
  const Value* x = n.inputs[0];
  if (!is_float(x->dtype)) {
    fail(n, "x must be f32, bf16 or f16, got " + dt(x), "QuantizeLinear quantizes floats");
  }
  require_f32_scale(n, 1, "y_scale");
  if (n.inputs.size() > 2) require_int8(n, 2, "y_zero_point");
  check_axis_params(n);
  n.out()->dtype = n.inputs.size() > 2 ? n.inputs[2]->dtype : DType::u8;
  n.out()->shape = x->shape;
}

void infer_dequantize_linear(Node& n) {
  const Value* x = n.inputs[0];
  if (!is_int8(x->dtype) && x->dtype != DType::i32) {
    fail(n, "x must be u8, i8 or i32, got " + dt(x), "DequantizeLinear takes quantized integers");
  }
  require_f32_scale(n, 1, "x_scale");
  if (n.inputs.size() > 2) require_zero_point_dtype(n, 2, 0, "x_zero_point");
  check_axis_params(n);
  n.out()->dtype = DType::f32;
  n.out()->shape = x->shape;
}

void infer_dynamic_quantize_linear(Node& n) {
  const Value* x = n.inputs[0];
  if (!is_float(x->dtype)) {
    fail(n, "x must be f32, bf16 or f16, got " + dt(x), "DynamicQuantizeLinear quantizes floats");
  }
  if (n.outputs.size() != 3) {
    fail(n,
         "has " + std::to_string(n.outputs.size()) + " outputs, not 3 (y, y_scale, y_zero_point)",
         "build it with GraphBuilder::dynamic_quantize_linear");
  }
  n.outputs[0]->dtype = DType::u8;
  n.outputs[0]->shape = x->shape;
  n.outputs[1]->dtype = DType::f32;
  n.outputs[1]->shape = {};
  n.outputs[2]->dtype = DType::u8;
  n.outputs[2]->shape = {};
}

void infer_matmul_integer(Node& n) {
  require_int8(n, 0, "A");
  require_int8(n, 1, "B");
  if (n.inputs.size() > 2) {
    require_zero_point_dtype(n, 2, 0, "a_zero_point");
    check_row_col_param(n, 2, true, "a_zero_point");
  }
  if (n.inputs.size() > 3) {
    require_zero_point_dtype(n, 3, 1, "b_zero_point");
    check_row_col_param(n, 3, false, "b_zero_point");
  }
  n.out()->dtype = DType::i32;
  n.out()->shape = matmul_shape(n, n.inputs[0], n.inputs[1]);
}

void infer_matmul_nbits(Node& n) {
  const Value* a = n.inputs[0];
  const int64_t K = n.attr_int("K", 0), N = n.attr_int("N", 0), bits = n.attr_int("bits", 4),
                bs = n.attr_int("block_size", 0);
  if (K < 1 || N < 1) fail(n, "needs attributes K and N of at least 1");
  if (bits != 4 && bits != 8) fail(n, "bits must be 4 or 8, got " + std::to_string(bits));
  if (bs < 16 || (bs & (bs - 1)) != 0) {
    fail(n, "block_size must be a power of two of at least 16, got " + std::to_string(bs));
  }
  if (a->dtype != DType::f32 || a->shape.empty() || !(a->shape.back() == Dim(K))) {
    fail(n,
         "a must be f32 [..., K = " + std::to_string(K) + "], got " + dt(a) + shape_str(a->shape));
  }
  const int64_t blocks = (K + bs - 1) / bs;
  const Shape want_b{Dim(N), Dim(blocks), Dim(bs * bits / 8)};
  if (n.inputs[1]->dtype != DType::u8 || !(n.inputs[1]->shape == want_b)) {
    fail(n, "b must be u8 " + shape_str(want_b) + " (N, blocks, packed block), got " +
                dt(n.inputs[1]) + shape_str(n.inputs[1]->shape));
  }
  auto count = [&](const Value* v, int64_t want) {
    Dim c(int64_t(1));
    for (const Dim& d : v->shape) c = Dim::mul(c, d);
    return c == Dim(want);
  };
  if (n.inputs[2]->dtype != DType::f32 || !count(n.inputs[2], N * blocks)) {
    fail(n, "scales must hold N x blocks = " + std::to_string(N * blocks) + " f32, got " +
                dt(n.inputs[2]) + shape_str(n.inputs[2]->shape));
  }
  if (n.inputs.size() > 3) {
    const int64_t zrow = (blocks * bits + 7) / 8;
    if (n.inputs[3]->dtype != DType::u8 || !count(n.inputs[3], N * zrow)) {
      fail(n, "zero_points must hold N x " + std::to_string(zrow) + " packed u8, got " +
                  dt(n.inputs[3]) + shape_str(n.inputs[3]->shape));
    }
  }
  n.out()->dtype = DType::f32;
  Shape s = a->shape;
  s.back() = Dim(N);
  n.out()->shape = s;
}

void infer_dynamic_quant_matmul(Node& n) {
  const Value* x = n.inputs[0];
  if (!is_float(x->dtype) || x->shape.size() < 2) {
    fail(n, "x must be a float matrix (rank >= 2), got " + dt(x) + shape_str(x->shape),
         "DynamicQuantMatMul quantizes a float activation");
  }
  require_int8(n, 1, "w");
  if (n.inputs[1]->shape.size() != 2) {
    fail(n, "w must be [K, N], got " + shape_str(n.inputs[1]->shape),
         "the weights of a dynamically quantized MatMul are one matrix");
  }
  require_f32_scale(n, 2, "w_scale");
  check_row_col_param(n, 2, false, "w_scale");
  if (n.inputs.size() > 3) {
    require_zero_point_dtype(n, 3, 1, "w_zero_point");
    check_row_col_param(n, 3, false, "w_zero_point");
  }
  if (n.inputs.size() == 5) fail(n, "takes row_max with row_neg_max, not alone");
  Shape rows = x->shape;
  rows.back() = Dim(int64_t(1));
  for (size_t i = 4; i < n.inputs.size(); i++) {
    const Value* r = n.inputs[i];
    if (r->dtype != DType::f32 || !(r->shape == rows)) {
      fail(n,
           std::string(i == 4 ? "row_max" : "row_neg_max") + " must be f32" + shape_str(rows) +
               ", got " + dt(r) + shape_str(r->shape),
           "one value per row of x");
    }
  }
  n.out()->dtype = DType::f32;
  n.out()->shape = matmul_shape(n, x, n.inputs[1]);
}

void infer_dynamic_quant_conv(Node& n) {
  const Value* x = n.inputs[0];
  if (!is_float(x->dtype)) {
    fail(n, "x must be float, got " + dt(x), "DynamicQuantConv quantizes a float activation");
  }
  require_int8(n, 1, "w");
  require_f32_scale(n, 2, "w_scale");
  infer_conv_geometry(n, true);
  const Dim& m = n.inputs[1]->shape[0];
  for (int i : {2, 3}) {
    if (i >= int(n.inputs.size())) continue;
    const Value* p = n.inputs[size_t(i)];
    if (i == 3) require_zero_point_dtype(n, 3, 1, "w_zero_point");
    if (!one_element(p) && !(p->shape.size() == 1 && p->shape[0] == m)) {
      fail(n,
           std::string(i == 2 ? "w_scale" : "w_zero_point") + " must be one element or [" +
               m.str() + "], got " + shape_str(p->shape),
           "the weights are quantized per tensor or per output channel");
    }
  }
  n.out()->dtype = DType::f32;
}

void infer_qlinear_matmul(Node& n) {
  require_int8(n, 0, "a");
  require_f32_scale(n, 1, "a_scale");
  require_zero_point_dtype(n, 2, 0, "a_zero_point");
  require_int8(n, 3, "b");
  require_f32_scale(n, 4, "b_scale");
  require_zero_point_dtype(n, 5, 3, "b_zero_point");
  require_f32_scale(n, 6, "y_scale");
  require_int8(n, 7, "y_zero_point");
  check_row_col_param(n, 1, true, "a_scale");
  check_row_col_param(n, 2, true, "a_zero_point");
  check_row_col_param(n, 4, false, "b_scale");
  check_row_col_param(n, 5, false, "b_zero_point");
  for (int i : {6, 7}) {
    if (!one_element(n.inputs[size_t(i)])) {
      fail(n,
           std::string(i == 6 ? "y_scale" : "y_zero_point") + " (input " + std::to_string(i) +
               ") must be one element, got " + shape_str(n.inputs[size_t(i)]->shape),
           "the output is quantized per tensor");
    }
  }
  n.out()->dtype = n.inputs[7]->dtype;
  n.out()->shape = matmul_shape(n, n.inputs[0], n.inputs[3]);
}

void infer_conv_integer(Node& n) {
  require_int8(n, 0, "x");
  require_int8(n, 1, "w");
  if (n.inputs.size() > 2) {
    require_zero_point_dtype(n, 2, 0, "x_zero_point");
    if (!one_element(n.inputs[2])) {
      fail(n, "x_zero_point must be one element, got " + shape_str(n.inputs[2]->shape),
           "the input is quantized per tensor");
    }
  }
  infer_conv_geometry(n, true);
  if (n.inputs.size() > 3) {
    require_zero_point_dtype(n, 3, 1, "w_zero_point");
    const Value* z = n.inputs[3];
    const Dim& m = n.inputs[1]->shape[0];
    if (!one_element(z) && !(z->shape.size() == 1 && z->shape[0] == m)) {
      fail(n, "w_zero_point must be one element or [" + m.str() + "], got " + shape_str(z->shape),
           "the weights are quantized per tensor or per output channel");
    }
  }
}

}  // namespace ubfuse::shape_infer
