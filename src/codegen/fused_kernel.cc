#include "codegen/fused_kernel.h"

#include <algorithm>

#include "kernels/cpu/store_policy.h"
#include "ubfuse/error.h"

namespace ubfuse {

void choose_variant(const LoweredGroup& lg, RowArgs& ra, const std::vector<Tensor>& in,
                    int64_t out_bytes, ExecContext& ctx) {
  UbfKernelArgs& a = ra.args;
  const kir::Program& p = *lg.prog;
  // The variant follows this call's row length: keep the row in the UB when its slots fit.
  const int64_t need = int64_t(lg.ub.num_slots) * a.slot_floats * int64_t(sizeof(float));
  const bool use_ub =
      !lg.force_reread && (lg.ub.num_slots == 0 || (!ctx.ub.empty() && need <= ctx.ub_bytes));
  // The pipelined variant (generated code) keeps two rows' slots.
  a.use_ub = !use_ub ? 0 : lg.pipelined && 2 * need <= ctx.ub_bytes ? 2 : 1;
  const kir::Schedule& s = use_ub ? lg.ub : lg.reread;
  if (!use_ub && s.rereads()) {
    for (size_t i = 0; i < p.inputs.size(); i++) {
      if (s.input_passes[i] > 1)
        ctx.extra_bytes_read += (s.input_passes[i] - 1) * int64_t(in[i].nbytes());
    }
    ctx.variant_used = "two-pass";
  }
  // Outputs of cpu::stream_min_bytes() (32 MiB) and more are written with non-temporal stores,
  // as in the eager kernels. A group that computes a transcendental or a divide is compute-bound,
  // and whether streaming pays off there depends on the core and on the narrowest output dtype
  // (store_policy.h; the seed block at [8,2048,4096]: f32 1.17-1.31x faster streamed on a Zen 4,
  // 1.15-1.29x on a Zen 5, slower on a Zen 3).
  DType narrowest = DType::f32;
  for (const kir::Output& o : p.outputs) {
    if (dtype_size(o.dtype) < dtype_size(narrowest)) narrowest = o.dtype;
  }
  a.nt_stores =
      cpu::stream_output(size_t(out_bytes), cpu::ComputeLoop::kFused, lg.compute_bound, narrowest)
          ? 1
          : 0;
}

void run_rows_on(const Engine& eng, const RowArgs& ra, int64_t r0, int64_t r1, int worker,
                 const ExecContext& ctx) {
  if (r1 <= r0) return;
  float* ub = nullptr;
  if (!ctx.ub.empty()) {
    UBF_CHECK(worker >= 0 && size_t(worker) < ctx.ub.size(), "worker index past the UBs");
    ub = ctx.ub[size_t(worker)];
  }
  eng.run(&ra.args, r0, r1, ub, ctx.ub_bytes / int64_t(sizeof(float)));
}

void run_rows(const Engine& eng, const RowArgs& ra, int64_t r0, int64_t r1, ExecContext& ctx) {
  const int64_t rows = r1 - r0;
  if (rows <= 0) return;
  // Chunks of at least ~32K elements: waking a worker costs about what that saves.
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(32) << 10) / std::max<int64_t>(ra.args.cols, 1));
  if (!ctx.pool || rows <= grain) {
    run_rows_on(eng, ra, r0, r1, 0, ctx);
    return;
  }
  ctx.pool->parallel_for(rows, grain, [&](int64_t b, int64_t e, int w) {
    run_rows_on(eng, ra, r0 + b, r0 + e, w, ctx);
  });
}

void FusedKernel::run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
                      ExecContext& ctx) const {
  if (out.empty()) return;  // a group of dead nodes (no DCE ran): nothing to compute
  RowArgs ra;
  make_row_args(*lg_.prog, lg_.reads, in, out, ra);
  int64_t out_bytes = 0;
  for (auto& t : out) out_bytes += int64_t(t.nbytes());
  choose_variant(lg_, ra, in, out_bytes, ctx);
  run_rows(eng_, ra, 0, ra.args.rows, ctx);
}

}  // namespace ubfuse
