// The fusion cost model's figures for this machine (fusion/cost.h): measured once by running
// small models through the kernels they describe, and cached per machine in
//   costs.json in user_cache_dir() (util/cache_dir.h: $UBFUSE_CACHE_DIR, else
//   $XDG_CACHE_HOME/ubfuse, else ~/.cache/ubfuse)
//   {"machines": {"<cpu model> | <cpus> cpus | <mem> GiB | <threads> threads": {...}}}
// like the profiler's bandwidth (entries older than a week are measured again). What is measured:
//   bytes_per_s   an eager Add of two [2048, 4096] f32 arrays (3 x 32 MiB moved)
//   launch_s      a chain of 64 eager Add kernels on 8 floats, per kernel
//   matmul        an eager [512, 512] x [512, 512] f32 MatMul
//   attention     [1, 4, L, 64] scores -> scale -> softmax -> context at L = 128 and 1024, f32
//                 and bf16, in graph mode as the flash-style kernel and with AttentionFusion off
//                 (a MatMul with its softmax epilogue, and a MatMul)
// It takes a few seconds on 2 cores, most of it building the MatMul epilogue kernels once. The
// entry also keeps, under "attention", the timings of single chains (timed_attention), and
// "kernels": the kCostsKernelRevision it was measured with; an entry of another revision is
// measured again.
// Overrides: UBFUSE_REMEASURE_COSTS=1 measures again; the option cost_model=builtin (or
// UBFUSE_COST_MODEL=builtin, the default of that option) uses fixed figures without measuring.
// A measurement that fails (an Error) leaves the fixed figures, their source saying why; the
// measuring models report to no profiler (TraceMute).
#pragma once

#include <optional>

#include "fusion/cost.h"

namespace ubfuse {

// Raised when a kernel these figures time changes its speed (the flash attention kernel, the
// MatMul and its softmax epilogue, eager Add): cached figures of another revision are stale.
inline constexpr int kCostsKernelRevision = 2;

// Thread-safe; measures at most once per process, cache file and thread count.
const CostParams& calibrated_costs(int threads);

// Both forms of the canonical attention chain timed at a probe's sizes, cached per machine and
// threads under "attention" in the same file; nullopt when the chain is too large to time at
// compile time (over 4 GFLOP) or a measurement fails.
std::optional<AttentionTiming> timed_attention(int threads, const AttentionProbe& probe);

// Fixed figures (no measurement): what the tests use, for decisions that do not depend on the
// machine they run on but for the CPU's bf16 dot products, as before measurement existed.
const CostParams& builtin_costs();

}  // namespace ubfuse
