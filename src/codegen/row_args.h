// The concrete side of a fused kernel call: the domain's sizes for this call's tensors, and for
// every input and output where each row starts (UbfTensorArg). Inputs may broadcast in any
// numpy way over the leading dims; row maps are reduced to `r * stride` when possible.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/ubk_abi.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

struct RowArgs {
  Sizes domain;
  std::vector<UbfTensorArg> in, out;
  UbfKernelArgs args{};  // points into in/out: do not copy a RowArgs after make_row_args
};

// Fills `ra` for tensors `in` (the program's inputs, MatMul block last if any) and `out`.
// Throws Error naming the group when a tensor does not fit the domain.
void make_row_args(const kir::Program& p, const std::vector<Tensor>& in,
                   const std::vector<Tensor>& out, RowArgs& ra);

}  // namespace ubfuse
