// make_op_kernel: the op -> eager kernel table. Each concept lives in its own file; this switch is
// exhaustive over ops.def (a missing case fails the build). The elementwise math rows pick their
// kernel family by arity and Types.
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/op_kernel.h"

namespace ubfuse::cpu {

std::unique_ptr<OpKernel> make_op_kernel(const Node& n) {
  switch (n.op) {
#define UBF_KERNEL_Float1(name) return make_unary_kernel(n);
#define UBF_KERNEL_Number1(name) return make_unary_kernel(n);
#define UBF_KERNEL_Bool1(name) return make_unary_kernel(n);
#define UBF_KERNEL_Test1(name) return make_unary_kernel(n);
#define UBF_KERNEL_Number2(name) return make_binary_kernel(n);
#define UBF_KERNEL_Compare2(name) return make_compare_kernel(n);
#define UBF_KERNEL_Select3(name) return make_compare_kernel(n);
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, ...) \
  case OpKind::name:                      \
    UBF_KERNEL_##types##arity(name)
#include "ubfuse/ops.def"
#undef UBF_KERNEL_Float1
#undef UBF_KERNEL_Number1
#undef UBF_KERNEL_Bool1
#undef UBF_KERNEL_Test1
#undef UBF_KERNEL_Number2
#undef UBF_KERNEL_Compare2
#undef UBF_KERNEL_Select3
    case OpKind::Gelu:
    case OpKind::Pow:
      return make_unary_kernel(n);
    case OpKind::Cast:
      return make_cast_kernel(n);
    case OpKind::LayerNorm:
    case OpKind::RMSNorm:
      return make_norm_kernel(n);
    case OpKind::Softmax:
      return make_softmax_kernel(n);
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
    case OpKind::ReduceMax:
      return make_reduce_kernel(n);
    case OpKind::RotateHalf:
      return make_rotate_half_kernel(n);
    case OpKind::MatMul:
      return make_matmul_kernel(n);
    case OpKind::Gather:
      return make_gather_kernel(n);
    case OpKind::GatherElements:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      return make_index_kernel(n);
    case OpKind::CumSum:
      return make_cumsum_kernel(n);
    case OpKind::TopK:
      return make_topk_kernel(n);
    case OpKind::GatherND:
    case OpKind::ScatterND:
    case OpKind::ScatterElements:
      return make_scatter_kernel(n);
    case OpKind::Conv:
      return make_conv_kernel(n);
    case OpKind::RNN:
    case OpKind::GRU:
    case OpKind::LSTM:
      return make_recurrent_kernel(n);
    case OpKind::MaxPool:
    case OpKind::AveragePool:
    case OpKind::ReduceProd:
      return make_pool_kernel(n);
    case OpKind::QuantizeLinear:
    case OpKind::DequantizeLinear:
    case OpKind::DynamicQuantizeLinear:
      return make_quantize_kernel(n);
    case OpKind::MatMulInteger:
    case OpKind::QLinearMatMul:
      return make_matmul_integer_kernel(n);
    case OpKind::DynamicQuantMatMul:
      return make_dynamic_quant_matmul_kernel(n);
    case OpKind::MatMulNBits:
      return make_matmul_nbits_kernel(n);
    case OpKind::DynamicQuantConv:
      return make_conv_integer_kernel(n);
    case OpKind::ConvInteger:
      return make_conv_integer_kernel(n);
    case OpKind::GroupNorm:
      return make_group_norm_kernel(n);
    case OpKind::Pad:
      return make_pad_kernel(n);
    case OpKind::Resize:
      return make_resize_kernel(n);
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Concat:
    case OpKind::Expand:
      return make_movement_kernel(n);
    case OpKind::Shape:
    case OpKind::Range:
    case OpKind::ConstantOfShape:
    case OpKind::AxesShape:
      return make_shape_value_kernel(n);
    case OpKind::Constant:
    case OpKind::Host:
    case OpKind::If:
      break;
  }
  UBF_CHECK(false, "make_op_kernel: " + n.describe() +
                       " has no eager kernel (Constant and Host are handled by the executor, If "
                       "by the compiler, which compiles its branches)");
  return nullptr;
}

}  // namespace ubfuse::cpu
