// Numpy broadcasting as "runs": the output is walked as rows x inner, where inside a run each
// operand is either contiguous (advances with the output) or constant (a broadcast scalar). Dims
// where every operand behaves alike are merged, so the common transformer cases become one loop:
//   same shape            -> 1 run of numel, all contiguous
//   [R, C] + [C] (bias)   -> R runs of C, the bias run restarts each row
//   [R, C] * [R, 1]       -> R runs of C, the second operand constant per run
//   [R, C] + [1] (scalar) -> 1 run of R*C, the scalar constant
// and any other broadcast falls back to more, shorter runs with per-row strides (always correct).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ubfuse/shape.h"

namespace ubfuse::cpu {

inline constexpr int kMaxOperands = 3;
inline constexpr int kMaxOuterDims = 16;

struct BroadcastPlan {
  int num_operands = 0;
  int64_t inner = 1;                                 // elements per run
  int64_t rows = 1;                                  // number of runs
  std::vector<int64_t> outer_sizes;                  // merged outer dims, outermost first
  std::vector<int64_t> outer_strides[kMaxOperands];  // element strides per outer dim (0: bcast)
  bool inner_scalar[kMaxOperands] = {false, false, false};  // constant within a run
};

// Plans broadcasting `ins` (each right-aligned) to `out`. Throws ubfuse::Error prefixed with
// `who` when an input does not broadcast to out.
BroadcastPlan plan_broadcast(const std::vector<Sizes>& ins, const Sizes& out,
                             const std::string& who);

// Calls f(out_offset, offsets, len) for each run piece within flat output elements
// [begin, end): offsets[k] is operand k's element offset for the piece (for a constant operand,
// the offset of its one value).
template <class F>
void for_each_run(const BroadcastPlan& p, int64_t begin, int64_t end, F&& f) {
  if (begin >= end) return;
  const int nd = int(p.outer_sizes.size());
  const int no = p.num_operands;
  int64_t row = begin / p.inner, col = begin % p.inner;
  int64_t idx[kMaxOuterDims] = {0};
  int64_t base[kMaxOperands] = {0, 0, 0};
  {
    int64_t r = row;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = r % p.outer_sizes[size_t(d)];
      r /= p.outer_sizes[size_t(d)];
      for (int k = 0; k < no; ++k) base[k] += idx[d] * p.outer_strides[k][size_t(d)];
    }
  }
  int64_t pos = begin;
  int64_t offs[kMaxOperands];
  while (pos < end) {
    const int64_t len = std::min(p.inner - col, end - pos);
    for (int k = 0; k < no; ++k) offs[k] = base[k] + (p.inner_scalar[k] ? 0 : col);
    f(pos, static_cast<const int64_t*>(offs), len);
    pos += len;
    col = 0;
    // Next row: increment the mixed-radix index, updating the operand bases.
    for (int d = nd - 1; d >= 0; --d) {
      const size_t ud = size_t(d);
      if (++idx[d] < p.outer_sizes[ud]) {
        for (int k = 0; k < no; ++k) base[k] += p.outer_strides[k][ud];
        break;
      }
      for (int k = 0; k < no; ++k) base[k] -= (p.outer_sizes[ud] - 1) * p.outer_strides[k][ud];
      idx[d] = 0;
    }
  }
}

}  // namespace ubfuse::cpu
