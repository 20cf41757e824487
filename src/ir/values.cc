#include "ir/values.h"

#include <cctype>
#include <cmath>

namespace ubfuse {

namespace {

// Constants larger than this are data, not a shape's worth of values.
constexpr int64_t kMaxKnownElems = 64;

}  // namespace

bool is_value_operand(const Node& n, int i) {
  switch (n.op) {
    case OpKind::Reshape:
    case OpKind::Expand:
      return i == 1;  // the target shape
    case OpKind::Slice:
      return i >= 1;  // starts, ends, axes, steps
    case OpKind::Range:
      return true;  // start, limit, delta set the length
    case OpKind::ConstantOfShape:
      return i == 0;
    case OpKind::If:
      return i == 0;  // the condition picks the branch, whose outputs may differ in shape
    case OpKind::TopK:
      return i == 1;  // k sets the length of the outputs' axis
    case OpKind::Transpose:
      return i == 1;  // the perm sets the output's dims
    case OpKind::CumSum:
      return i == 1;  // the axis: read by its kernel, checked against the shape by the plan
    case OpKind::Pad:
      return i == 2;  // the pads of (x, value, pads); the fill value is data
    case OpKind::Resize:
      return i == 1;  // scales or sizes; roi is data its kernel reads
#define UBF_OP(...)
#define UBF_MATH(name, ...) case OpKind::name:
#include "ubfuse/ops.def"
    case OpKind::Gelu:
    case OpKind::Pow:
    case OpKind::Cast:
    case OpKind::LayerNorm:
    case OpKind::RMSNorm:
    case OpKind::Softmax:
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
    case OpKind::RotateHalf:
    case OpKind::MatMul:
    case OpKind::Gather:
    case OpKind::GatherElements:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
    case OpKind::GatherND:
    case OpKind::ScatterND:
    case OpKind::ScatterElements:
    case OpKind::Conv:
    case OpKind::RNN:
    case OpKind::GRU:
    case OpKind::LSTM:
    case OpKind::MaxPool:
    case OpKind::AveragePool:
    case OpKind::ReduceProd:
    case OpKind::GroupNorm:
    case OpKind::QuantizeLinear:
    case OpKind::DequantizeLinear:
    case OpKind::DynamicQuantizeLinear:
    case OpKind::MatMulInteger:
    case OpKind::QLinearMatMul:
    case OpKind::DynamicQuantMatMul:
    case OpKind::MatMulNBits:
    case OpKind::DynamicQuantConv:
    case OpKind::ConvInteger:
    case OpKind::Concat:
    case OpKind::AxesShape:  // its output's length follows from its operands' lengths
    case OpKind::Shape:      // reads sizes only
    case OpKind::Constant:
    case OpKind::Host:
      return false;
  }
  return false;
}

const Tensor* operand_value(const Node& n, int i) {
  if (i < 0 || i >= int(n.inputs.size())) return nullptr;
  const Value* v = n.inputs[size_t(i)];
  if (!v->producer || v->producer->op != OpKind::Constant) return nullptr;
  return v->producer->payload.defined() ? &v->producer->payload : nullptr;
}

std::optional<std::vector<int64_t>> operand_ints(const Node& n, int i) {
  const Tensor* t = operand_value(n, i);
  if (!t) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t k = 0; k < t->numel(); k++) {
    double x = t->get(k);
    if (!std::isfinite(x) || x != std::trunc(x)) return std::nullopt;
    out.push_back(int64_t(x));
  }
  return out;
}

std::optional<std::vector<Dim>> operand_dims(const Node& n, int i) {
  if (i < 0 || i >= int(n.inputs.size())) return std::nullopt;
  if (auto ints = operand_ints(n, i)) {
    std::vector<Dim> d;
    for (int64_t x : *ints) d.emplace_back(x);
    return d;
  }
  return n.inputs[size_t(i)]->known;
}

std::optional<std::vector<int64_t>> operand_static_ints(const Node& n, int i) {
  auto d = operand_dims(n, i);
  if (!d) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& x : *d) {
    if (!x.is_static()) return std::nullopt;
    out.push_back(x.value());
  }
  return out;
}

void set_known_from_constant(Value& v, const Tensor& t) {
  v.known.reset();
  if (!t.defined() || t.rank() > 1 || t.numel() > kMaxKnownElems) return;
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32) return;
  std::vector<Dim> d;
  for (int64_t k = 0; k < t.numel(); k++) d.emplace_back(int64_t(t.get(k)));
  v.known = std::move(d);
}

Dim runtime_dim(const Node& n, int out, int d) {
  // Node names come from ONNX files ("/conv1/Conv"); a symbol keeps only name characters.
  std::string name;
  for (char c : n.name) name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  // The node id keeps two nodes whose names sanitize alike apart.
  return Dim("$" + name + "_" + std::to_string(n.id) + "." + std::to_string(out) + "." +
             std::to_string(d));
}

bool is_runtime_symbol(const std::string& s) { return !s.empty() && s[0] == '$'; }

}  // namespace ubfuse
