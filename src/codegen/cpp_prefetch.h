// Software prefetches in generated kernels. A compute-heavy loop leaves the hardware prefetcher
// behind, so the pass that first reads an input from memory prefetches it ahead of the loads
// (docs/performance.md: this kept the seed block's loads and arithmetic overlapped). Rows read
// through a transposed row map (kir::Input::row_perm) are not contiguous: each row starts a new
// stream the hardware cannot guess, so their whole row is prefetched a few rows ahead instead.
#pragma once

#include <string>

#include "codegen/kernel_ir.h"

namespace ubfuse::cpp {

// False under UBFUSE_CODEGEN_PREFETCH=none (tuning).
bool prefetch_on();

// Whether pass q of schedule s is the first to read column input i from memory: not a [C] weight
// (the same row every time, it stays in cache) nor a MatMul block (computed in cache).
bool streams(const kir::Program& p, const kir::Schedule& s, int q, int i);

// The prefetches of one 2-vector column step of pass q, for row pointers p<i> with prefix pfx:
// each input the pass streams through contiguous rows, 4 KiB ahead, with the CPU's hint
// (cpu::prefetch_locality: non-temporal on AMD, where an input is read once more at most, from
// the UB; every cache level elsewhere). Past the row's end this reaches the next row's head. Each
// step covers 2 cache lines of f32, 1 of bf16 / f16.
std::string step_prefetches(const kir::Program& p, const kir::Schedule& s, int q,
                            const std::string& pfx, const std::string& ind);

// Before the row loop: the cursors cf<i> (ubk_abi.h) at row r0 + kRowsAhead of each input read
// through a transposed row map.
std::string row_ahead_cursors(const kir::Program& p, const std::string& ind);

// At the start of row `row` (chunk end r1), once per row in order: the whole row kRowsAhead rows
// on of each such input, then its cursor moves one row on.
std::string row_ahead_prefetches(const kir::Program& p, const std::string& row,
                                 const std::string& ind);

}  // namespace ubfuse::cpp
