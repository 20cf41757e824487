// C++ spellings of kernel IR values and ops, for the renderer (cpp_render.cc): float literals,
// storage types, one expression's vector code (the vecmath.h / ubk_vec-inl.h function it calls),
// and the accumulator type of a row reduction.
#pragma once

#include <string>

#include "codegen/kernel_ir.h"

namespace ubfuse::cpp {

// A float literal that round-trips (hex), or the builtin for NaN / inf.
std::string flit(float v);
// The C++ element type a tensor of dtype t is stored as.
const char* storage_type(DType t);
// C++ for expression e over vector operands a, b, c (`d` is the float descriptor in scope).
std::string vop(const kir::Expr& e, const std::string& a, const std::string& b,
                const std::string& c);
// C++ loading column input x (a Load) at column `i` of row pointer `row`: a whole vector, or with
// `tail` the first `tail` lanes; through RotateHalf's view of the row for a rotation (RotHalf,
// RotPairs).
std::string load_expr(const kir::Expr& x, const std::string& row, bool tail);
// The statement loading columns `base` .. base + 2 * L - 1 of a bf16 row into the even/odd lane
// pair `v`e, `v`o (loop_plan.h: bf16_even_odd_lanes).
std::string load_even_odd(const kir::Expr& x, const std::string& row, const std::string& base,
                          const std::string& v);
// The RowAcc<...> accumulator (ubk_vec-inl.h) of a reduction op.
std::string row_acc_type(kir::Op op);

}  // namespace ubfuse::cpp
