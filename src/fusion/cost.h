// The fusion cost model: what a group costs as one kernel and as its parts, in seconds, from
// bytes moved, flops and a per-kernel launch cost, with figures measured per machine
// (compiler/cost_calibration.h). The partitioner keeps a group only when it is predicted not
// slower than its parts; a refused group's edges get NotProfitable with both estimates.
//
// What it models:
//   - a kernel costs launch_s + max(bytes / bytes_per_s, matmul flops / matmul_flops_per_s);
//   - a generated kernel reads each input once (twice when it re-reads, `reread`) and writes each
//     output once; its parts move every intermediate through memory, each in its own kernel, so
//     by bytes a generated kernel never loses but for re-reading;
//   - a row reduction's kernel takes a row at a time: rows shorter than kVectorValues cost a
//     whole vector each, so its inputs of that row length count kVectorValues / cols times (eager
//     ReduceSum and ReduceMean take rows of 2 to 4 f32 values a vector of rows at a time);
//   - a group codegen cannot express runs op by op (codegen/op_by_op_kernel.h): its parts, one
//     after another, plus per member a shape inference and allocation (a launch's cost) and
//     fresh temporaries each call: always slower than its parts;
//   - an attention chain as the flash-style kernel or as MatMul (its scale, mask and softmax as
//     the epilogue) and MatMul: flops at the rates measured for each form, per dtype (f32; bf16),
//     at two key lengths, interpolated in log(length) between them and held beyond.
// Symbolic dims are estimated at kSymbolSize (both forms scale alike; attention uses its key
// length where fixed). Where the two estimates of an attention chain are within kUnsureRatio of
// each other, the model is unsure: both forms are timed at the chain's sizes (AttentionProbe,
// FusionConfig::time_attention) and the faster kept, the timing cached per machine.
#pragma once

#include <string>
#include <vector>

#include "fusion/group.h"

namespace ubfuse {

struct CostParams {
  double bytes_per_s = 20e9;          // a streaming eager kernel (Add over arrays out of cache)
  double launch_s = 2e-6;             // one kernel's fixed cost in a run
  double matmul_flops_per_s = 200e9;  // f32 MatMul
  // Attention chains at key lengths attention_lengths[0] and [1]; [dtype: 0 f32/f16, 1 bf16]
  // [length]: flops per second as the flash-style kernel and as MatMul + MatMul.
  int64_t attention_lengths[2] = {128, 1024};
  double flash_flops_per_s[2][2] = {{100e9, 100e9}, {100e9, 100e9}};
  double split_flops_per_s[2][2] = {{60e9, 80e9}, {60e9, 80e9}};
  std::string source = "builtin";  // builtin | measured | cache
  std::string machine;             // the cache key ("" for builtin)
  std::string summary() const;     // "46.0 GB/s, launch 1.2 us, MatMul 410 GFLOP/s, ..."
};

inline constexpr int64_t kSymbolSize = 256;
// The row length below which a row reduction's generated kernel is charged a vector per row: 16
// f32 values, AVX-512's vector.
inline constexpr int64_t kVectorValues = 16;
inline constexpr double kUnsureRatio = 1.25;
// A group is refused when its estimate exceeds its parts' by more than this factor (one that
// would run op by op, when it exceeds them at all).
inline constexpr double kProfitMargin = 1.05;

struct CostEstimate {
  double seconds = 0;
  double bytes = 0;
  double flops = 0;
  int kernels = 0;
  std::string str() const;  // "12.3 us (1 kernel, 4.19 MB, 0.27 GFLOP)"
};

// The members of g run one kernel each (views none).
CostEstimate estimate_parts(const Graph& g, const std::vector<const Node*>& nodes,
                            const CostParams& p);
// g as one generated kernel; `op_by_op` when codegen cannot express it.
CostEstimate estimate_fused(const Graph& graph, const FusedGroup& g, bool op_by_op,
                            const CostParams& p);
// The attention chain from MatMul(Q, K^T) `scores` to MatMul(P, V) `context` as the flash-style
// kernel (`flash`) or as MatMul with its epilogue and MatMul.
CostEstimate estimate_attention(const Node* scores, const Node* context, bool flash,
                                const CostParams& p);

// The sizes of an attention chain to time both forms at: `heads` (all leading dims together)
// matrices of q_len x head_dim queries against k_len keys.
struct AttentionProbe {
  DType dtype = DType::f32;
  int64_t heads = 1, q_len = 1, k_len = 1, head_dim = 1;
  std::string key() const;  // "f32 h16 q512 k512 d64"
};
AttentionProbe attention_probe(const Node* scores, const Node* context);

// Both forms' wall time at a probe's sizes.
struct AttentionTiming {
  double flash_s = 0, split_s = 0;
  std::string source;  // measured | cache
};

}  // namespace ubfuse
