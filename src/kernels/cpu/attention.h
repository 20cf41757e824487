// softmax(steps(Q K^T)) V as one flash-style kernel (attention.cc): keys and values in blocks,
// an online softmax with a running max and sum per query row, the scores only ever in a small
// per-thread tile. Graph mode runs an attention group (fusion/partition.cc) through it.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/thread_pool.h"
#include "ubfuse/dtype.h"

namespace ubfuse::cpu {

// What the graph does to the scores between the two products, in its order.
struct AttentionStep {
  enum Kind : uint8_t {
    kMul,      // scores * scalar
    kDiv,      // scores / scalar
    kAddMask,  // scores + mask
    kWhere,    // mask (bool) ? scores : scalar, or the other way round when !keep_when_true
  };
  Kind kind = kMul;
  float scalar = 1.0f;  // kMul, kDiv: the factor; kWhere: the value where scores are not kept
  bool keep_when_true = true;
};

// `batches` independent problems: out[b] = softmax_rows(steps(q[b] kt[b])) v[b], with q[b]
// [lq, d], kt[b] [d, lk] (K transposed, as the graph's first MatMul reads it), v[b] [lk, dv] and
// out[b] [lq, dv], all row-major, at the element offsets given per batch. The mask of kAddMask
// or kWhere (at most one such step) is read at mask + mask_off[b] + i * mask_row_stride + j *
// mask_col_stride (strides 0 where it broadcasts).
struct AttentionProblem {
  DType dtype = DType::f32;       // q, kt, v and out: f32, bf16 or f16
  DType mask_dtype = DType::f32;  // the mask's: a float dtype, or bool for kWhere
  const void* q = nullptr;
  const void* kt = nullptr;
  const void* v = nullptr;
  const void* mask = nullptr;
  void* out = nullptr;
  int64_t batches = 0, lq = 0, lk = 0, d = 0, dv = 0;
  std::vector<int64_t> q_off, kt_off, v_off, out_off, mask_off;
  int64_t mask_row_stride = 0, mask_col_stride = 0;
  // kt holds K itself, [lk, d] per batch (the graph's Transpose to K^T runs inside the kernel).
  bool k_rows = false;
  // The element distance between consecutive rows of q, of K (k_rows) and of v; 0: dense (d, d,
  // dv). A head Transpose read in place ([.., L, H, D] as [.., H, L, D]) has rows H * D apart.
  int64_t q_ld = 0, k_ld = 0, v_ld = 0;
  int64_t out_ld = 0;  // the same for out's rows (dv when 0)
  std::vector<AttentionStep> steps;
};

// Whether this CPU has bf16 dot products (AVX512_BF16), which oneDNN's bf16 matmuls use: twice
// the rate of the f32 arithmetic run_attention does, so bf16 attention chains stay MatMuls there.
bool has_bf16_dot_products();

// Runs every problem over the pool. A row whose scores are all -inf gives NaN, as Softmax does.
void run_attention(const AttentionProblem& p, ThreadPool& pool);

}  // namespace ubfuse::cpu
