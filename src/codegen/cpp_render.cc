#include "codegen/cpp_render.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string_view>

#include "codegen/hash.h"
#include "codegen/ubk_abi.h"
#include "ubfuse/error.h"

namespace ubfuse::cpp {

namespace {

using kir::Expr;
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

// C++ for op over vector operands a, b, c.
std::string vop(const Expr& e, const std::string& a, const std::string& b, const std::string& c) {
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
    default:
      break;
  }
  UBF_CHECK(false, std::string("cpp render: no vector form for ") + kir::op_str(e.op));
}

std::string prefetch_mode() {
  const char* e = std::getenv("UBFUSE_CODEGEN_PREFETCH");
  return e && *e ? e : "spread";
}

class Renderer {
 public:
  Renderer(const kir::Program& p, std::ostringstream& o) : p_(p), o_(o) {}

  // The body of one variant as a static function `name`.
  void variant(const kir::Schedule& s, const std::string& name) {
    s_ = &s;
    o_ << "// "
       << (s.ub ? "UB variant: values crossing passes live in " + std::to_string(s.num_slots) +
                      " UB slot(s)"
                : std::string("re-read variant: crossing values are recomputed"))
       << "\n";
    o_ << "static HWY_NOINLINE void " << name
       << "(const UbfKernelArgs* HWY_RESTRICT a, int64_t r0, int64_t r1, float* HWY_RESTRICT ub) "
          "{\n";
    o_ << "  const DF d;\n  const int64_t L = int64_t(hn::Lanes(d));\n";
    o_ << "  const int64_t cols = a->cols;\n  const int64_t cvec = cols - cols % L;\n";
    o_ << "  const size_t tail = size_t(cols - cvec);\n  const bool nt = a->nt_stores != 0;\n";
    o_ << "  (void)ub; (void)tail; (void)nt;\n";
    for (size_t i = 0; i < p_.inputs.size(); i++) {
      if (!used_input(int(i))) continue;
      o_ << "  const " << storage_type(p_.inputs[i].dtype) << "* const in" << i << " = (const "
         << storage_type(p_.inputs[i].dtype) << "*)a->in[" << i << "].data;  // "
         << p_.inputs[i].value->name << "\n";
    }
    for (size_t i = 0; i < p_.outputs.size(); i++) {
      o_ << "  " << storage_type(p_.outputs[i].dtype) << "* const out" << i << " = ("
         << storage_type(p_.outputs[i].dtype) << "*)a->out[" << i << "].data;  // "
         << p_.outputs[i].value->name << "\n";
    }
    for (int e : s.per_call) row_expr(e, "  ");
    o_ << "  for (int64_t r = r0; r < r1; ++r) {\n";
    const std::string ind = "    ";
    // Row pointers; the next row's for inputs the first pass streams.
    for (size_t i = 0; i < p_.inputs.size(); i++) {
      if (!used_input(int(i))) continue;
      o_ << ind << "const " << storage_type(p_.inputs[i].dtype) << "* const p" << i << " = in" << i
         << " + ubf_row_offset(&a->in[" << i << "], r);\n";
      if (prefetched(int(i))) {
        o_ << ind << "const " << storage_type(p_.inputs[i].dtype) << "* const q" << i << " = in"
           << i << " + ubf_row_offset(&a->in[" << i << "], r + 1 < r1 ? r + 1 : r);\n";
      }
    }
    for (size_t i = 0; i < p_.outputs.size(); i++) {
      o_ << ind << storage_type(p_.outputs[i].dtype) << "* const o" << i << " = out" << i
         << " + ubf_row_offset(&a->out[" << i << "], r);\n";
    }
    for (int k = 0; k < s.num_slots; k++) {
      o_ << ind << "float* const s" << k << " = ub + " << k << " * a->slot_floats;\n";
    }
    for (int e : s.before) row_expr(e, ind);
    for (int o : s.row_outs_before) row_out(o, ind);
    for (size_t q = 0; q < s.phases.size(); q++) pass(int(q), ind);
    o_ << "  }\n";
    o_ << "  if (nt) hwy::FlushStream();\n";
    o_ << "}\n\n";
  }

 private:
  bool used_input(int i) const {
    for (size_t e = 0; e < p_.exprs.size(); e++) {
      if (p_.needed[e] && p_.exprs[e].op == Op::Load && p_.exprs[e].arg == i) return true;
    }
    return false;
  }
  // Column inputs the first pass reads, except [C] weights (the same row every time).
  bool prefetched(int i) const {
    if (s_->phases.empty() || p_.inputs[size_t(i)].vector) return false;
    for (int e : s_->phases[0].compute) {
      const Expr& x = p_.exprs[size_t(e)];
      if (x.op == Op::Load && x.arg == i && !x.row) return true;
    }
    return false;
  }

  static std::string rv(int e) { return "x" + std::to_string(e); }
  static std::string cv(int e) { return "v" + std::to_string(e); }
  // A column op's operand: a column value or a row scalar splatted before the loop.
  std::string operand(int e) const {
    if (e < 0) return "";
    return p_.exprs[size_t(e)].row ? "b" + std::to_string(e) : cv(e);
  }

  void row_expr(int e, const std::string& ind) {
    const Expr& x = p_.exprs[size_t(e)];
    o_ << ind << "const float " << rv(e) << " = ";
    switch (x.op) {
      case Op::Const:
        o_ << flit(x.imm);
        break;
      case Op::Cols:
        o_ << "float(cols)";
        break;
      case Op::Load:
        o_ << "hn::GetLane(UbLoadN(d, p" << x.arg << ", 1))";
        break;
      default: {
        auto s = [&](int o) { return o < 0 ? std::string() : "hn::Set(d, " + rv(o) + ")"; };
        o_ << "hn::GetLane(" << vop(x, s(x.a), s(x.b), s(x.c)) << ")";
      }
    }
    o_ << ";" << (x.note.empty() ? "" : "  // " + x.note) << "\n";
  }

  void row_out(int o, const std::string& ind) {
    o_ << ind << "UbStoreN(hn::Set(d, " << rv(p_.outputs[size_t(o)].expr) << "), d, o" << o
       << ", 1);  // " << p_.outputs[size_t(o)].value->name << "\n";
  }

  void pass(int q, const std::string& outer) {
    const kir::Phase& ph = s_->phases[size_t(q)];
    o_ << outer << "// pass " << q << "\n";
    for (int e : ph.reductions) o_ << outer << "float " << rv(e) << ";\n";
    o_ << outer << "{\n";
    const std::string ind = outer + "  ";
    std::set<int> splats;
    for (int e : ph.compute) {
      const Expr& x = p_.exprs[size_t(e)];
      for (int o : {x.a, x.b, x.c}) {
        if (o >= 0 && p_.exprs[size_t(o)].row) splats.insert(o);
      }
    }
    for (int e : splats) o_ << ind << "const VF b" << e << " = hn::Set(d, " << rv(e) << ");\n";
    // Two accumulators per reduction (even and odd vectors of a 2x unrolled loop) halve the
    // dependency chain of the row sum.
    for (int e : ph.reductions) {
      bool mx = p_.exprs[size_t(e)].op == Op::RowMax;
      const char* init = mx ? "hn::Set(d, -__builtin_inff())" : "hn::Zero(d)";
      o_ << ind << "VF acc" << e << " = " << init << ", acc" << e << "b = " << init << ";\n";
    }
    for (int o : ph.out_stores) {
      o_ << ind << "const bool nt" << o << " = nt && (reinterpret_cast<uintptr_t>(o" << o
         << ") & 63) == 0;\n";
    }
    o_ << ind << "int64_t i0 = 0;\n";
    o_ << ind << "for (; i0 + 2 * L <= cvec; i0 += 2 * L) {\n";
    // The next row's inputs are prefetched (into L2) evenly over all passes, pass q covering
    // columns [q, q + 1) * cols / P: the memory system stays busy while later passes compute.
    // UBFUSE_CODEGEN_PREFETCH=first|none (tuning) prefetches in the first pass only, or not.
    const size_t P = s_->phases.size();
    const std::string mode = prefetch_mode();
    for (size_t i = 0; i < p_.inputs.size(); i++) {
      if (!prefetched(int(i)) || mode == "none") continue;
      if (mode == "first" || P == 1) {
        if (q != 0) continue;
        o_ << ind << "  __builtin_prefetch(q" << i << " + i0, 0, 3);\n";
        o_ << ind << "  __builtin_prefetch(q" << i << " + i0 + L, 0, 3);\n";
        continue;
      }
      o_ << ind << "  __builtin_prefetch(q" << i << " + (" << q << " * cvec + i0) / " << P
         << ", 0, 2);\n";
    }
    o_ << ind << "  {\n" << ind << "    const int64_t i = i0;\n";
    step(ph, ind + "    ", false, "");
    o_ << ind << "  }\n" << ind << "  {\n" << ind << "    const int64_t i = i0 + L;\n";
    step(ph, ind + "    ", false, "b");
    o_ << ind << "  }\n" << ind << "}\n";
    o_ << ind << "if (i0 < cvec) {\n" << ind << "  const int64_t i = i0;\n";
    step(ph, ind + "  ", false, "");
    o_ << ind << "}\n";
    o_ << ind << "if (tail) {\n";
    o_ << ind << "  const int64_t i = cvec;\n";
    step(ph, ind + "  ", true, "b");
    o_ << ind << "}\n";
    for (int e : ph.reductions) {
      bool mx = p_.exprs[size_t(e)].op == Op::RowMax;
      std::string a = "acc" + std::to_string(e);
      o_ << ind << rv(e) << " = "
         << (mx ? "ReduceMaxF(d, MaxF(d, " + a + ", " + a + "b))"
                : "ReduceSumF(d, hn::Add(" + a + ", " + a + "b))")
         << ";  // " << p_.exprs[size_t(e)].note << "\n";
    }
    o_ << outer << "}\n";
    for (int e : ph.after) row_expr(e, outer);
    for (int o : ph.row_outs_after) row_out(o, outer);
  }

  // One column step: slot reads, the chain, slot writes, reductions, output writes.
  void step(const kir::Phase& ph, const std::string& ind, bool tail, const std::string& acc) {
    for (int e : ph.slot_loads) {
      o_ << ind << "const VF " << cv(e) << " = hn::LoadU(d, s" << s_->slot[size_t(e)] << " + i);\n";
    }
    for (int e : ph.compute) {
      const Expr& x = p_.exprs[size_t(e)];
      o_ << ind << "const VF " << cv(e) << " = ";
      if (x.op == Op::Load) {
        if (tail) {
          o_ << "UbLoadN(d, p" << x.arg << " + i, tail)";
        } else {
          o_ << "UbLoad(d, p" << x.arg << " + i)";
        }
      } else {
        o_ << vop(x, operand(x.a), operand(x.b), operand(x.c));
      }
      o_ << ";" << (x.note.empty() ? "" : "  // " + x.note) << "\n";
    }
    for (int e : ph.slot_stores) {
      o_ << ind << "hn::StoreU(" << cv(e) << ", d, s" << s_->slot[size_t(e)] << " + i);\n";
    }
    for (int e : ph.reductions) {
      const Expr& x = p_.exprs[size_t(e)];
      bool mx = x.op == Op::RowMax;
      std::string v = cv(x.a);
      if (tail) v = std::string(mx ? "TailForMax" : "TailForSum") + "(d, " + v + ", tail)";
      std::string a = "acc" + std::to_string(e) + acc;
      o_ << ind << a << " = "
         << (mx ? "MaxF(d, " + a + ", " + v + ")" : "hn::Add(" + a + ", " + v + ")") << ";\n";
    }
    for (int o : ph.out_stores) {
      std::string v = cv(p_.outputs[size_t(o)].expr);
      if (tail) {
        o_ << ind << "UbStoreN(" << v << ", d, o" << o << " + i, tail);\n";
      } else {
        o_ << ind << "if (nt" << o << ") UbStream(" << v << ", d, o" << o << " + i); else UbStore("
           << v << ", d, o" << o << " + i);\n";
      }
    }
  }

  const kir::Program& p_;
  std::ostringstream& o_;
  const kir::Schedule* s_ = nullptr;
};

constexpr const char* kName = "@UBK@";

}  // namespace

const char* const kPreludeHeader = "codegen/ubk_prelude.h";
const char* const kPreludeText =
    "// Everything generated fused kernels include; precompiled once per kernel cache.\n"
    "#pragma once\n"
    "#include <stdint.h>\n\n"
    "#include \"codegen/ubk_abi.h\"\n"
    "#include \"hwy/cache_control.h\"\n"
    "#include \"hwy/highway.h\"\n"
    "#include \"kernels/cpu/vecmath.h\"\n"
    "#include \"codegen/ubk_vec-inl.h\"\n";

RenderedKernel render_kernel(const kir::Program& p, const kir::Schedule& ub,
                             const kir::Schedule& reread) {
  std::ostringstream o;
  o << "// " << p.name << ":";
  for (auto& n : p.node_notes) o << " " << n;
  o << "\n";
  for (size_t i = 0; i < p.inputs.size(); i++) {
    o << "//   in" << i << ": " << p.inputs[i].value->name << " " << dtype_name(p.inputs[i].dtype)
      << shape_str(p.inputs[i].value->shape) << (p.inputs[i].matmul ? " (MatMul block)" : "")
      << "\n";
  }
  for (size_t i = 0; i < p.outputs.size(); i++) {
    o << "//   out" << i << ": " << p.outputs[i].value->name << " "
      << dtype_name(p.outputs[i].dtype) << shape_str(p.outputs[i].value->shape) << "\n";
  }
  Renderer r(p, o);
  r.variant(ub, std::string(kName) + "_ub");
  bool same = ub.num_slots == 0;
  if (!same) r.variant(reread, std::string(kName) + "_rr");
  o << "}  // namespace\n}  // namespace HWY_NAMESPACE\n}  // namespace ubfuse\n";
  o << "extern \"C\" void " << kName
    << "(const UbfKernelArgs* a, int64_t r0, int64_t r1, float* ub, int64_t ub_floats) {\n"
    << "  (void)ub_floats;\n";
  if (same) {
    o << "  ubfuse::HWY_NAMESPACE::" << kName << "_ub(a, r0, r1, ub);\n";
  } else {
    o << "  if (a->use_ub) ubfuse::HWY_NAMESPACE::" << kName << "_ub(a, r0, r1, ub);\n"
      << "  else ubfuse::HWY_NAMESPACE::" << kName << "_rr(a, r0, r1, ub);\n";
  }
  o << "}\n";
  o << "namespace ubfuse {\nnamespace HWY_NAMESPACE {\nnamespace {\n\n";
  std::string text = o.str();
  RenderedKernel k;
  k.symbol = "ubk_" + hash_hex(text);
  size_t pos;
  while ((pos = text.find(kName)) != std::string::npos) {
    text.replace(pos, std::string_view(kName).size(), k.symbol);
  }
  k.code = text;
  return k;
}

std::string render_unit(const std::vector<RenderedKernel>& kernels) {
  std::ostringstream o;
  o << "// Fused kernels generated by ubfuse (src/codegen/cpp_render.cc). One function per\n"
    << "// fused group, ABI UbfKernelFn (codegen/ubk_abi.h), ABI version " << UBF_ABI_VERSION
    << ".\n";
  // The includes (ubk_abi.h, Highway, vecmath.h, ubk_vec-inl.h) are one header, precompiled
  // once per kernel cache (cpp_compile.cc).
  o << "#include \"" << kPreludeHeader << "\"\n\n";
  o << "HWY_BEFORE_NAMESPACE();\nnamespace ubfuse {\nnamespace HWY_NAMESPACE {\nnamespace {\n"
    << "using DF = hn::ScalableTag<float>;\nusing VF = hn::Vec<DF>;\n\n";
  std::set<std::string> seen;
  for (auto& k : kernels) {
    if (seen.insert(k.symbol).second) o << k.code << "\n";
  }
  o << "}  // namespace\n}  // namespace HWY_NAMESPACE\n}  // namespace ubfuse\n"
    << "HWY_AFTER_NAMESPACE();\n";
  return o.str();
}

}  // namespace ubfuse::cpp
