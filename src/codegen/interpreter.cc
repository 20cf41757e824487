// Flattens a (Program, Schedule) pair into the interpreter's instruction lists. Column
// registers: one per column value, plus one per row scalar that a column op reads (splatted once
// per row and pass).
#include "codegen/interpreter.h"

#include <map>

#include "ubfuse/error.h"

namespace ubfuse::interp {

namespace {

class Builder {
 public:
  explicit Builder(const kir::Program& p) : p_(p) {}

  int reg(int e) {
    auto it = reg_.find(e);
    if (it != reg_.end()) return it->second;
    int r = next_++;
    reg_[e] = r;
    return r;
  }
  int splat_reg(int e) { return reg(-2 - e); }  // separate key space for splats
  int operand_reg(int e) { return e < 0 ? -1 : p_.exprs[size_t(e)].row ? splat_reg(e) : reg(e); }

  Instr row_instr(int e) {
    const kir::Expr& x = p_.exprs[size_t(e)];
    Instr in;
    in.op = x.op;
    in.dst = e;
    in.a = x.a;
    in.b = x.b;
    in.c = x.c;
    in.imm = x.imm;
    if (x.op == kir::Op::Load) {
      in.kind = Kind::LoadRow;
      in.arg = x.arg;
      in.sample = x.align == kir::Align::Sample;
      in.dtype = p_.inputs[size_t(x.arg)].dtype;
    }
    return in;
  }

  Instr row_out(int o) {
    Instr in;
    in.kind = Kind::StoreOut;
    in.a = p_.outputs[size_t(o)].expr;
    in.arg = o;
    in.dtype = p_.outputs[size_t(o)].dtype;
    return in;
  }

  Variant variant(const kir::Schedule& s) {
    Variant v;
    for (int e : s.before) v.before.push_back(row_instr(e));
    for (int o : s.row_outs_before) v.before.push_back(row_out(o));
    for (const kir::Phase& ph : s.phases) {
      Pass pass = col_pass(ph, s);
      for (int e : ph.after) pass.after.push_back(row_instr(e));
      for (const kir::Phase::Rescue& r : ph.rescues) {
        pass.rescues.push_back({r.guard, col_pass(kir::rescue_pass(r), s)});
      }
      for (int e : ph.after_rescue) pass.after_rescue.push_back(row_instr(e));
      for (int o : ph.row_outs_after) pass.after_rescue.push_back(row_out(o));
      v.passes.push_back(std::move(pass));
    }
    return v;
  }

  int num_regs() const { return next_; }

 private:
  // The column part of a pass: splats, slot loads, the chain, slot and output stores, reductions.
  Pass col_pass(const kir::Phase& ph, const kir::Schedule& s) {
    Pass pass;
    std::map<int, bool> splatted;
    for (int e : ph.compute) {
      const kir::Expr& x = p_.exprs[size_t(e)];
      for (int o : {x.a, x.b, x.c}) {
        if (o >= 0 && p_.exprs[size_t(o)].row && !splatted[o]) {
          splatted[o] = true;
          Instr in;
          in.kind = Kind::Splat;
          in.dst = splat_reg(o);
          in.a = o;
          pass.splats.push_back(in);
        }
      }
    }
    for (int e : ph.slot_loads) {
      Instr in;
      in.kind = Kind::LoadSlot;
      in.dst = reg(e);
      in.arg = s.slot[size_t(e)];
      pass.col.push_back(in);
    }
    for (int e : ph.compute) {
      const kir::Expr& x = p_.exprs[size_t(e)];
      Instr in;
      in.op = x.op;
      in.dst = reg(e);
      in.imm = x.imm;
      if (x.op == kir::Op::Load) {
        in.kind = Kind::LoadIn;
        in.arg = x.arg;
        in.dtype = p_.inputs[size_t(x.arg)].dtype;
        in.rot = x.align;
      } else {
        in.a = operand_reg(x.a);
        in.b = operand_reg(x.b);
        in.c = operand_reg(x.c);
      }
      pass.col.push_back(in);
    }
    for (int e : ph.slot_stores) {
      Instr in;
      in.kind = Kind::StoreSlot;
      in.a = reg(e);
      in.arg = s.slot[size_t(e)];
      pass.col.push_back(in);
    }
    for (int o : ph.out_stores) {
      Instr in = row_out(o);
      in.a = reg(in.a);
      pass.col.push_back(in);
    }
    for (int e : ph.reductions) {
      pass.reductions.push_back({p_.exprs[size_t(e)].op, reg(p_.exprs[size_t(e)].a), e});
    }
    return pass;
  }

  const kir::Program& p_;
  std::map<int, int> reg_;
  int next_ = 0;
};

}  // namespace

std::shared_ptr<const TileProgram> make_tile_program(const kir::Program& p, const kir::Schedule& ub,
                                                     const kir::Schedule& reread) {
  auto tp = std::make_shared<TileProgram>();
  Builder b(p);
  for (int e : ub.per_call) tp->per_call.push_back(b.row_instr(e));
  tp->ub = b.variant(ub);
  tp->reread = b.variant(reread);
  tp->num_col_regs = b.num_regs();
  tp->num_row_regs = int(p.exprs.size());
  for (auto& in : p.inputs) tp->in_dtypes.push_back(in.dtype);
  for (auto& o : p.outputs) tp->out_dtypes.push_back(o.dtype);
  return tp;
}

}  // namespace ubfuse::interp
