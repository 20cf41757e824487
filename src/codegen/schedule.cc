// Phases and the unified buffer.
//
// A column value is computed in the first pass where all its operands exist: pass 0 for values
// of the inputs, and one pass after each reduction it depends on (a reduction's row scalar is
// known only once its pass has seen the whole row). Passes run in order over each row; the last
// one writes the final outputs. A value computed in pass p and needed again in pass q > p
// "crosses". In the UB variant a crossing value is either kept in a UB slot (written in pass p,
// read back in q) or recomputed in q from values that are kept; the rule:
//   - a non-vector input always goes into a slot (re-reading it costs main-memory traffic);
//   - a [C] weight (same row for every row) is simply reloaded;
//   - an op is recomputed when its whole cone down to kept values is cheap (no transcendental
//     or division, at most kMaxRecompute ops) and needs no new slot, else it gets a slot.
// Decisions only add slots, so deciding reaches a fixpoint. Slots are then shared by
// values whose lifetimes [def pass, last read pass] do not overlap (a value may take the slot of
// one last read in its own def pass: each column step reads slots before it writes them).
// In the re-read variant nothing is kept: every crossing value is recomputed, re-reading inputs.
// schedule() runs this in stages: keep_or_recompute (the rule above), place_row_scalars and
// place_outputs (when each row value and output is due), fill_phases (each pass's lists),
// assign_slots (the sharing).
#include <algorithm>
#include <functional>

#include "codegen/kernel_ir.h"
#include "ubfuse/error.h"

namespace ubfuse::kir {

namespace {

constexpr int kMaxRecompute = 8;

// Column operands of e.
template <typename F>
void for_col_operands(const Program& p, int e, F f) {
  const Expr& x = p.exprs[size_t(e)];
  for (int o : {x.a, x.b, x.c}) {
    if (o >= 0 && !p.exprs[size_t(o)].row) f(o);
  }
}

// An activation whose value reaches only bf16 outputs, through elementwise arithmetic (not
// comparisons, reductions or row scalars), gets its bf16-grade form: its error stays far below
// the output's rounding, and it costs about half.
void use_bf16_grade_math(Program& p) {
  const size_t n = p.exprs.size();
  std::vector<bool> ok(n, true), used(n, false);
  for (auto& o : p.outputs) {
    used[size_t(o.expr)] = true;
    if (o.dtype != DType::bf16) ok[size_t(o.expr)] = false;
  }
  for (size_t u = n; u-- > 0;) {
    if (!p.needed[u]) continue;
    const Expr& x = p.exprs[u];
    int pos = 0;
    for (int o : {x.a, x.b, x.c}) {
      if (o >= 0) {
        used[size_t(o)] = true;
        if (x.row || !ok[u] || !bf16_passes_through(x.op, pos)) ok[size_t(o)] = false;
      }
      pos++;
    }
  }
  for (size_t e = 0; e < n; e++) {
    Expr& x = p.exprs[e];
    if (!used[e] || !ok[e] || x.row) continue;
    if (x.op == Op::ExpInRangeIf) x.b = -1;  // ExpLowp needs no range flag
    if (x.op == Op::Exp || x.op == Op::ExpNonPositive || x.op == Op::ExpInRangeIf) {
      x.op = Op::ExpLowp;
    }
    if (x.op == Op::Sigmoid) x.op = Op::SigmoidLowp;
    if (x.op == Op::Silu) x.op = Op::SiluLowp;
    if (x.op == Op::GeluTanh) x.op = Op::GeluTanhLowp;
  }
}

// Guarded reduction e of pass q joins the rescue loop of its guard, which recomputes the column
// values of its operand's cone from the inputs (the rare row pays a re-read, no slot is taken).
void add_to_rescue(const Program& p, int q, int e, Phase& ph) {
  const int guard = p.exprs[size_t(e)].guard;
  UBF_CHECK(p.exprs[size_t(guard)].row && p.phase[size_t(guard)] <= q + 1,
            "the guard %" + std::to_string(guard) + " of reduction %" + std::to_string(e) +
                " is not a row value known after pass " + std::to_string(q));
  auto it = std::find_if(ph.rescues.begin(), ph.rescues.end(),
                         [&](const Phase::Rescue& r) { return r.guard == guard; });
  if (it == ph.rescues.end()) {
    ph.rescues.push_back({guard, {}, {}});
    it = ph.rescues.end() - 1;
  }
  it->reductions.push_back(e);
  std::vector<bool> in_cone(p.exprs.size(), false);
  for (int c : it->compute) in_cone[size_t(c)] = true;
  std::function<void(int)> mark = [&](int c) {
    if (in_cone[size_t(c)]) return;
    in_cone[size_t(c)] = true;
    for_col_operands(p, c, mark);
  };
  mark(p.exprs[size_t(e)].a);
  it->compute.clear();
  for (size_t c = 0; c < in_cone.size(); c++) {
    if (in_cone[c]) it->compute.push_back(int(c));
  }
}

// Moves the row scalars of ph.after that use a guarded reduction to ph.after_rescue (they run
// once the rescue loops have).
void split_after_rescue(const Program& p, Phase& ph) {
  if (ph.rescues.empty()) return;
  std::vector<bool> late(p.exprs.size(), false);
  for (auto& r : ph.rescues) {
    for (int e : r.reductions) late[size_t(e)] = true;
  }
  std::vector<int> early;
  for (int e : ph.after) {
    const Expr& x = p.exprs[size_t(e)];
    for (int o : {x.a, x.b, x.c}) late[size_t(e)] = late[size_t(e)] || (o >= 0 && late[size_t(o)]);
    (late[size_t(e)] ? ph.after_rescue : early).push_back(e);
  }
  ph.after = std::move(early);
  for (auto& r : ph.rescues) {
    UBF_CHECK(!late[size_t(r.guard)],
              "the guard %" + std::to_string(r.guard) + " depends on the reductions it guards");
  }
}

}  // namespace

void analyze(Program& p) {
  size_t n = p.exprs.size();
  p.phase.assign(n, 0);
  for (size_t i = 0; i < n; i++) {
    const Expr& e = p.exprs[i];
    int ph = 0;
    for (int o : {e.a, e.b, e.c}) {
      if (o >= 0) ph = std::max(ph, p.phase[size_t(o)]);
    }
    if (is_reduction(e.op)) ph = p.phase[size_t(e.a)] + 1;
    p.phase[i] = ph;
  }
  auto mark_needed = [&] {
    p.needed.assign(n, false);
    for (auto& o : p.outputs) p.needed[size_t(o.expr)] = true;
    for (size_t i = n; i-- > 0;) {
      if (!p.needed[i]) continue;
      const Expr& e = p.exprs[i];
      for (int o : {e.a, e.b, e.c, e.guard}) {
        if (o >= 0) p.needed[size_t(o)] = true;
      }
    }
  };
  mark_needed();
  use_bf16_grade_math(p);
  mark_needed();  // a bf16-grade exp drops softmax's range flag and the row min under it
  p.num_phases = 0;
  for (size_t i = 0; i < n; i++) {
    if (p.needed[i] && !p.exprs[i].row) p.num_phases = std::max(p.num_phases, p.phase[i] + 1);
  }
}

bool Schedule::rereads() const {
  return std::any_of(input_passes.begin(), input_passes.end(), [](int n) { return n > 1; });
}

namespace {

bool col_load(const Program& p, int e) {
  const Expr& x = p.exprs[size_t(e)];
  return x.op == Op::Load && !x.row;
}
// A [C] weight: the same row for every row, so reloading it costs no main-memory traffic.
bool vector_load(const Program& p, int e) {
  return col_load(p, e) && p.inputs[size_t(p.exprs[size_t(e)].arg)].vector;
}

// Where each column value lives across the passes.
struct Placement {
  std::vector<bool> kept;                // per expr: stored in a UB slot in its own pass
  std::vector<std::vector<bool>> comp;   // [pass][expr]: computed in that pass
  std::vector<std::vector<bool>> sload;  // [pass][expr]: read back from its slot in that pass
};

// What to keep in a UB slot and what to recompute (the rule above). Each pass is walked back from
// what it must produce: its column outputs, its reductions' operands, the values it stores. A
// decision to keep restarts the walk, since it can make other values cheap to recompute.
Placement keep_or_recompute(const Program& p, bool ub) {
  const int n = int(p.exprs.size());
  const int P = p.num_phases;
  Placement pl;
  std::vector<bool>& kept = pl.kept;
  kept.assign(size_t(n), false);
  std::vector<std::vector<bool>>& comp = pl.comp;
  std::vector<std::vector<bool>>& sload = pl.sload;

  // Can e be recomputed in a later pass without new slots? Walks its cone down to kept values.
  std::function<bool(int, int&)> cheap = [&](int e, int& budget) {
    if (kept[size_t(e)] || vector_load(p, e)) return true;
    if (col_load(p, e) || is_expensive(p.exprs[size_t(e)].op) || --budget < 0) return false;
    bool ok = true;
    for_col_operands(p, e, [&](int o) { ok = ok && cheap(o, budget); });
    return ok;
  };

  for (bool changed = true; changed;) {
    changed = false;
    comp.assign(size_t(P), std::vector<bool>(size_t(n), false));
    sload = comp;
    for (int q = 0; q < P && !changed; q++) {
      std::vector<bool> need(size_t(n), false);
      for (auto& o : p.outputs) {
        if (!p.exprs[size_t(o.expr)].row && p.phase[size_t(o.expr)] == q)
          need[size_t(o.expr)] = true;
      }
      for (int e = 0; e < n; e++) {
        const Expr& x = p.exprs[size_t(e)];
        if (p.needed[size_t(e)] && is_reduction(x.op) && x.guard < 0 && p.phase[size_t(x.a)] == q) {
          need[size_t(x.a)] = true;
        }
        if (kept[size_t(e)] && p.phase[size_t(e)] == q) need[size_t(e)] = true;
      }
      auto mark_operands = [&](int e) {
        for_col_operands(p, e, [&](int o) { need[size_t(o)] = true; });
      };
      for (int e = n - 1; e >= 0 && !changed; e--) {
        if (!need[size_t(e)] || p.exprs[size_t(e)].row) continue;
        if (p.phase[size_t(e)] == q || vector_load(p, e)) {
          comp[size_t(q)][size_t(e)] = true;
          mark_operands(e);
        } else if (kept[size_t(e)]) {
          sload[size_t(q)][size_t(e)] = true;
        } else if (!ub) {
          comp[size_t(q)][size_t(e)] = true;
          mark_operands(e);
        } else {
          int budget = kMaxRecompute;
          bool recompute = !col_load(p, e) && !is_expensive(p.exprs[size_t(e)].op);
          if (recompute) {
            for_col_operands(p, e, [&](int o) { recompute = recompute && cheap(o, budget); });
          }
          if (recompute) {
            comp[size_t(q)][size_t(e)] = true;
            mark_operands(e);
          } else {
            kept[size_t(e)] = true;
            changed = true;
          }
        }
      }
    }
  }
  return pl;
}

// Row scalars (reductions aside, which belong to their pass): once per call when they depend on
// constants and cols only, per row before the first pass when they need no reduction, else
// after the pass whose reduction they wait for.
void place_row_scalars(const Program& p, Schedule& s) {
  const int n = int(p.exprs.size());
  const int P = p.num_phases;
  std::vector<bool> call_const(size_t(n), false);
  for (int e = 0; e < n; e++) {
    const Expr& x = p.exprs[size_t(e)];
    if (!x.row || x.op == Op::Load || is_reduction(x.op)) continue;
    bool all = true;
    for (int o : {x.a, x.b, x.c}) all = all && (o < 0 || call_const[size_t(o)]);
    call_const[size_t(e)] = all;
  }
  for (int e = 0; e < n; e++) {
    const Expr& x = p.exprs[size_t(e)];
    if (!p.needed[size_t(e)] || !x.row || is_reduction(x.op)) continue;  // reductions: per pass
    int ph = p.phase[size_t(e)];
    UBF_CHECK(ph <= P, "row value " + std::to_string(e) + " is due after pass " +
                           std::to_string(ph) + " of a " + std::to_string(P) + "-pass kernel");
    if (call_const[size_t(e)]) {
      s.per_call.push_back(e);
    } else if (ph == 0) {
      s.before.push_back(e);
    } else {
      s.phases[size_t(ph - 1)].after.push_back(e);
    }
  }
}

// Outputs go where their value is known: a column output in its pass, a row output before the
// first pass or after the pass it waits for.
void place_outputs(const Program& p, Schedule& s) {
  const int P = p.num_phases;
  for (int o = 0; o < int(p.outputs.size()); o++) {
    int e = p.outputs[size_t(o)].expr;
    int ph = p.phase[size_t(e)];
    UBF_CHECK(p.exprs[size_t(e)].row ? ph <= P : ph < P,
              "output " + std::to_string(o) + " is due in pass " + std::to_string(ph) + " of a " +
                  std::to_string(P) + "-pass kernel");
    if (p.exprs[size_t(e)].row) {
      (ph == 0 ? s.row_outs_before : s.phases[size_t(ph - 1)].row_outs_after).push_back(o);
    } else {
      s.phases[size_t(ph)].out_stores.push_back(o);
    }
  }
}

// The passes: per pass its slot loads, computed values, slot stores and reductions (a guarded
// one joins its guard's rescue loop), and how many passes load each input. Returns, per kept
// value, the last pass that reads it back.
std::vector<int> fill_phases(const Program& p, const Placement& pl, Schedule& s) {
  const int n = int(p.exprs.size());
  const int P = p.num_phases;
  std::vector<int> last_read(size_t(n), -1);
  for (int q = 0; q < P; q++) {
    Phase& ph = s.phases[size_t(q)];
    std::vector<bool> loads_input(p.inputs.size(), false);
    for (int e = 0; e < n; e++) {
      if (pl.sload[size_t(q)][size_t(e)]) {
        ph.slot_loads.push_back(e);
        last_read[size_t(e)] = q;
      }
      if (pl.comp[size_t(q)][size_t(e)]) {
        ph.compute.push_back(e);
        if (col_load(p, e)) loads_input[size_t(p.exprs[size_t(e)].arg)] = true;
      }
      if (pl.kept[size_t(e)] && p.phase[size_t(e)] == q) ph.slot_stores.push_back(e);
      const Expr& x = p.exprs[size_t(e)];
      if (p.needed[size_t(e)] && is_reduction(x.op) && p.phase[size_t(x.a)] == q) {
        if (x.guard < 0) {
          ph.reductions.push_back(e);
        } else {
          add_to_rescue(p, q, e, ph);
        }
      }
    }
    split_after_rescue(p, ph);
    for (size_t i = 0; i < p.inputs.size(); i++) s.input_passes[i] += loads_input[i] ? 1 : 0;
  }
  // A vector or the MatMul's output is read once, whatever the passes reload from cache.
  for (size_t i = 0; i < p.inputs.size(); i++) {
    if (p.inputs[i].vector || p.inputs[i].matmul)
      s.input_passes[i] = std::min(s.input_passes[i], 1);
  }
  return last_read;
}

// UB slots: greedy interval sharing in def order. A value may take the slot of one last read in
// its own def pass, since each column step reads slots before it writes them.
void assign_slots(const Program& p, const std::vector<bool>& kept,
                  const std::vector<int>& last_read, Schedule& s) {
  const int n = int(p.exprs.size());
  std::vector<int> order;
  for (int e = 0; e < n; e++) {
    if (kept[size_t(e)]) order.push_back(e);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return p.phase[size_t(a)] < p.phase[size_t(b)]; });
  std::vector<int> slot_free_after;  // per slot: the last pass that reads its current value
  for (int e : order) {
    UBF_CHECK(last_read[size_t(e)] > p.phase[size_t(e)], "kept value never read back");
    int def = p.phase[size_t(e)];
    int chosen = -1;
    for (size_t k = 0; k < slot_free_after.size() && chosen < 0; k++) {
      if (slot_free_after[k] <= def) chosen = int(k);
    }
    if (chosen < 0) {
      chosen = int(slot_free_after.size());
      slot_free_after.push_back(0);
    }
    slot_free_after[size_t(chosen)] = last_read[size_t(e)];
    s.slot[size_t(e)] = chosen;
  }
  s.num_slots = int(slot_free_after.size());
}

}  // namespace

Schedule schedule(const Program& p, bool ub) {
  const Placement pl = keep_or_recompute(p, ub);
  Schedule s;
  s.ub = ub;
  s.phases.resize(size_t(p.num_phases));
  s.slot.assign(p.exprs.size(), -1);
  s.input_passes.assign(p.inputs.size(), 0);
  place_row_scalars(p, s);
  place_outputs(p, s);
  const std::vector<int> last_read = fill_phases(p, pl, s);
  assign_slots(p, pl.kept, last_read, s);
  return s;
}

}  // namespace ubfuse::kir
