// make_op_kernel: the op -> eager kernel table. Each concept lives in its own file; this switch is
// exhaustive over ops.def (the compiler warns on a missing case).
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/op_kernel.h"

namespace ubfuse::cpu {

std::unique_ptr<OpKernel> make_op_kernel(const Node& n) {
  switch (n.op) {
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Reciprocal:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Relu:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Erf:
    case OpKind::Pow:
    case OpKind::Not:
      return make_unary_kernel(n);
    case OpKind::Cast:
      return make_cast_kernel(n);
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Max:
    case OpKind::Min:
      return make_binary_kernel(n);
    case OpKind::Equal:
    case OpKind::Less:
    case OpKind::Greater:
    case OpKind::Where:
      return make_compare_kernel(n);
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
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Concat:
    case OpKind::Expand:
      return make_movement_kernel(n);
    case OpKind::Constant:
    case OpKind::Host:
      break;
  }
  UBF_CHECK(false, "make_op_kernel: " + n.describe() +
                       " has no eager kernel (Constant and Host are handled by the executor)");
  return nullptr;
}

}  // namespace ubfuse::cpu
