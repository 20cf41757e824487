// Attention's chain as exporters write it: MatMul(Q, K^T) -> Mul/Div by a scalar and a mask (an
// Add, or a Where choosing between the scores and a scalar by a bool tensor: masked_fill), each
// optional, in either order -> Softmax -> MatMul(P, V). The partitioner makes one
// group of it (rule AttentionFusion) and codegen runs it through the flash-style kernel.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse::fusion {

// Grouped-query heads: x [..., Hkv, L, D] made [..., Hkv * g, L, D] by repeating each head g times
// in a row, as exporters write repeat_kv: Reshape (insert a 1 before L), Expand (it to g), Reshape
// (merge Hkv and g). The kernel reads x and maps head h to x's head h / g.
struct HeadRepeat {
  const Node* unsqueeze = nullptr;
  const Node* expand = nullptr;
  const Node* merge = nullptr;
  const Value* source() const { return unsqueeze->inputs[0]; }  // x
  explicit operator bool() const { return merge != nullptr; }
};

struct AttentionMatch {
  // The Transpose that makes K^T from K (the last two axes swapped), when the scores are its only
  // reader: the kernel then reads K's rows itself. With k_transpose_heads it goes from K's heads
  // layout [.., L, H, D] straight to K^T [.., H, D, L] (perm 0, 2, 3, 1 at rank 4).
  const Node* k_transpose = nullptr;
  bool k_transpose_heads = false;
  // Head Transposes [.., L, H, D] -> [.., H, L, D] (perm 0, 2, 1, 3 at rank 4) of Q, of K before
  // k_transpose and of V, each read by the chain alone: the kernel reads the rows in place, H * D
  // elements apart, and no kernel moves them. Not with a head repeat of the same operand.
  const Node* q_heads = nullptr;
  const Node* k_heads = nullptr;
  const Node* v_heads = nullptr;
  // A head-layout operand [.., L, H, D] gathered as part p of a fused projection [.., L, P, H, D]
  // (a Gather with a scalar index on axis -3, read by the head Transpose alone): the kernel reads
  // the projection in place, p * H * D elements in, rows P * H * D apart.
  const Node* q_part = nullptr;
  const Node* k_part = nullptr;
  const Node* v_part = nullptr;
  // K (read by k_transpose) and V as repeats of fewer heads, when they are (grouped-query heads).
  HeadRepeat k_repeat, v_repeat;
  const Node* scores = nullptr;    // MatMul(Q, K^T)
  std::vector<const Node*> steps;  // Mul/Div by a scalar, Add of a mask, Where; the chain's order
  const Node* softmax = nullptr;
  const Node* context = nullptr;  // MatMul(P, V)
  // The head Transpose [.., H, L, Dv] -> [.., L, H, Dv] of the context, when it alone reads it
  // (match_output_heads): the kernel writes the rows in that layout, H * Dv elements apart.
  const Node* out_heads = nullptr;

  std::vector<const Node*> nodes() const;  // the chain in order (the head repeats first)
  // The values the kernel reads as Q, K (rows, or K^T) and V: before any head repeat, head
  // Transpose or part Gather; and whether each is in the heads layout [.., L, H, D].
  const Value* q_input() const;
  const Value* k_input() const;
  const Value* v_input() const;
  const Value* output() const;  // the context, or its head Transpose's result
  bool k_in_heads_layout() const { return k_heads || k_transpose_heads; }
  // The input of step `s` that does not come from the chain: the scalar, the mask, or a Where's
  // condition.
  const Value* operand(const Node* s) const;
  // A Where step: its scalar (the value where the scores are not kept), and whether the scores
  // are its true branch.
  const Value* fill(const Node* s) const;
  bool keeps_when_true(const Node* s) const;
};

// Makes `reader` m's out_heads when it is a head Transpose ([.., H, L, Dv] -> [.., L, H, Dv], of
// the context's dtype) and the context's only reader.
void match_output_heads(AttentionMatch& m, const Node* reader,
                        const std::function<bool(const Value*, const Node*)>& only_reader);

// The chain ending at the MatMul `context`, or nullopt. only_reader(v, n) says whether n is the
// one reader of v and v is no graph output (the scores must not be needed elsewhere).
std::optional<AttentionMatch> match_attention(
    const Node* context, const std::function<bool(const Value*, const Node*)>& only_reader);

}  // namespace ubfuse::fusion
