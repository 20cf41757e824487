#include "codegen/cpp_render.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string_view>

#include "codegen/cpp_expr.h"
#include "codegen/cpp_prefetch.h"
#include "codegen/hash.h"
#include "codegen/loop_plan.h"
#include "ubfuse/error.h"

namespace ubfuse::cpp {

namespace {

using kir::Expr;
using kir::Op;

class Renderer {
 public:
  Renderer(const kir::Program& p, std::ostringstream& o)
      : p_(p), o_(o), even_odd_(bf16_even_odd_lanes(p)), skew_(skew_loops(p, native_avx512())) {}

  bool even_odd() const { return even_odd_; }

  // One row at a time: every pass of row r, then row r + 1.
  void variant(const kir::Schedule& s, const std::string& name) {
    begin(s, name,
          s.ub ? "UB variant: values crossing passes live in " + std::to_string(s.num_slots) +
                     " UB slot(s)"
               : "re-read variant: crossing values are recomputed from the inputs");
    for (int e : s.per_call) row_expr(e, "  ");
    cursors("  ");
    o_ << "  for (int64_t r = r0; r < r1; ++r) {\n";
    const std::string ind = "    ";
    row_pointers(ind, "r", "ub");
    for (int e : s.before) row_expr(e, ind);
    for (int o : s.row_outs_before) row_out(o, ind);
    for (size_t q = 0; q < s.phases.size(); q++) pass(int(q), ind);
    next_row(ind, "");
    o_ << "  }\n";
    end();
  }

  // Software-pipelined UB variant (2+ passes, two sets of slots): the last pass of row r and the
  // first pass of row r + 1 run in one loop, so the first pass's loads stream from memory while
  // the last pass computes. Row scalars live in x<e> (row r) and nx<e> (row r + 1).
  void pipelined(const kir::Schedule& s, const std::string& name) {
    const int P = int(s.phases.size());
    UBF_CHECK(P >= 2, "pipelining needs two passes");
    begin(s, name,
          "pipelined UB variant: the last pass of a row shares its loop with the first pass of "
          "the next; " +
              std::to_string(2 * s.num_slots) + " UB slot(s)");
    for (int e : s.per_call) row_expr(e, "  ");
    assign_ = true;
    std::string decl;
    for (size_t e = 0; e < p_.exprs.size(); e++) {
      if (p_.needed[e] && p_.exprs[e].row && !per_call(int(e))) {
        decl += (decl.empty() ? "" : ", ") + rv(int(e)) + " = 0.f, n" + rv(int(e)) + " = 0.f";
      }
    }
    if (!decl.empty()) o_ << "  float " << decl << ";\n";
    o_ << "  const int64_t slot_set = " << s.num_slots << " * a->slot_floats;\n";
    cursors("  ");
    // Prologue: the first pass of the first row (its pointers; no row-ahead prefetch).
    o_ << "  if (r0 < r1) {\n    const int64_t r = r0;\n";
    row_pointers("    ", "r", "ub", /*ahead=*/false);
    for (int e : s.before) row_expr(e, "    ");
    for (int o : s.row_outs_before) row_out(o, "    ");
    pass(0, "    ");
    o_ << "  }\n";
    o_ << "  for (int64_t r = r0; r < r1; ++r) {\n";
    const std::string ind = "    ";
    row_pointers(ind, "r", "ub + ((r - r0) & 1) * slot_set");
    for (int q = 1; q + 1 < P; q++) pass(q, ind);
    o_ << ind << "if (r + 1 < r1) {\n";
    const std::string in2 = ind + "  ";
    pfx_ = "n";
    next_row(in2, "n");  // row r + 1's cursors: copies of row r's, moved on
    row_pointers(in2, "r + 1", "ub + ((r + 1 - r0) & 1) * slot_set");
    for (int e : s.before) row_expr(e, in2);
    for (int o : s.row_outs_before) row_out(o, in2);
    pfx_.clear();
    pass_pair(P - 1, 0, in2);
    // Row r + 1's scalars so far become the current row's.
    std::string copy;
    std::vector<int> carried = s.before;
    carried.insert(carried.end(), s.phases[0].reductions.begin(), s.phases[0].reductions.end());
    carried.insert(carried.end(), s.phases[0].after.begin(), s.phases[0].after.end());
    for (const kir::Phase::Rescue& r : s.phases[0].rescues) {
      carried.insert(carried.end(), r.reductions.begin(), r.reductions.end());
    }
    carried.insert(carried.end(), s.phases[0].after_rescue.begin(), s.phases[0].after_rescue.end());
    for (int e : carried) copy += " " + rv(e) + " = n" + rv(e) + ";";
    if (!copy.empty()) o_ << in2 << copy.substr(1) << "\n";
    o_ << ind << "} else {\n";
    pass(P - 1, in2);
    o_ << ind << "}\n";
    next_row(ind, "");
    o_ << "  }\n";
    assign_ = false;
    end();
  }

 private:
  void begin(const kir::Schedule& s, const std::string& name, const std::string& what) {
    s_ = &s;
    o_ << "// " << what << "\n";
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
         << storage_type(p_.inputs[i].dtype) << "*)a->in[" << i << "].data;\n";
    }
    for (size_t i = 0; i < p_.outputs.size(); i++) {
      o_ << "  " << storage_type(p_.outputs[i].dtype) << "* const out" << i << " = ("
         << storage_type(p_.outputs[i].dtype) << "*)a->out[" << i << "].data;\n";
    }
  }

  void end() {
    o_ << "  if (nt) hwy::FlushStream();\n";
    o_ << "}\n\n";
  }

  // Before the row loop: a row cursor (ubk_abi.h) at r0 for each input read and each output,
  // ci<i> / co<i>, and those of the row-ahead prefetches.
  void cursors(const std::string& ind) {
    for (size_t i = 0; i < p_.inputs.size(); i++) {
      if (used_input(int(i))) {
        o_ << ind << "UbfRowCursor ci" << i << " = ubf_cursor_at(&a->in[" << i << "], r0);\n";
      }
    }
    for (size_t i = 0; i < p_.outputs.size(); i++)
      o_ << ind << "UbfRowCursor co" << i << " = ubf_cursor_at(&a->out[" << i << "], r0);\n";
    o_ << row_ahead_cursors(p_, ind);
  }

  // The cursors one row on: in place (pfx "") or as copies named with prefix pfx.
  void next_row(const std::string& ind, const std::string& pfx) {
    const auto step = [&](const std::string& c, const std::string& arg) {
      if (!pfx.empty()) o_ << ind << "UbfRowCursor " << pfx << c << " = " << c << ";\n";
      o_ << ind << "ubf_cursor_next(&" << arg << ", &" << pfx << c << ");\n";
    };
    for (size_t i = 0; i < p_.inputs.size(); i++) {
      if (used_input(int(i))) step("ci" + std::to_string(i), "a->in[" + std::to_string(i) + "]");
    }
    for (size_t i = 0; i < p_.outputs.size(); i++)
      step("co" + std::to_string(i), "a->out[" + std::to_string(i) + "]");
  }

  // Row pointers p<i> / o<i> and UB slots s<k> (all with the current prefix) for row `row`, from
  // the cursors of that prefix; with `ahead`, the row-ahead prefetches of row r first.
  void row_pointers(const std::string& ind, const std::string& row, const std::string& slot_base,
                    bool ahead = true) {
    if (ahead && pfx_.empty()) o_ << row_ahead_prefetches(p_, row, ind);
    for (size_t i = 0; i < p_.inputs.size(); i++) {
      if (!used_input(int(i))) continue;
      const char* t = storage_type(p_.inputs[i].dtype);
      o_ << ind << "const " << t << "* const " << pfx_ << "p" << i << " = in" << i << " + " << pfx_
         << "ci" << i << ".off;\n";
    }
    for (size_t i = 0; i < p_.outputs.size(); i++) {
      o_ << ind << storage_type(p_.outputs[i].dtype) << "* const " << pfx_ << "o" << i << " = out"
         << i << " + " << pfx_ << "co" << i << ".off;\n";
    }
    for (int k = 0; k < s_->num_slots; k++) {
      o_ << ind << "float* const " << pfx_ << "s" << k << " = " << slot_base << " + " << k
         << " * a->slot_floats;\n";
    }
  }

  bool used_input(int i) const {
    for (size_t e = 0; e < p_.exprs.size(); e++) {
      if (p_.needed[e] && p_.exprs[e].op == Op::Load && p_.exprs[e].arg == i) return true;
    }
    return false;
  }
  bool per_call(int e) const {
    return std::find(s_->per_call.begin(), s_->per_call.end(), e) != s_->per_call.end();
  }

  // Names carry the prefix of the row being rendered ("" or "n" for the next row); per-call
  // scalars are shared.
  std::string rv(int e) const { return (per_call(e) ? "" : pfx_) + "x" + std::to_string(e); }
  std::string cv(int e) const { return pfx_ + "v" + std::to_string(e); }
  // A column op's operand: a column value or a row scalar splatted before the loop.
  std::string operand(int e) const {
    if (e < 0) return "";
    return p_.exprs[size_t(e)].row ? pfx_ + "b" + std::to_string(e) : cv(e);
  }

  void row_expr(int e, const std::string& ind) {
    const Expr& x = p_.exprs[size_t(e)];
    o_ << ind << (assign_ && !per_call(e) ? "" : "const float ") << rv(e) << " = ";
    if (x.op == Op::Const) {
      o_ << flit(x.imm);
    } else if (x.op == Op::Cols) {
      o_ << "float(cols)";
    } else if (x.op == Op::Load && x.align == kir::Align::Sample) {
      // An empty row has nothing to sample.
      o_ << "cols == 0 ? 0.f : hn::GetLane(LoadNF32(d, " << pfx_ << "p" << x.arg << " + int64_t("
         << flit(x.imm) << " * float(cols - 1)), 1))";
    } else if (x.op == Op::Load) {
      o_ << "hn::GetLane(LoadNF32(d, " << pfx_ << "p" << x.arg << ", 1))";
    } else {  // the vector math on splats, lane 0
      auto s = [&](int o) { return o < 0 ? std::string() : "hn::Set(d, " + rv(o) + ")"; };
      o_ << "hn::GetLane(" << vop(x, s(x.a), s(x.b), s(x.c)) << ")";
    }
    o_ << ";\n";
  }

  void row_out(int o, const std::string& ind) {
    o_ << ind << "StoreNF32(hn::Set(d, " << rv(p_.outputs[size_t(o)].expr) << "), d, " << pfx_
       << "o" << o << ", 1);\n";
  }

  // Declarations before a pass's loop: splatted row scalars, accumulators, streaming flags.
  void pass_setup(const kir::Phase& ph, const std::string& ind) {
    std::set<int> splats;
    for (int e : ph.compute) {
      const Expr& x = p_.exprs[size_t(e)];
      for (int o : {x.a, x.b, x.c}) {
        if (o >= 0 && p_.exprs[size_t(o)].row) splats.insert(o);
      }
    }
    for (int e : splats)
      o_ << ind << "const VF " << operand(e) << " = hn::Set(d, " << rv(e) << ");\n";
    // Two accumulators per reduction (even and odd vectors of a 2x unrolled loop) halve the
    // dependency chain of the row sum.
    for (int e : ph.reductions) {
      const std::string init = row_acc(e) + "::Init(d)";
      o_ << ind << "VF " << acc(e) << " = " << init << ", " << acc(e) << "b = " << init << ";\n";
    }
    for (int o : ph.out_stores) {
      o_ << ind << "const bool " << pfx_ << "nt" << o << " = nt && (reinterpret_cast<uintptr_t>("
         << pfx_ << "o" << o << ") & 63) == 0;\n";
    }
  }

  // After the loop: reduction results, then the row scalars and row outputs that follow.
  void pass_finish(const kir::Phase& ph, const std::string& inner, const std::string& outer) {
    finish_reductions(ph, inner);
    o_ << outer << "}\n";
    for (int e : ph.after) row_expr(e, outer);
    for (const kir::Phase::Rescue& r : ph.rescues) rescue(r, outer);
    for (int e : ph.after_rescue) row_expr(e, outer);
    for (int o : ph.row_outs_after) row_out(o, outer);
  }

  // Guarded reductions: 0, or where the guard holds, a loop of their own over the row that
  // recomputes their operands from the inputs.
  void rescue(const kir::Phase::Rescue& r, const std::string& outer) {
    for (int e : r.reductions) {
      o_ << outer << (assign_ ? "" : "float ") << rv(e) << " = 0.f;\n";
    }
    o_ << outer << "if (" << rv(r.guard) << " != 0.f) {  // rare: recomputed from the inputs\n";
    const kir::Phase ph = kir::rescue_pass(r);
    loop(ph, outer + "  ", -1);
    finish_reductions(ph, outer + "  ");
    o_ << outer << "}\n";
  }

  // The reductions' results once their loop is done.
  void finish_reductions(const kir::Phase& ph, const std::string& ind) {
    for (int e : ph.reductions) {
      const std::string a = acc(e);
      o_ << ind << rv(e) << " = " << row_acc(e) << "::Finish(d, " << a << ", " << a << "b);\n";
    }
  }

  // Setup, a 2x unrolled loop of column steps (prefetching what pass q streams; q < 0: nothing),
  // the last whole vector and the masked tail.
  void loop(const kir::Phase& ph, const std::string& ind, int q) {
    pass_setup(ph, ind);
    const StepStages st = step_stages(p_, ph, skew_);
    o_ << ind << "int64_t i0 = 0;\n";
    skew_prologue(ph, st, ind);
    o_ << ind << "for (; i0 + 2 * L <= cvec; i0 += 2 * L) {\n";
    if (q >= 0) prefetch(q, ind + "  ");
    body(ph, st, ind + "  ");
    o_ << ind << "}\n";
    last_steps(ph, ind);
  }

  // The unrolled loop's body: its two column steps, or when skewed the early stage of the next
  // two (if there are) and the late stage of these, from the carried values.
  void body(const kir::Phase& ph, const StepStages& st, const std::string& ind) {
    if (!st.skewed()) return steps(ph, ind);
    std::string cur;
    for (int e : st.carried) {
      cur += std::string(cur.empty() ? "const VF " : ", ") + carry(e, "c", 0) + " = " +
             carry(e, "k", 0) + ", " + carry(e, "c", 1) + " = " + carry(e, "k", 1);
    }
    o_ << ind << cur << ";\n";
    o_ << ind << "if (i0 + 4 * L <= cvec) {\n";
    early_steps(ph, st, ind + "  ", "i0 + 2 * L");
    o_ << ind << "}\n";
    stage(&st, true);
    steps(ph, ind);
    stage(nullptr, false);
  }
  // Before a skewed loop: the carried registers, and the early stage of the first two steps.
  void skew_prologue(const kir::Phase& ph, const StepStages& st, const std::string& ind) {
    if (!st.skewed()) return;
    o_ << ind << "// skewed: the early stage runs one 2-vector step ahead (loop_plan.h)\n";
    std::string decl;
    for (int e : st.carried) {
      decl += std::string(decl.empty() ? "VF " : ", ") + carry(e, "k", 0) + " = hn::Zero(d), " +
              carry(e, "k", 1) + " = hn::Zero(d)";
    }
    o_ << ind << decl << ";\n";
    o_ << ind << "if (2 * L <= cvec) {\n";
    early_steps(ph, st, ind + "  ", "0");
    o_ << ind << "}\n";
  }
  void early_steps(const kir::Phase& ph, const StepStages& st, const std::string& ind,
                   const std::string& base) {
    stage(&st, false);
    steps(ph, ind, base);
    stage(nullptr, false);
  }
  void stage(const StepStages* st, bool late) {
    stages_ = st;
    late_ = late;
  }
  // Whether expr e belongs to the stage being rendered (all of them when not skewed).
  bool in_stage(int e) const { return !stages_ || bool(stages_->late[size_t(e)]) == late_; }
  // Carried value e of step 1 or 2 of a pair ("k": the next pair's, "c": this pair's).
  std::string carry(int e, const char* kind, int step) const {
    return pfx_ + kind + std::to_string(e) + "_" + std::to_string(step);
  }

  std::string acc(int e) const { return pfx_ + "acc" + std::to_string(e); }
  std::string row_acc(int e) const { return row_acc_type(p_.exprs[size_t(e)].op); }

  // The prefetches of pass q's column steps (cpp_prefetch.h).
  void prefetch(int q, const std::string& ind) { o_ << step_prefetches(p_, *s_, q, pfx_, ind); }

  // One pass over the row: setup, a 2x unrolled loop of column steps, the last whole vector,
  // the masked tail, then the results.
  void pass(int q, const std::string& outer) {
    const kir::Phase& ph = s_->phases[size_t(q)];
    o_ << outer << "// pass " << q << "\n";
    if (!assign_) {
      for (int e : ph.reductions) o_ << outer << "float " << rv(e) << ";\n";
    }
    o_ << outer << "{\n";
    const std::string ind = outer + "  ";
    loop(ph, ind, q);
    pass_finish(ph, ind, outer);
  }

  // Pass qa of row r and pass qb of row r + 1 (prefix "n") in one loop.
  void pass_pair(int qa, int qb, const std::string& outer) {
    const kir::Phase& pa = s_->phases[size_t(qa)];
    const kir::Phase& pb = s_->phases[size_t(qb)];
    o_ << outer << "// pass " << qa << " of this row with pass " << qb << " of the next\n";
    o_ << outer << "{\n";
    const std::string ind = outer + "  ";
    pass_setup(pa, ind);
    pfx_ = "n";
    pass_setup(pb, ind);
    pfx_.clear();
    const StepStages sa = step_stages(p_, pa, skew_), sb = step_stages(p_, pb, skew_);
    o_ << ind << "int64_t i0 = 0;\n";
    skew_prologue(pa, sa, ind);
    pfx_ = "n";
    skew_prologue(pb, sb, ind);
    pfx_.clear();
    o_ << ind << "for (; i0 + 2 * L <= cvec; i0 += 2 * L) {\n";
    prefetch(qa, ind + "  ");
    body(pa, sa, ind + "  ");
    pfx_ = "n";
    prefetch(qb, ind + "  ");
    body(pb, sb, ind + "  ");
    pfx_.clear();
    o_ << ind << "}\n";
    last_steps(pa, ind);
    pfx_ = "n";
    last_steps(pb, ind);
    pfx_.clear();
    // Results of this row first (they use x<e>), then the next row's (nx<e>).
    o_ << ind << "{\n";
    pass_finish(pa, ind + "  ", ind);
    pfx_ = "n";
    o_ << ind << "{\n";
    pass_finish(pb, ind + "  ", ind);
    pfx_.clear();
    o_ << outer << "}\n";
  }

  // The body of the unrolled loop: two column steps (even and odd accumulators). bf16 outputs
  // are stored once per pair of steps (StorePairF32: one narrowing for both).
  // The steps start at column `base` (i0, or the next pair's when skewed).
  void steps(const kir::Phase& ph, const std::string& ind, const std::string& base = "i0") {
    for (int o : ph.out_stores) {
      if (paired(o) && in_stage(p_.outputs[size_t(o)].expr)) {
        o_ << ind << "VF " << pair_var(o) << ";\n";
      }
    }
    // bf16 lanes: one load per input and pair of steps, held in registers (a shift or AND with a
    // memory operand measured slower here).
    for (int e : ph.compute) {
      if (!even_odd_ || !column_load(p_.exprs[size_t(e)]) || !in_stage(e)) continue;
      const std::string v = cv(e);
      const kir::Expr& x = p_.exprs[size_t(e)];
      o_ << ind << "VF " << v << "e, " << v << "o;\n";
      o_ << ind << load_even_odd(x, pfx_ + "p" + std::to_string(x.arg), base, v) << "\n";
    }
    o_ << ind << "{\n" << ind << "  const int64_t i = " << base << ";\n";
    step(ph, ind + "  ", false, "", 1);
    o_ << ind << "}\n" << ind << "{\n" << ind << "  const int64_t i = " << base << " + L;\n";
    step(ph, ind + "  ", false, "b", 2);
    o_ << ind << "}\n";
  }
  bool paired(int o) const { return p_.outputs[size_t(o)].dtype == DType::bf16; }
  std::string pair_var(int o) const { return pfx_ + "pk" + std::to_string(o); }

  // After the unrolled loop: at most one whole vector, then the masked tail.
  void last_steps(const kir::Phase& ph, const std::string& ind) {
    o_ << ind << "if (i0 < cvec) {\n" << ind << "  const int64_t i = i0;\n";
    step(ph, ind + "  ", false, "");
    o_ << ind << "}\n";
    o_ << ind << "if (tail) {\n";
    o_ << ind << "  const int64_t i = cvec;\n";
    step(ph, ind + "  ", true, "b");
    o_ << ind << "}\n";
  }

  // One column step: slot reads, the chain, slot writes, reductions, output writes. `pair` is
  // 1 or 2 for the first or second step of the unrolled loop (0 elsewhere).
  void step(const kir::Phase& ph, const std::string& ind, bool tail, const std::string& accb,
            int pair = 0) {
    if (stages_ && late_) {  // the early values of this step, computed a pair of steps ago
      for (int e : stages_->carried) {
        o_ << ind << "const VF " << cv(e) << " = " << carry(e, "c", pair - 1) << ";\n";
      }
    }
    for (int e : ph.slot_loads) {
      if (!in_stage(e)) continue;
      o_ << ind << "const VF " << cv(e) << " = hn::LoadU(d, " << pfx_ << "s" << s_->slot[size_t(e)]
         << " + i);\n";
    }
    for (int e : ph.compute) {
      if (!in_stage(e)) continue;
      const Expr& x = p_.exprs[size_t(e)];
      o_ << ind << "const VF " << cv(e) << " = ";
      if (x.op == Op::Load && even_odd_ && pair != 0) {
        o_ << cv(e) << (pair == 1 ? "e" : "o");  // loaded for the pair of steps (steps())
      } else if (x.op == Op::Load) {
        o_ << load_expr(x, pfx_ + "p" + std::to_string(x.arg), tail);
      } else if (x.op == Op::ExpInRangeIf && p_.exprs[size_t(x.b)].row) {
        // The row's scalar flag, not its splatted vector: a branch, no vector test.
        o_ << "ExpInRangeIfF(d, " << operand(x.a) << ", " << rv(x.b) << ")";
      } else {
        o_ << vop(x, operand(x.a), operand(x.b), operand(x.c));
      }
      o_ << ";\n";
    }
    for (int e : ph.slot_stores) {
      if (!in_stage(e)) continue;
      o_ << ind << "hn::StoreU(" << cv(e) << ", d, " << pfx_ << "s" << s_->slot[size_t(e)]
         << " + i);\n";
    }
    for (int e : ph.reductions) {
      if (!in_stage(p_.exprs[size_t(e)].a)) continue;
      const std::string a = acc(e) + accb, v = cv(p_.exprs[size_t(e)].a);
      o_ << ind << a << " = " << row_acc(e)
         << (tail ? "::StepTail(d, " + a + ", " + v + ", tail)" : "::Step(d, " + a + ", " + v + ")")
         << ";\n";
    }
    for (int o : ph.out_stores) {
      if (!in_stage(p_.outputs[size_t(o)].expr)) continue;
      std::string v = cv(p_.outputs[size_t(o)].expr);
      std::string dst = pfx_ + "o" + std::to_string(o) + " + i";
      if (tail) {
        o_ << ind << "StoreNF32(" << v << ", d, " << dst << ", tail);\n";
      } else if (pair == 1 && paired(o)) {
        o_ << ind << pair_var(o) << " = " << v << ";\n";
      } else if (pair == 2 && paired(o)) {
        o_ << ind << (even_odd_ ? "StoreEvenOddBf16(" : "StorePairF32(") << pair_var(o) << ", " << v
           << ", d, " << pfx_ << "o" << o << " + (i - L), " << pfx_ << "nt" << o << ");\n";
      } else {
        o_ << ind << "if (" << pfx_ << "nt" << o << ") StreamF32(" << v << ", d, " << dst
           << "); else StoreF32(" << v << ", d, " << dst << ");\n";
      }
    }
    if (stages_ && !late_) {  // for the late stage a pair of steps later
      for (int e : stages_->carried)
        o_ << ind << carry(e, "k", pair - 1) << " = " << cv(e) << ";\n";
    }
  }

  const kir::Program& p_;
  std::ostringstream& o_;
  const bool even_odd_;  // bf16 in even/odd lanes in the unrolled steps (bf16_even_odd_lanes)
  const bool skew_;      // loops may be skewed (skew_loops)
  const kir::Schedule* s_ = nullptr;
  std::string pfx_;                     // "" for row r, "n" for row r + 1 (pipelined variant)
  bool assign_ = false;                 // row scalars are pre-declared (pipelined variant)
  const StepStages* stages_ = nullptr;  // a skewed loop's stages while one stage is rendered
  bool late_ = false;                   // the late stage (else the early one)
};

constexpr const char* kName = "@UBK@";

}  // namespace

bool has_pipelined_variant(const kir::Schedule& ub) {
  const char* e = std::getenv("UBFUSE_CODEGEN_PIPELINE");  // "0": off (tuning)
  if (e && std::string(e) == "0") return false;
  return ub.ub && ub.phases.size() >= 2 && ub.num_slots > 0;
}

RenderedKernel render_kernel(const kir::Program& p, const kir::Schedule& ub,
                             const kir::Schedule& reread) {
  // No node or value names and no shapes anywhere in the text: the text (and so the symbol and
  // the cache key) is the same for the same group in every layer, graph and static size, which
  // then share one compiled kernel. UBFUSE_DUMP_KERNELS prints the names beside it (kir listing).
  std::ostringstream o;
  o << "// " << p.name << ":";
  for (size_t i = 0; i < p.node_ops.size(); i++) o << (i ? ", " : " ") << p.node_ops[i];
  o << "\n";
  for (size_t i = 0; i < p.inputs.size(); i++) {
    o << "//   in" << i << ": " << dtype_name(p.inputs[i].dtype)
      << (p.inputs[i].matmul ? " (MatMul block)" : "") << "\n";
  }
  for (size_t i = 0; i < p.outputs.size(); i++)
    o << "//   out" << i << ": " << dtype_name(p.outputs[i].dtype) << "\n";
  Renderer r(p, o);
  if (r.even_odd()) o << "// bf16 columns in even/odd lanes in the unrolled steps\n";
  // Variants: _ub (one row at a time), _pl (pipelined, use_ub == 2) when there are 2+ passes
  // and slots, _rr (re-read, use_ub == 0) when the UB variant keeps anything.
  r.variant(ub, std::string(kName) + "_ub");
  const bool same = ub.num_slots == 0;
  const bool pipe = has_pipelined_variant(ub);
  // A kernel in even/odd bf16 lanes is compute-bound (half the bytes, the same math), and with
  // 16 vector registers (AVX2, SSE) the pipelined loop's two rows spill: the bf16 seed block at
  // [8,2048,4096] on Zen 3 ran 13% slower pipelined than one row at a time (f32 ran 14% faster
  // pipelined). There use_ub == 2 runs the one-row variant.
  const char* pipe_guard = r.even_odd() ? "#if !HWY_ARCH_X86 || HWY_TARGET <= HWY_AVX3\n" : "";
  if (pipe) {
    o << pipe_guard;
    r.pipelined(ub, std::string(kName) + "_pl");
    if (*pipe_guard) o << "#endif\n";
  }
  if (!same) r.variant(reread, std::string(kName) + "_rr");
  o << "}  // namespace\n}  // namespace HWY_NAMESPACE\n}  // namespace ubfuse\n";
  o << "extern \"C\" void " << kName
    << "(const UbfKernelArgs* a, int64_t r0, int64_t r1, float* ub, int64_t ub_floats) {\n"
    << "  (void)ub_floats;\n";
  const std::string ns = "  ubfuse::HWY_NAMESPACE::";
  if (pipe) {
    o << pipe_guard << "  if (a->use_ub == 2) return" << ns.substr(1) << kName
      << "_pl(a, r0, r1, ub);\n";
    if (*pipe_guard) o << "#endif\n";
  }
  if (!same)
    o << "  if (a->use_ub == 0) return" << ns.substr(1) << kName << "_rr(a, r0, r1, ub);\n";
  o << ns << kName << "_ub(a, r0, r1, ub);\n";
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

}  // namespace ubfuse::cpp
