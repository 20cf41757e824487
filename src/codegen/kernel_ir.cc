// Op tables of the kernel IR and its readable listing.
#include "codegen/kernel_ir.h"

#include <sstream>
#include <utility>

#include "ubfuse/error.h"

namespace ubfuse::kir {

namespace {

constexpr OpSpec kSpecs[] = {
#define UBF_KIR(name, arity, ir, fn, form, cost, bf16) \
  {arity, ir, #fn, Form::form, Cost::cost, Bf16::bf16},
#include "codegen/kir_ops.def"
};

}  // namespace

const OpSpec& spec(Op op) { return kSpecs[size_t(op)]; }

bool bf16_passes_through(Op op, int pos) {
  switch (spec(op).bf16) {
    case Bf16::Stop:
      return false;
    case Bf16::Pass:
      return true;
    case Bf16::PassValues:
      return pos > 0;  // the selected values, not the condition
    case Bf16::PassFirst:
      return pos == 0;  // the exponent, not the row's flag (ExpInRangeIf)
  }
  return false;
}

bool has_expensive_column_op(const Program& p) {
  for (size_t e = 0; e < p.exprs.size(); e++) {
    if (p.needed[e] && !p.exprs[e].row && is_expensive(p.exprs[e].op)) return true;
  }
  return false;
}

namespace {

const char* align_str(Align a) {
  switch (a) {
    case Align::Col:
      return "col";
    case Align::RowKeep:
      return "row";
    case Align::RowDrop:
      return "row-drop";
    case Align::Sample:
      return "sample";
    case Align::RotHalf:
      return "rot-half";
    case Align::RotPairs:
      return "rot-pairs";
  }
  return "?";
}

std::string list(const std::vector<int>& v, const char* prefix = "%") {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::string(prefix) + std::to_string(x);
  return s;
}

}  // namespace

void canonicalize_order(Program& p) {
  const size_t n = p.exprs.size();
  std::vector<int> id(n, -1);  // old index -> new, -1 until placed
  std::vector<int> order;      // old indices in the new order
  // Iterative post-order (a long elementwise chain would be a deep recursion): each stack
  // entry is an expression and how many of its operands were visited.
  std::vector<std::pair<int, int>> stack;
  for (const Output& o : p.outputs) {
    UBF_CHECK(o.expr >= 0 && size_t(o.expr) < n, "output expression out of range");
    if (id[size_t(o.expr)] >= 0) continue;
    stack.emplace_back(o.expr, 0);
    while (!stack.empty()) {
      auto& [e, k] = stack.back();
      const Expr& x = p.exprs[size_t(e)];
      const int ops[4] = {x.a, x.b, x.c, x.guard};
      if (k < 4) {
        const int o = ops[k++];
        if (o >= 0 && id[size_t(o)] < 0) {
          UBF_CHECK(o < e, "expression operands must come before their users");
          stack.emplace_back(o, 0);
        }
        continue;
      }
      if (id[size_t(e)] < 0) {
        id[size_t(e)] = int(order.size());
        order.push_back(e);
      }
      stack.pop_back();
    }
  }
  std::vector<Expr> exprs;
  exprs.reserve(order.size());
  for (int e : order) {
    Expr x = p.exprs[size_t(e)];
    for (int* o : {&x.a, &x.b, &x.c, &x.guard}) {
      if (*o >= 0) *o = id[size_t(*o)];
    }
    exprs.push_back(std::move(x));
  }
  p.exprs = std::move(exprs);
  for (Output& o : p.outputs) o.expr = id[size_t(o.expr)];
}

Phase rescue_pass(const Phase::Rescue& r) {
  Phase ph;
  ph.compute = r.compute;
  ph.reductions = r.reductions;
  return ph;
}

std::string to_string(const Program& p) {
  std::ostringstream o;
  o << "program " << p.name << " (rank " << p.domain_rank << ", " << p.num_phases << " passes)\n";
  for (size_t i = 0; i < p.inputs.size(); i++) {
    const Input& in = p.inputs[i];
    o << "  in" << i << " = " << in.value->name << " " << dtype_name(in.dtype)
      << shape_str(in.value->shape) << (in.vector ? " vector" : "")
      << (in.matmul ? " matmul-block" : "") << "\n";
  }
  for (size_t i = 0; i < p.exprs.size(); i++) {
    const Expr& e = p.exprs[i];
    if (!p.needed.empty() && !p.needed[i]) continue;
    o << "  %" << i << " = " << op_str(e.op);
    if (e.op == Op::Load) o << " in" << e.arg << " " << align_str(e.align);
    if (e.op == Op::Const || e.op == Op::Pow || e.align == Align::Sample || is_rotation(e.align)) {
      o << " " << e.imm;
    }
    for (int x : {e.a, e.b, e.c}) {
      if (x >= 0) o << " %" << x;
    }
    if (e.guard >= 0) o << " if %" << e.guard;
    o << (e.row ? "  : row" : "  : col");
    if (!p.phase.empty()) o << " p" << p.phase[i];
    if (!e.note.empty()) o << "  # " << e.note;
    o << "\n";
  }
  for (size_t i = 0; i < p.outputs.size(); i++) {
    o << "  out" << i << " = %" << p.outputs[i].expr << " -> " << p.outputs[i].value->name << " "
      << dtype_name(p.outputs[i].dtype) << "\n";
  }
  return o.str();
}

std::string to_string(const Program& p, const Schedule& s) {
  std::ostringstream o;
  o << (s.ub ? "ub" : "re-read") << " schedule, " << s.num_slots << " slot(s)\n";
  if (!s.per_call.empty()) o << "  per call: " << list(s.per_call) << "\n";
  if (!s.before.empty() || !s.row_outs_before.empty()) {
    o << "  before: " << list(s.before);
    if (!s.row_outs_before.empty()) o << " | write " << list(s.row_outs_before, "out");
    o << "\n";
  }
  for (size_t q = 0; q < s.phases.size(); q++) {
    const Phase& ph = s.phases[q];
    o << "  pass " << q << ":";
    if (!ph.slot_loads.empty()) {
      o << " read";
      for (int e : ph.slot_loads) o << " %" << e << "<-s" << s.slot[size_t(e)];
      o << " |";
    }
    o << " compute " << list(ph.compute);
    if (!ph.slot_stores.empty()) {
      o << " | keep";
      for (int e : ph.slot_stores) o << " %" << e << "->s" << s.slot[size_t(e)];
    }
    if (!ph.reductions.empty()) o << " | reduce " << list(ph.reductions);
    if (!ph.out_stores.empty()) o << " | write " << list(ph.out_stores, "out");
    if (!ph.after.empty()) o << " | then " << list(ph.after);
    for (const Phase::Rescue& r : ph.rescues) {
      o << " | if %" << r.guard << ": compute " << list(r.compute) << " reduce "
        << list(r.reductions);
    }
    if (!ph.after_rescue.empty()) o << " | then " << list(ph.after_rescue);
    if (!ph.row_outs_after.empty()) o << " | write " << list(ph.row_outs_after, "out");
    o << "\n";
  }
  for (size_t i = 0; i < s.input_passes.size(); i++) {
    if (s.input_passes[i] > 1) {
      o << "  re-reads in" << i << " (" << p.inputs[i].value->name << ") in " << s.input_passes[i]
        << " passes\n";
    }
  }
  return o.str();
}

}  // namespace ubfuse::kir
