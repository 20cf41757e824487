#include "codegen/cpp_prefetch.h"

#include <cstdlib>

#include "kernels/cpu/store_policy.h"

namespace ubfuse::cpp {

namespace {
constexpr int kPrefetchAheadBytes = 4096;
// Rows ahead for transposed inputs: a row of the RoPE block (128 f32) takes about a DRAM
// latency per thread, so a few rows cover it.
constexpr int kRowsAhead = 4;

bool contiguous_rows(const kir::Input& in) { return in.row_perm.empty(); }
}  // namespace

bool prefetch_on() {
  const char* e = std::getenv("UBFUSE_CODEGEN_PREFETCH");
  return !(e && std::string(e) == "none");
}

bool streams(const kir::Program& p, const kir::Schedule& s, int q, int i) {
  const kir::Input& in = p.inputs[size_t(i)];
  if (in.vector || in.matmul) return false;
  for (int k = 0; k <= q; k++) {
    for (int e : s.phases[size_t(k)].compute) {
      const kir::Expr& x = p.exprs[size_t(e)];
      if (x.op == kir::Op::Load && x.arg == i && !x.row) return k == q;
    }
  }
  return false;
}

std::string step_prefetches(const kir::Program& p, const kir::Schedule& s, int q,
                            const std::string& pfx, const std::string& ind) {
  if (!prefetch_on()) return "";
  const std::string hint = std::to_string(cpu::prefetch_locality());
  std::string o;
  for (size_t i = 0; i < p.inputs.size(); i++) {
    if (!streams(p, s, q, int(i)) || !contiguous_rows(p.inputs[i])) continue;
    const size_t es = dtype_size(p.inputs[i].dtype);
    const std::string at =
        pfx + "p" + std::to_string(i) + " + i0 + " + std::to_string(kPrefetchAheadBytes / int(es));
    o += ind + "__builtin_prefetch(" + at + ", 0, " + hint + ");\n";
    if (es == 4) o += ind + "__builtin_prefetch(" + at + " + L, 0, " + hint + ");\n";
  }
  return o;
}

namespace {
// The inputs whose rows are prefetched ahead: read through a transposed row map.
bool ahead(const kir::Input& in) { return !contiguous_rows(in) && !in.vector && !in.matmul; }
}  // namespace

std::string row_ahead_cursors(const kir::Program& p, const std::string& ind) {
  if (!prefetch_on()) return "";
  std::string o;
  for (size_t i = 0; i < p.inputs.size(); i++) {
    if (!ahead(p.inputs[i])) continue;
    const std::string n = std::to_string(i);
    o += ind + "UbfRowCursor cf" + n + " = ubf_cursor_at(&a->in[" + n + "], r0 + " +
         std::to_string(kRowsAhead) + ");\n";
  }
  return o;
}

std::string row_ahead_prefetches(const kir::Program& p, const std::string& row,
                                 const std::string& ind) {
  if (!prefetch_on()) return "";
  std::string o;
  for (size_t i = 0; i < p.inputs.size(); i++) {
    const kir::Input& in = p.inputs[i];
    if (!ahead(in)) continue;
    const std::string n = std::to_string(i);
    o += ind + "if (" + row + " + " + std::to_string(kRowsAhead) +
         " < r1) {  // a transposed input's rows are not contiguous\n";
    o += ind + "  const char* const f = (const char*)(in" + n + " + cf" + n + ".off);\n";
    o += ind + "  for (int64_t b = 0; b < cols * " + std::to_string(dtype_size(in.dtype)) +
         "; b += 64) __builtin_prefetch(f + b, 0, " + std::to_string(cpu::prefetch_locality()) +
         ");\n";
    o += ind + "}\n";
    o += ind + "ubf_cursor_next(&a->in[" + n + "], &cf" + n + ");\n";
  }
  return o;
}

}  // namespace ubfuse::cpp
