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
// The RowAcc<...> accumulator (ubk_vec-inl.h) of a reduction op.
std::string row_acc_type(kir::Op op);

}  // namespace ubfuse::cpp
