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
    default:
      return "uint8_t";
  }
}

std::string vop(const kir::Expr& e, const std::string& a, const std::string& b,
                const std::string& c) {
  auto f1 = [&](const char* fn) { return std::string(fn) + "(d, " + a + ")"; };
  auto f2 = [&](const char* fn) { return std::string(fn) + "(d, " + a + ", " + b + ")"; };
  auto h2 = [&](const char* fn) { return std::string("hn::") + fn + "(" + a + ", " + b + ")"; };
  switch (e.op) {
    case Op::Neg:
      return f1("NegF");
    case Op::Abs:
      return f1("AbsF");
    case Op::Exp:
      return f1("ExpF");
    case Op::ExpNonPositive:
      return f1("ExpNonPositiveF");
    case Op::ExpInRangeIf:  // a row scalar b (splatted); generated loops branch on it instead
      return f2("ExpInRangeIfF");
    case Op::Log:
      return f1("LogF");
    case Op::Sqrt:
      return f1("SqrtF");
    case Op::Rsqrt:
      return f1("RsqrtF");
    case Op::Recip:
      return f1("ReciprocalF");
    case Op::Tanh:
      return f1("TanhF");
    case Op::Sigmoid:
      return f1("SigmoidF");
    case Op::Relu:
      return f1("ReluF");
    case Op::Silu:
      return f1("SiluF");
    case Op::GeluErf:
      return f1("GeluErfF");
    case Op::GeluTanh:
      return f1("GeluTanhF");
    case Op::Erf:
      return f1("ErfF");
    case Op::Pow:
      return "PowF(d, " + a + ", " + flit(e.imm) + ")";
    case Op::RoundBf16:
      return f1("RoundBf16F");
    case Op::RoundF16:
      return f1("RoundF16F");
    case Op::ToBool:
      return f1("ToBoolF");
    case Op::Not:
      return f1("NotF");
    case Op::Add:
      return h2("Add");
    case Op::Sub:
      return h2("Sub");
    case Op::Mul:
      return h2("Mul");
    case Op::Div:
      return h2("Div");
    case Op::Max:
      return f2("MaxF");
    case Op::Min:
      return f2("MinF");
    case Op::Eq:
      return f2("EqF");
    case Op::Lt:
      return f2("LtF");
    case Op::Gt:
      return f2("GtF");
    case Op::ExpLowp:
      return f1("ExpLowpF");
    case Op::SigmoidLowp:
      return f1("SigmoidLowpF");
    case Op::SiluLowp:
      return f1("SiluLowpF");
    case Op::GeluTanhLowp:
      return f1("GeluTanhLowpF");
    case Op::MulAdd:
      return "hn::MulAdd(" + a + ", " + b + ", " + c + ")";
    case Op::Where:
      return "WhereF(d, " + a + ", " + b + ", " + c + ")";
    case Op::DownScale:
      return f1("DownScaleF");
    default:
      break;
  }
  UBF_CHECK(false, std::string("cpp render: no vector form for ") + kir::op_str(e.op));
}

std::string row_acc_type(kir::Op op) {
  switch (op) {
    case Op::RowSum:
      return "RowAcc<kRowSum>";
    case Op::RowSumSq:
      return "RowAcc<kRowSumSq>";
    case Op::RowMax:
      return "RowAcc<kRowMax>";
    case Op::RowMaxAbs:
      return "RowAcc<kRowMaxAbs>";
    case Op::RowMin:
      return "RowAcc<kRowMin>";
    default:
      UBF_CHECK(false, std::string("cpp render: not a reduction: ") + kir::op_str(op));
  }
}

std::string load_expr(const kir::Expr& x, const std::string& row, bool tail) {
  if (x.align == kir::Align::RotHalf) {
    return tail ? "LoadNRotHalfF32(d, " + row + ", i, cols / 2, tail)"
                : "LoadRotHalfF32(d, " + row + ", i, cols / 2)";
  }
  return tail ? "LoadNF32(d, " + row + " + i, tail)" : "LoadF32(d, " + row + " + i)";
}

std::string load_even_odd(const kir::Expr& x, const std::string& row, const std::string& base,
                          const std::string& v) {
  const std::string pair = v + "e, " + v + "o);";
  if (x.align == kir::Align::RotHalf) {
    return "LoadEvenOddRotHalfBf16(d, " + row + ", " + base + ", cols / 2, " + pair;
  }
  return "LoadEvenOddBf16(d, " + row + " + " + base + ", " + pair;
}

}  // namespace ubfuse::cpp
