// The Kernel of an Elementwise / RowReduction group: binds this call's tensors to the domain
// (row_args.h), picks the UB or re-read variant from the actual row length, and splits the rows
// over the thread pool; each worker runs its rows with its own UB through the engine (a
// generated function or the tile interpreter).
#pragma once

#include <memory>
#include <string>

#include "codegen/interpreter.h"
#include "codegen/kernel_ir.h"
#include "codegen/row_args.h"
#include "fusion/group.h"
#include "runtime/kernel.h"

namespace ubfuse {

// How rows get computed: a generated function (kept alive by `library`) or the interpreter.
struct Engine {
  UbfKernelFn fn = nullptr;
  std::shared_ptr<void> library;
  std::shared_ptr<const interp::TileProgram> tiles;
  void run(const UbfKernelArgs* a, int64_t r0, int64_t r1, float* ub, int64_t ub_floats) const {
    if (fn) {
      fn(a, r0, r1, ub, ub_floats);
    } else {
      interp::run_rows(*tiles, a, r0, r1, ub, ub_floats);
    }
  }
};

// A lowered group with both schedules.
struct LoweredGroup {
  std::shared_ptr<const kir::Program> prog;
  kir::Schedule ub, reread;
  bool force_reread = false;   // FusedGroup::reread
  bool pipelined = false;      // the engine has the pipelined UB variant (generated code)
  bool compute_bound = false;  // a transcendental or a divide per element (store_policy.h)
  RowReads reads;              // row_reads(*prog)
};

// Picks the variant of a bound call from its row length and ctx's UB (recording a re-read in
// ctx: variant_used and the bytes read again from `in`) and whether stores may stream.
void choose_variant(const LoweredGroup& lg, RowArgs& ra, const std::vector<Tensor>& in,
                    int64_t out_bytes, ExecContext& ctx);
// Runs rows [r0, r1) of a bound call, split over ctx.pool; each worker uses its own UB.
void run_rows(const Engine& eng, const RowArgs& ra, int64_t r0, int64_t r1, ExecContext& ctx);
// Runs rows [r0, r1) on the calling thread, which is the pool's worker `worker`, with its UB.
void run_rows_on(const Engine& eng, const RowArgs& ra, int64_t r0, int64_t r1, int worker,
                 const ExecContext& ctx);

class FusedKernel : public Kernel {
 public:
  FusedKernel(LoweredGroup lg, Engine eng) : lg_(std::move(lg)), eng_(std::move(eng)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ExecContext& ctx) const override;
  const LoweredGroup& lowered() const { return lg_; }
  const Engine& engine() const { return eng_; }

 private:
  LoweredGroup lg_;
  Engine eng_;
};

}  // namespace ubfuse
