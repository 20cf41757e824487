// C++ spellings of kernel IR values and ops (see cpp_expr.h).
#include "codegen/cpp_expr.h"

#include <cmath>
#include <cstdio>

#include "ubfuse/error.h"

namespace ubfuse::cpp {

using kir::Op;

std::string flit(float v) {
  if (std::isnan(v)) return "__builtin_nanf(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%af", double(v));
  return buf;
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::bf16:
      return "hwy::bfloat16_t";
    case DType::f16:
      return "hwy::float16_t";
    case DType::i32:
      return "int32_t";  // inputs only, read through a Cast to f32
    default:
      return "uint8_t";
  }
}

std::string vop(const kir::Expr& e, const std::string& a, const std::string& b,
                const std::string& c) {
  const kir::OpSpec& k = kir::spec(e.op);
  const std::string* operands[] = {&a, &b, &c};
  std::string args;
  for (int i = 0; i < k.arity; i++) args += (i ? ", " : "") + *operands[i];
  switch (k.form) {
    case kir::Form::Vec:  // ExpInRangeIf: a row scalar b (splatted); loops branch on it instead
      return std::string(k.fn) + "(d, " + args + ")";
    case kir::Form::Hwy:
      return std::string("hn::") + k.fn + "(" + args + ")";
    case kir::Form::VecImm:
      return std::string(k.fn) + "(d, " + args + ", " + flit(e.imm) + ")";
    case kir::Form::Leaf:
    case kir::Form::Row:
      break;
  }
  UBF_CHECK(false, std::string("cpp render: no vector form for ") + kir::op_str(e.op));
}

std::string row_acc_type(kir::Op op) {
  UBF_CHECK(kir::is_reduction(op), std::string("cpp render: not a reduction: ") + kir::op_str(op));
  return std::string("RowAcc<") + kir::spec(op).fn + ">";
}

std::string load_expr(const kir::Expr& x, const std::string& row, bool tail) {
  if (kir::is_rotation(x.align)) {
    const std::string fn = x.align == kir::Align::RotHalf ? "RotHalfF32" : "RotPairsF32";
    const std::string r = std::to_string(int64_t(x.imm));
    return tail ? "LoadN" + fn + "(d, " + row + ", i, " + r + ", tail)"
                : "Load" + fn + "(d, " + row + ", i, " + r + ")";
  }
  return tail ? "LoadNF32(d, " + row + " + i, tail)" : "LoadF32(d, " + row + " + i)";
}

std::string load_even_odd(const kir::Expr& x, const std::string& row, const std::string& base,
                          const std::string& v) {
  const std::string pair = v + "e, " + v + "o);";
  if (kir::is_rotation(x.align)) {
    const std::string fn = x.align == kir::Align::RotHalf ? "RotHalf" : "RotPairs";
    return "LoadEvenOdd" + fn + "Bf16(d, " + row + ", " + base + ", " +
           std::to_string(int64_t(x.imm)) + ", " + pair;
  }
  return "LoadEvenOddBf16(d, " + row + " + " + base + ", " + pair;
}

}  // namespace ubfuse::cpp
