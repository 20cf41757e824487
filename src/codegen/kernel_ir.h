// Kernel IR: a fused group lowered to a loop-nest program over its iteration domain rows x cols
// (rows = product of all dims but the last, cols = the last dim; both run-time values, so one
// kernel serves every batch and sequence length).
//
// A Program is an expression DAG in topological order. Each expression is a *column value* (one
// f32 per element of the row) or a *row scalar* (one f32 per row: reduction results, per-row
// broadcast inputs, constants). Row ops are decomposed into primitives (LayerNorm = mean of the
// row sum, centered values, variance, rsqrt, scale/shift). A Schedule (schedule.cc) orders the
// Program into phases: one pass over the row per reduction level, then the final pass; column
// values needed in a later phase are kept in unified-buffer (UB) slots or recomputed from the
// inputs (the two-pass / re-read variant). Both the C++ renderer and the tile interpreter run a
// (Program, Schedule) pair, so they agree on what is computed where.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse {
struct FusedGroup;
}

namespace ubfuse::kir {

// One per row of kir_ops.def: the leaves, the graph's elementwise math (ubfuse/ops.def's UBF_MATH
// rows, same names) and the forms only the IR has.
enum class Op : uint8_t {
#define UBF_KIR(name, ...) name,
#include "codegen/kir_ops.def"
};

// What an op computes (kir_ops.def's Form column).
enum class Form : uint8_t {
  Leaf,    // no math: Load, Const, Cols
  Vec,     // fn(d, operands...): vecmath.h, ubk_vec-inl.h
  Hwy,     // hn::fn(operands...): a Highway op
  VecImm,  // fn(d, operand, imm)
  Row,     // a reduction over the row, accumulated by RowAcc<fn>
};
enum class Cost : uint8_t { Cheap, Divide, Poly };
// Which operands a bf16-grade error may pass through to a bf16 output (use_bf16_grade_math).
enum class Bf16 : uint8_t { Stop, Pass, PassValues, PassFirst };

struct OpSpec {
  int arity;
  const char* str;  // listing name
  const char* fn;   // the vector function (Vec, Hwy, VecImm) or accumulator kind (Row)
  Form form;
  Cost cost;
  Bf16 bf16;
};
const OpSpec& spec(Op op);

inline int arity(Op op) { return spec(op).arity; }
inline const char* op_str(Op op) { return spec(op).str; }
// Ops worth keeping in the UB rather than recomputing in a later phase.
inline bool is_expensive(Op op) { return spec(op).cost != Cost::Cheap; }
inline bool is_reduction(Op op) { return spec(op).form == Form::Row; }
// Whether a bf16-grade error in operand `pos` of op may reach its (bf16) result.
bool bf16_passes_through(Op op, int pos);

// How a Load maps (row, col) of the domain to an element of the input.
enum class Align : uint8_t {
  Col,      // the input's last dim is the row: element (base(row) + col)
  RowKeep,  // the input's last dim is 1 (or absent), broadcast along the row: element base(row)
  RowDrop,  // the input is a per-row value in the domain's leading dims ([..., rows] form)
  Sample,   // a row scalar: a Col input's element at column floor(imm * (cols - 1)) (0 when
            // rows are empty)
  // RotateHalf's views of the row's first r = imm columns (0 from r on; r even, <= cols):
  RotHalf,   // halves swapped, the first negated: column col < r/2 reads -(base + col + r/2),
             // r/2 <= col < r reads base + col - r/2
  RotPairs,  // adjacent pairs swapped, the first negated (interleaved): column 2k reads
             // -(base + 2k + 1), column 2k + 1 reads base + 2k
};

inline bool is_rotation(Align a) { return a == Align::RotHalf || a == Align::RotPairs; }
// Whether a Load reads a column value from the input's own row (Col or a permutation of it).
inline bool reads_row_columns(Align a) { return a == Align::Col || is_rotation(a); }

struct Expr {
  Op op = Op::Const;
  bool row = false;  // row scalar (true) or column value (false)
  int a = -1, b = -1, c = -1;
  int arg = -1;  // Load: input index
  Align align = Align::Col;
  float imm = 0;  // Const value, Pow exponent, Sample's column fraction, a rotation's columns
  // A reduction with a guard (a row scalar of the same pass) is a rare one: it is taken only for
  // rows where the guard is nonzero, by a loop of its own that recomputes its operand from the
  // inputs, and is 0 elsewhere. Fused LayerNorm and RMSNorm take their statistics at 2^-80 so
  // only after their plain sum of squares overflowed, instead of on every row.
  int guard = -1;
  std::string note;  // source node name, for comments
};

struct Input {
  const Value* value = nullptr;
  DType dtype = DType::f32;
  bool vector = false;  // statically the same row for every row (a [C] weight): reloading is free
  bool matmul = false;  // MatMulEpilogue: the MatMul's output block, not a group input
  // Read through a Transpose that keeps the last axis (compiler/views.h): leading dim k of the
  // domain is dim row_perm[k] of the input. Empty: the input's own dims.
  std::vector<int64_t> row_perm;
};

struct Output {
  const Value* value = nullptr;
  DType dtype = DType::f32;
  int expr = -1;
};

struct Program {
  std::string name;                   // the group's name
  std::vector<std::string> node_ops;  // the nodes' ops ("Add"), for the source's comment
  std::vector<Expr> exprs;            // topological: operands before users
  std::vector<Input> inputs;          // group inputs in order, then a MatMul output if any
  std::vector<Output> outputs;        // group outputs in order
  int domain_rank = 0;
  // Analysis (filled by analyze()): for a column value the phase it is computed in, for a row
  // scalar the phase at whose start it is available; `needed` marks what reaches an output.
  std::vector<int> phase;
  std::vector<bool> needed;
  int num_phases = 0;  // column passes over each row
};

// One pass over the row's columns, then the row scalars that become available after it.
struct Phase {
  std::vector<int> slot_loads;      // column values read back from their UB slot, each column step
  std::vector<int> compute;         // column values evaluated, topological (Loads included)
  std::vector<int> slot_stores;     // column values written to their UB slot
  std::vector<int> out_stores;      // output indices (column outputs) written in this pass
  std::vector<int> reductions;      // RowSum/RowSumSq/RowMax/RowMaxAbs/RowMin exprs of this pass
  std::vector<int> after;           // row scalars computed after the pass, topological
  std::vector<int> row_outs_after;  // output indices (row outputs) written after the pass
  // Guarded reductions of this pass: after `after`, each Rescue whose guard is nonzero runs a
  // loop over the row computing `compute` (from the inputs, no slots) and its reductions; then
  // `after_rescue`, the row scalars that use them, then `row_outs_after`.
  struct Rescue {
    int guard = -1;
    std::vector<int> compute;     // column values, topological (Loads included)
    std::vector<int> reductions;  // guarded reductions, 0 when the guard is 0
  };
  std::vector<Rescue> rescues;
  std::vector<int> after_rescue;
};

// A rescue's loop as a pass of its own (compute and reductions only), for the renderers.
Phase rescue_pass(const Phase::Rescue& r);

struct Schedule {
  bool ub = true;             // keeps values in UB slots (false: re-reads the inputs)
  std::vector<int> per_call;  // row scalars depending only on constants and cols
  std::vector<int> before;    // row scalars computed per row before the first pass
  std::vector<int> row_outs_before;
  std::vector<Phase> phases;
  std::vector<int> slot;  // per expr: its UB slot, or -1
  int num_slots = 0;
  std::vector<int> input_passes;  // per input: passes over the row that load it
  // True when some non-vector input is loaded in more than one pass (the re-read variant).
  bool rereads() const;
};

// Lowers a group (kind Elementwise, RowReduction, or the epilogue of MatMulEpilogue, whose
// MatMul output becomes an extra input) to a Program; on failure returns null and says why
// (the caller then runs the group op by op).
std::unique_ptr<Program> lower_group(const FusedGroup& g, std::string* why_not);

// Renumbers p.exprs in one order that depends only on what the outputs compute: operands
// before users, depth first from the outputs in order, operands a, b, c, guard; expressions no
// output reaches are dropped. The lowerer creates expressions as nested calls evaluate, an
// order C++ leaves to the compiler, so without it a kernel's source (and its cache key) would
// depend on the compiler ubfuse was built with.
void canonicalize_order(Program& p);

// Fills Program::phase / needed / num_phases.
void analyze(Program& p);
// Whether some column value the program needs (after analyze()) is is_expensive (its loop is
// compute-bound).
bool has_expensive_column_op(const Program& p);

// Orders the program into passes: with ub=true values crossing passes live in UB slots
// (inputs and expensive or far values) or are recomputed from slots (cheap ones); with
// ub=false everything crossing is recomputed and inputs are re-read.
Schedule schedule(const Program& p, bool ub);

// Floats one UB slot takes for a row of `cols`: padded to 16 floats (64 bytes).
inline int64_t slot_floats(int64_t cols) { return (cols + 15) / 16 * 16; }

// Readable listing of a program and its schedules (tests assert on it; UBFUSE_DUMP_KERNELS).
std::string to_string(const Program& p);
std::string to_string(const Program& p, const Schedule& s);

}  // namespace ubfuse::kir
