// The attention core that onnxruntime's attention ops lower onto (ops_contrib_attention.cc,
// ops_contrib_gqa.cc): heads split and merged, positions, RoPE from cos/sin caches, and Q K^T,
// the scale, one additive mask, Softmax and the product with V, the pattern the attention fusion
// (fusion/attention_match.cc) runs as one flash kernel.
#pragma once

#include <cstdint>
#include <string>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

// x [B, L, heads * d] -> [B, heads, L, d].
Value* split_heads(NodeCtx& c, Value* x, int64_t heads, const std::string& what);

// [B, heads, S, d] -> [B, S, heads * d].
Value* merge_heads(NodeCtx& c, Value* x);

// 0, 1, ..., n - 1 (int64) for a size n that may be symbolic (read from a graph input's shape,
// not from a value inside the attention, which would then have to be written out).
Value* arange(NodeCtx& c, const Dim& n);

// What the attention core takes besides Q, K and V.
struct MaskSpec {
  int input = -1;            // the padding mask's input (mask_index, key_padding_mask); -1: none
  int bias_input = -1;       // attention_bias ([B or 1, heads or 1, S, T]); -1: none
  bool causal = false;       // unidirectional
  double filter = -10000.0;  // mask_filter_value
  double softcap = 0.0;      // > 0: the scaled scores become softcap * tanh(scores / softcap)
  Value* add = nullptr;      // an additive mask the op builds itself ([.., S, T])
};

// softmax(scale q k^T (then m.softcap) + mask) v for q [B, heads, S, d], k [B, heads, T, d],
// v [B, heads, T, dv] (the past already joined): [B, S, heads * dv]. The mask adds m's parts:
// the padding input's, the causal one, m.add, attention_bias.
Value* attend(NodeCtx& c, Value* q, Value* k, Value* v, double scale, const MaskSpec& m);

// `scale`, or 1 / sqrt(d) when it is 0 (the attribute's default).
double scale_attr(NodeCtx& c, int64_t d);

// The attribute num_heads, which must be at least 1.
int64_t heads_attr(NodeCtx& c);

// x [B, heads, L, d] with 1 in front: [1, B, heads, L, d].
Value* unsqueeze0(NodeCtx& c, Value* x);

// RoPE on the first `rotary` columns of each head of x ([B, heads, S, d], or [B, S, heads, d]
// when bshd): the rows of cos and sin ([positions, rotary / 2]) at pos ([B or 1, S], int64),
// repeated to `rotary` columns as the form pairs them (halves: rotate_half; `pairs`: adjacent
// pairs) and padded past `rotary` with 1 and -0: x * cos + RotateHalf(x) * sin, the form the
// fused RoPE kernel takes.
Value* rotate(NodeCtx& c, Value* x, bool bshd, Value* pos, Value* cos, Value* sin, bool pairs,
              int64_t rotary);

}  // namespace ubfuse::onnx_import
