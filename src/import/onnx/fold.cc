#include "import/onnx/fold.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/shape_util.h"
#include "kernels/reference/reference.h"
#include "ubfuse/error.h"

namespace ubfuse::onnx_import {

namespace {

bool is_movement(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Transpose || k == OpKind::Slice ||
         k == OpKind::Concat || k == OpKind::Expand || k == OpKind::Gather;
}

int64_t get_int(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i64:
      return t.data_as<int64_t>()[i];
    case DType::i32:
      return t.data_as<int32_t>()[i];
    case DType::boolean:
      return t.data_as<uint8_t>()[i];
    case DType::i8:
      return t.data_as<int8_t>()[i];
    case DType::u8:
      return t.data_as<uint8_t>()[i];
    default:
      UBF_CHECK(false, "get_int on a float tensor");
  }
}

void set_int(Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::i64:
      t.data_as<int64_t>()[i] = v;
      return;
    case DType::i32:
      t.data_as<int32_t>()[i] = int32_t(v);
      return;
    case DType::boolean:
      t.data_as<uint8_t>()[i] = v != 0;
      return;
    case DType::i8:  // wraps, as the eager kernels' integer arithmetic does
      t.data_as<int8_t>()[i] = int8_t(uint8_t(v));
      return;
    case DType::u8:
      t.data_as<uint8_t>()[i] = uint8_t(v);
      return;
    default:
      UBF_CHECK(false, "set_int on a float tensor");
  }
}

// Data movement: evaluate the op on element indices (exact in double up to 2^53 elements), then
// copy the bytes those indices name. Works for every dtype, including int64 beyond 2^53.
std::optional<Tensor> fold_movement(const Node& n, const std::vector<Tensor>& in) {
  std::vector<ref::RefTensor> rin;
  std::vector<int64_t> offsets;  // Concat: where each input's indices start
  int64_t off = 0;
  // Concat moves every input; the others move input 0 (the rest: indices or shape operands).
  size_t data_inputs = n.op == OpKind::Concat ? in.size() : 1;
  for (size_t i = 0; i < in.size(); i++) {
    if (i < data_inputs) {
      ref::RefTensor r;
      r.sizes = in[i].sizes();
      r.dtype = DType::i64;
      r.data.resize(size_t(in[i].numel()));
      for (size_t k = 0; k < r.data.size(); k++) r.data[k] = double(off + int64_t(k));
      offsets.push_back(off);
      off += in[i].numel();
      rin.push_back(std::move(r));
    } else {
      rin.push_back(ref::from_tensor(in[i]));
    }
  }
  auto out = ref::eval_node(n, rin);
  const ref::RefTensor& idx = out.at(0);
  if (numel(idx.sizes) > kMaxFoldMoveElems) return std::nullopt;
  Tensor t(n.out()->dtype, idx.sizes);
  size_t item = dtype_size(t.dtype());
  for (size_t k = 0; k < idx.data.size(); k++) {
    int64_t src = int64_t(idx.data[k]);
    size_t which =
        size_t(std::upper_bound(offsets.begin(), offsets.end(), src) - offsets.begin()) - 1;
    const char* p =
        static_cast<const char*>(in[which].data()) + size_t(src - offsets[which]) * item;
    std::memcpy(static_cast<char*>(t.data()) + k * item, p, item);
  }
  return t;
}

int64_t int_binary(const Node& n, int64_t a, int64_t b) {
  const OpKind k = n.op;
  if (k == OpKind::Add) return int64_t(uint64_t(a) + uint64_t(b));
  if (k == OpKind::Sub) return int64_t(uint64_t(a) - uint64_t(b));
  if (k == OpKind::Mul) return int64_t(uint64_t(a) * uint64_t(b));
  if (k == OpKind::Div) {
    if (b == 0) throw Error(n.describe() + ": integer division by zero in constant folding");
    if (a == INT64_MIN && b == -1) return INT64_MIN;
    return a / b;
  }
  if (k == OpKind::Max) return std::max(a, b);
  if (k == OpKind::Min) return std::min(a, b);
  if (k == OpKind::Mod || k == OpKind::Fmod) {
    if (b == 0) throw Error(n.describe() + ": integer division by zero in constant folding");
    int64_t r = b == -1 ? 0 : a % b;
    if (k == OpKind::Mod && r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
  }
  if (k == OpKind::PowTensor) {
    if (b < 0) {
      if (a == 0) throw Error(n.describe() + ": integer 0 to a negative power in constant folding");
      return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    }
    uint64_t r = 1, base = uint64_t(a);
    for (uint64_t e = uint64_t(b); e != 0; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return int64_t(r);
  }
  if (k == OpKind::Equal) return a == b;
  if (k == OpKind::Less) return a < b;
  if (k == OpKind::Greater) return a > b;
  UBF_CHECK(false, "int_binary: unhandled op " + std::string(op_name(k)));
}

// Exact integer (and bool) elementwise/broadcast ops.
std::optional<Tensor> fold_int(const Node& n, const std::vector<Tensor>& in) {
  Sizes os = in[0].sizes();
  for (size_t i = 1; i < in.size(); i++) {
    os = static_sizes(*broadcast_shapes(to_shape(os), to_shape(in[i].sizes()), nullptr));
  }
  if (numel(os) > kMaxFoldMoveElems) return std::nullopt;
  Tensor t(n.out()->dtype, os);
  std::vector<std::vector<int64_t>> st;
  for (auto& x : in) st.push_back(broadcast_strides(x.sizes(), os));
  Sizes coord(os.size(), 0);
  for (int64_t f = 0; f < t.numel(); f++) {
    int64_t rem = f;
    std::vector<int64_t> idx(in.size(), 0);
    for (size_t d = os.size(); d-- > 0;) {
      int64_t c = rem % os[d];
      rem /= os[d];
      for (size_t i = 0; i < in.size(); i++) idx[i] += c * st[i][d];
    }
    const OpKind k = n.op;
    int64_t v;
    if (k == OpKind::Neg) {
      v = int64_t(0 - uint64_t(get_int(in[0], idx[0])));
    } else if (k == OpKind::Abs) {
      v = std::abs(get_int(in[0], idx[0]));
    } else if (k == OpKind::Not) {
      v = get_int(in[0], idx[0]) == 0;
    } else if (k == OpKind::Cast) {
      v = get_int(in[0], idx[0]);
    } else if (k == OpKind::Relu) {
      v = std::max<int64_t>(0, get_int(in[0], idx[0]));
    } else if (k == OpKind::Sign) {
      const int64_t x = get_int(in[0], idx[0]);
      v = (x > 0) - (x < 0);
    } else if (k == OpKind::Where) {
      v = get_int(in[0], idx[0]) ? get_int(in[1], idx[1]) : get_int(in[2], idx[2]);
    } else {
      v = int_binary(n, get_int(in[0], idx[0]), get_int(in[1], idx[1]));
    }
    set_int(t, f, v);
  }
  return t;
}

// n's output evaluated by the double reference, stored in its dtype.
Tensor by_reference(const Node& n, const std::vector<Tensor>& in) {
  std::vector<ref::RefTensor> rin;
  for (auto& t : in) rin.push_back(ref::from_tensor(t));
  auto out = ref::eval_node(n, rin).at(0);
  Tensor t(n.out()->dtype, out.sizes);
  for (int64_t i = 0; i < t.numel(); i++) t.set(i, out.data[size_t(i)]);
  return t;
}

}  // namespace

std::optional<Tensor> fold_node(const Node& n) {
  std::vector<Tensor> in;
  for (auto* v : n.inputs) {
    if (!v || !v->producer || v->producer->op != OpKind::Constant) return std::nullopt;
    in.push_back(v->producer->payload);
  }
  if (n.op == OpKind::Range) {
    // Its length is known once its bounds are: positions (a window's, a DFT basis') fold on.
    const double delta = in[2].get(0);
    if (delta == 0) return std::nullopt;  // the kernel names the error at run time
    const double count = std::ceil((in[1].get(0) - in[0].get(0)) / delta);
    if (!(count <= double(kMaxFoldMoveElems))) return std::nullopt;
    return by_reference(n, in);
  }
  FusionClass fc = fusion_class(n.op);
  if (fc == FusionClass::Constant || fc == FusionClass::Host) return std::nullopt;
  if (is_movement(n.op)) return fold_movement(n, in);
  bool ints_only = !is_float(n.out()->dtype);
  size_t first_value = n.op == OpKind::Where ? 1 : 0;
  for (size_t i = first_value; i < in.size(); i++) ints_only &= !is_float(in[i].dtype());
  if (ints_only && (fc == FusionClass::Elementwise || fc == FusionClass::Broadcast)) {
    return fold_int(n, in);
  }
  if (fc == FusionClass::Opaque) return std::nullopt;  // MatMul: left to the fast kernels
  if (!is_static(n.out()->shape) || numel(static_sizes(n.out()->shape)) > kMaxFoldMathElems) {
    return std::nullopt;
  }
  return by_reference(n, in);
}

}  // namespace ubfuse::onnx_import
