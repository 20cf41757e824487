// The tile interpreter: runs a (Program, Schedule) pair without a compiler. Each pass over a row
// walks the row in tiles of kTile columns; every instruction processes the whole tile through
// per-thread tile registers with the same vector math (vecmath.h, Highway dynamic dispatch) the
// generated code uses. Slower than generated code (each op is a load and a store per vector),
// correct for everything codegen handles; it is the fallback where no compiler exists and the
// reference the codegen is tested against.
#pragma once

#include <memory>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/ubk_abi.h"

namespace ubfuse::interp {

inline constexpr int kTile = 512;  // columns per tile (a multiple of every vector width)

enum class Kind : uint8_t {
  LoadIn,     // col: dst <- input `arg` at the row's columns
  LoadSlot,   // col: dst <- UB slot `arg`
  Splat,      // col: dst <- row scalar `a` (done once per row and pass, before the tiles)
  Compute,    // col or row: dst <- op(a, b, c)
  StoreSlot,  // col: UB slot `arg` <- a
  StoreOut,   // col: output `arg` <- a   / row: output `arg`[row] <- a
  LoadRow,    // row: dst <- input `arg` at the row's base
};

struct Instr {
  Kind kind = Kind::Compute;
  kir::Op op = kir::Op::Const;
  int dst = -1, a = -1, b = -1, c = -1;  // col registers (col instrs) or expr ids (row instrs)
  int arg = -1;
  DType dtype = DType::f32;
  float imm = 0;
  bool sample = false;               // LoadRow of kir::Align::Sample (column fraction in imm)
  kir::Align rot = kir::Align::Col;  // LoadIn: Col, or a rotation of the row's first imm columns
};

struct Reduction {
  kir::Op op;  // RowSum / RowSumSq / RowMax / RowMaxAbs / RowMin
  int src;     // col register
  int dst;     // row scalar (expr id)
};

struct GuardedPass;

struct Pass {
  std::vector<Instr> splats;
  std::vector<Instr> col;  // slot loads first, then computes, then stores
  std::vector<Reduction> reductions;
  std::vector<Instr> after;  // row instrs
  // kir::Phase::rescues: passes run only where row scalar `guard` is nonzero (their reductions
  // are 0 elsewhere), then the row instrs that use them and the row output stores.
  std::vector<GuardedPass> rescues;
  std::vector<Instr> after_rescue;
};

struct GuardedPass {
  int guard = -1;  // row scalar (expr id)
  Pass pass;       // col instrs and reductions only
};

struct Variant {
  std::vector<Instr> before;  // row instrs, then row output stores
  std::vector<Pass> passes;
};

struct TileProgram {
  int num_col_regs = 0;
  int num_row_regs = 0;
  std::vector<Instr> per_call;  // row instrs on constants and cols
  Variant ub, reread;
  std::vector<DType> in_dtypes, out_dtypes;
};

std::shared_ptr<const TileProgram> make_tile_program(const kir::Program& p, const kir::Schedule& ub,
                                                     const kir::Schedule& reread);

// Runs rows [row_begin, row_end); args->use_ub picks the variant. Same contract as UbfKernelFn.
void run_rows(const TileProgram& tp, const UbfKernelArgs* args, int64_t row_begin, int64_t row_end,
              float* ub, int64_t ub_floats);

}  // namespace ubfuse::interp
