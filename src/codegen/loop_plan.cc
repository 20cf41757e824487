#include "codegen/loop_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ubfuse/error.h"

namespace ubfuse::cpp {

using kir::Expr;
using kir::Op;

bool column_load(const Expr& x) { return x.op == Op::Load && !x.row; }

namespace {

uint32_t bit(DType t) { return 1u << unsigned(t); }

// The dtypes of the columns the kernel reads or writes in memory, as bit(dtype)s.
uint32_t column_dtypes(const kir::Program& p) {
  uint32_t m = 0;
  for (size_t e = 0; e < p.exprs.size(); e++) {
    const Expr& x = p.exprs[e];
    if (p.needed[e] && column_load(x)) m |= bit(p.inputs[size_t(x.arg)].dtype);
  }
  for (const kir::Output& o : p.outputs) {
    if (!p.exprs[size_t(o.expr)].row) m |= bit(o.dtype);
  }
  return m;
}

}  // namespace

bool bf16_even_odd_lanes(const kir::Program& p) { return column_dtypes(p) == bit(DType::bf16); }

bool skew_loops(const kir::Program& p, bool avx512) {
  if (const char* e = std::getenv("UBFUSE_CODEGEN_SKEW"); e && *e) {
    const std::string v = e;
    if (v != "0" && v != "1") {
      throw Error("UBFUSE_CODEGEN_SKEW: '" + v +
                  "' is not 0 or 1; unset it to let the target decide");
    }
    return v == "1";
  }
  return !avx512 || (column_dtypes(p) & ~bit(DType::f32)) != 0;
}

bool native_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f") != 0;
#else
  return false;
#endif
}

StepStages step_stages(const kir::Program& p, const kir::Phase& ph, bool skew) {
  StepStages s;
  s.late.assign(p.exprs.size(), 0);
  for (int e : ph.compute) {  // topological: operands first
    const Expr& x = p.exprs[size_t(e)];
    bool late = !x.row && kir::is_expensive(x.op);
    for (int o : {x.a, x.b, x.c}) late = late || (o >= 0 && s.late[size_t(o)]);
    s.late[size_t(e)] = late;
  }
  bool arithmetic = false;
  for (int e : ph.compute) {
    if (!s.late[size_t(e)]) continue;
    const Expr& x = p.exprs[size_t(e)];
    for (int o : {x.a, x.b, x.c}) {
      if (o < 0 || s.late[size_t(o)] || p.exprs[size_t(o)].row) continue;
      if (std::find(s.carried.begin(), s.carried.end(), o) != s.carried.end()) continue;
      s.carried.push_back(o);
      const bool loaded = p.exprs[size_t(o)].op == Op::Load ||
                          std::find(ph.slot_loads.begin(), ph.slot_loads.end(), o) !=
                              ph.slot_loads.end();  // read back from a UB slot
      arithmetic = arithmetic || !loaded;
    }
  }
  if (!arithmetic || !skew) s.carried.clear();
  std::sort(s.carried.begin(), s.carried.end());
  return s;
}

}  // namespace ubfuse::cpp
