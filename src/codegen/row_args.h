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

// How a program reads its inputs: what make_row_args needs of it that no size changes, found
// once per kernel (row_reads) rather than per call.
struct RowReads {
  std::vector<int8_t> drop;   // per input: -1 unread, 0 read per column (or kept), 1 row base only
  std::vector<char> columns;  // per input: some Load reads it along the row's columns
  int col_input = -1;         // the first input read along columns
  int64_t rot_columns = 0;    // the most columns a Load rotates (RotateHalf's view), 0: none
};
RowReads row_reads(const kir::Program& p);

// Fills `ra` for tensors `in` (the program's inputs, MatMul block last if any) and `out`;
// `r` is row_reads(p). Throws Error naming the group when a tensor does not fit the domain.
void make_row_args(const kir::Program& p, const RowReads& r, const std::vector<Tensor>& in,
                   const std::vector<Tensor>& out, RowArgs& ra);

}  // namespace ubfuse
