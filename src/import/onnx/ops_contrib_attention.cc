// onnxruntime's attention ops (domain com.microsoft), as its transformer optimizer and Hugging
// Face Optimum write them into the BERT, GPT-2, LLaMA and encoder-decoder models they save:
// Attention (the QKV projection and the heads in one node), MultiHeadAttention (Q, K and V
// projected), RotaryEmbedding (RoPE from position ids and cos/sin caches) and
// EmbedLayerNormalization (BERT's embeddings and their LayerNorm). Each is lowered onto the
// attention core (attention_lowering.h: MatMul, head Reshapes and Transposes, the scale, one
// additive mask and Softmax), which graph mode runs as one flash kernel, as for the exported
// originals. The masks follow onnxruntime's CPU kernels: a key masked by mask_index or
// key_padding_mask adds mask_filter_value to its score, a key past a query's position under
// `unidirectional` is left out (-inf).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "import/onnx/attention_lowering.h"
#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

// Attention(input, weights, bias?, mask_index?, past?, attention_bias?, past_sequence_length?;
// num_heads, qkv_hidden_sizes, unidirectional, mask_filter_value, scale): input [B, S, in]
// times weights [in, q + k + v] (+ bias), split into Q, K and V and their heads; past
// [2, B, heads, P, d] goes before K and V, and present (output 1) is the two stacked.
void attention(NodeCtx& c) {
  require_float(c, 0);
  const int64_t heads = heads_attr(c);
  if (c.attr_int("do_rotary", 0) != 0)
    c.unsupported("do_rotary (rotary embedding inside Attention)");
  c.ignore_attr("rotary_embedding_dim");
  if (c.attr_int("past_present_share_buffer", 0) != 0) {
    c.unsupported("past_present_share_buffer (a key/value cache updated in place)");
  }
  if (c.has_input(6)) c.unsupported("past_sequence_length (a shared key/value buffer)");
  Value* x = c.value(0);
  Value* w = c.value(1);
  if (x->shape.size() != 3)
    c.invalid("input must be [batch, sequence, hidden], got " + shape_str(x->shape));
  if (w->shape.size() != 2 || !w->shape[1].is_static()) {
    c.invalid("weights must be [hidden, q + k + v hidden sizes], got " + shape_str(w->shape));
  }
  const int64_t total = w->shape[1].value();
  std::vector<int64_t> sizes = c.attr_ints("qkv_hidden_sizes");
  if (sizes.empty()) {
    if (total % 3 != 0)
      c.invalid("weights' " + std::to_string(total) + " columns are not 3 equal parts");
    sizes = {total / 3, total / 3, total / 3};
  }
  if (sizes.size() != 3 || sizes[0] + sizes[1] + sizes[2] != total || sizes[0] != sizes[1] ||
      sizes[0] < 1 || sizes[2] < 1) {
    c.invalid("qkv_hidden_sizes must be 3 sizes, Q's equal to K's, adding up to the weights' " +
              std::to_string(total) + " columns");
  }
  // Three products of the weights' column ranges (constants sliced at import), as the exported
  // original has them: their outputs are the attention's inputs, read in place by head, where
  // slices of one product's output would be copies.
  auto project = [&](int64_t from, int64_t to, const std::string& what) {
    Value* y = c.emit(OpKind::MatMul, {x, slice_axis(c, w, 1, from, to)});
    if (c.has_input(2)) y = c.emit(OpKind::Add, {y, slice_axis(c, c.value(2), 0, from, to)});
    return split_heads(c, y, heads, what);
  };
  if (c.has_input(2) && c.shape(2) != Shape{Dim(total)}) {
    c.invalid("bias must be [" + std::to_string(total) + "] (the weights' columns), got " +
              shape_str(c.shape(2)));
  }
  Value* q = project(0, sizes[0], "Q");
  Value* k = project(sizes[0], sizes[0] + sizes[1], "K");
  Value* v = project(sizes[0] + sizes[1], total, "V");
  if (c.has_input(4)) {
    Value* past = c.value(4);
    const Shape& ps = past->shape;
    if (ps.size() != 5 || ps[0] != Dim(2) || ps[1] != k->shape[0] || ps[2] != k->shape[1] ||
        ps[4] != k->shape[3] || sizes[1] != sizes[2]) {
      c.invalid("past must be [2, batch, heads, past length, head size] = [2, " +
                k->shape[0].str() + ", " + k->shape[1].str() + ", P, " + k->shape[3].str() +
                "], got " + shape_str(ps));
    }
    const Shape one{ps[1], ps[2], ps[3], ps[4]};
    k = c.emit(OpKind::Concat, {c.reshape_to(slice_axis(c, past, 0, 0, 1), one), k},
               {{"axis", int64_t(2)}});
    v = c.emit(OpKind::Concat, {c.reshape_to(slice_axis(c, past, 0, 1, 2), one), v},
               {{"axis", int64_t(2)}});
  }
  if (c.output_used(1)) {
    if (sizes[1] != sizes[2]) c.unsupported("present with K and V of different hidden sizes");
    c.set_output(
        1, c.emit(OpKind::Concat, {unsqueeze0(c, k), unsqueeze0(c, v)}, {{"axis", int64_t(0)}}));
  }
  MaskSpec m;
  m.input = 3;
  m.bias_input = 5;
  m.causal = c.attr_int("unidirectional", 0) != 0;
  m.filter = c.attr_float("mask_filter_value", -10000.0);
  c.set_output(0, attend(c, q, k, v, scale_attr(c, sizes[0] / heads), m));
}

// MultiHeadAttention(query, key, value, bias?, key_padding_mask?, attention_bias?, past_key?,
// past_value?; num_heads, unidirectional, mask_filter_value, scale): Q, K and V already projected,
// [B, S or L, hidden] (K and V also as heads, [B, heads, L, d], a decoder's cross-attention
// cache), bias added to the three; past_key and past_value [B, heads, P, d] go before K and V,
// present_key and present_value (outputs 1, 2) are the results.
void multihead_attention(NodeCtx& c) {
  require_float(c, 0);
  const int64_t heads = heads_attr(c);
  if (!c.has_input(1) || !c.has_input(2)) {
    c.unsupported(
        "packed Q, K and V (query [B, S, heads, 3, d] or key [B, L, heads, 2, d]); "
        "give query, key and value");
  }
  for (int i : {8, 9}) {
    if (c.has_input(i))
      c.unsupported("input " + std::to_string(i) +
                    " (a shared key/value buffer or beam search's cache indirection)");
  }
  if (c.output_used(3)) c.unsupported("output 3 (the scores Q K^T)");
  Value* q = c.value(0);
  Value* k = c.value(1);
  Value* v = c.value(2);
  if (q->shape.size() != 3)
    c.unsupported("query of rank " + std::to_string(q->shape.size()) +
                  " (packed forms); [batch, sequence, hidden] is supported");
  if (k->shape.size() != v->shape.size() || (k->shape.size() != 3 && k->shape.size() != 4)) {
    c.invalid(
        "key and value must both be [batch, length, hidden] or [batch, heads, length, head "
        "size], got " +
        shape_str(k->shape) + " and " + shape_str(v->shape));
  }
  const bool as_heads = k->shape.size() == 4;
  if (c.has_input(3)) {
    if (as_heads) c.unsupported("bias with key and value given as heads");
    Value* bias = c.value(3);
    const Dim dq = q->shape[2], dk = k->shape[2], dv = v->shape[2];
    if (bias->shape.size() != 1 || !dq.is_static() || !dk.is_static() || !dv.is_static() ||
        bias->shape[0] != Dim(dq.value() + dk.value() + dv.value())) {
      c.invalid("bias must be [q + k + v hidden sizes], got " + shape_str(bias->shape));
    }
    q = c.emit(OpKind::Add, {q, slice_axis(c, bias, 0, 0, dq.value())});
    k = c.emit(OpKind::Add, {k, slice_axis(c, bias, 0, dq.value(), dq.value() + dk.value())});
    v = c.emit(OpKind::Add, {v, slice_axis(c, bias, 0, dq.value() + dk.value(),
                                           dq.value() + dk.value() + dv.value())});
  }
  q = split_heads(c, q, heads, "query");
  if (!as_heads) {
    k = split_heads(c, k, heads, "key");
    v = split_heads(c, v, heads, "value");
  }
  if (k->shape[1] != Dim(heads) || k->shape[3] != q->shape[3]) {
    c.invalid("key must have " + std::to_string(heads) + " heads of query's head size " +
              q->shape[3].str() + ", got " + shape_str(k->shape));
  }
  if (c.has_input(6) != c.has_input(7)) c.invalid("past_key and past_value come together");
  if (c.has_input(6)) {
    Value* pk = c.value(6);
    Value* pv = c.value(7);
    k = c.emit(OpKind::Concat, {pk, k}, {{"axis", int64_t(2)}});
    v = c.emit(OpKind::Concat, {pv, v}, {{"axis", int64_t(2)}});
  }
  if (c.output_used(1)) c.set_output(1, k);
  if (c.output_used(2)) c.set_output(2, v);
  MaskSpec m;
  m.input = 4;
  m.bias_input = 5;
  m.causal = c.attr_int("unidirectional", 0) != 0;
  m.filter = c.attr_float("mask_filter_value", -10000.0);
  c.set_output(0, attend(c, q, k, v, scale_attr(c, q->shape[3].value()), m));
}

// EmbedLayerNormalization(input_ids, segment_ids?, word_embedding, position_embedding,
// segment_embedding?, gamma, beta?, mask?, position_ids?; epsilon, mask_index_type): the three
// embeddings' rows added (positions 0..S-1 unless position_ids gives them) and LayerNorm'd;
// mask_index (output 1) counts each row's mask entries equal to 1 (0 without a mask), and output
// 2 is the sum before the norm.
void embed_layer_norm(NodeCtx& c) {
  for (int i : {0, 1, 7, 8}) {
    if (c.has_input(i) && c.dtype(i) != DType::i32) {
      c.invalid("input " + std::to_string(i) + " must be int32, got " +
                std::string(dtype_name(c.dtype(i))));
    }
  }
  require_float(c, 2);
  Value* ids = c.value(0);
  if (ids->shape.size() != 2)
    c.invalid("input_ids must be [batch, sequence], got " + shape_str(ids->shape));
  Value* word = c.value(2);
  if (word->shape.size() != 2)
    c.invalid("word_embedding must be [vocabulary, hidden], got " + shape_str(word->shape));
  const Dim h = word->shape[1];
  auto table = [&](int i, const std::string& what) {
    Value* t = c.value(i);
    if (t->shape.size() != 2 || t->shape[1] != h) {
      c.invalid(what + " must be [rows, " + h.str() + "], got " + shape_str(t->shape));
    }
    return t;
  };
  auto gather = [&](Value* t, Value* idx) {
    return c.emit(OpKind::Gather, {t, idx}, {{"axis", int64_t(0)}});
  };
  Value* sum = gather(word, ids);
  Value* pos = table(3, "position_embedding");
  Value* pos_rows = c.has_input(8) ? c.value(8) : arange(c, ids->shape[1]);
  sum = c.emit(OpKind::Add, {sum, gather(pos, pos_rows)});
  if (c.has_input(4)) {
    if (!c.has_input(1)) c.invalid("segment_embedding needs segment_ids");
    sum = c.emit(OpKind::Add, {sum, gather(table(4, "segment_embedding"), c.value(1))});
  }
  if (sum->shape != Shape{ids->shape[0], ids->shape[1], h}) {
    c.invalid("position_ids must be [batch or 1, sequence], got " + shape_str(c.shape(8)));
  }
  const Value* gamma = c.value(5);
  if (gamma->shape != Shape{h})
    c.invalid("gamma must be [" + h.str() + "], got " + shape_str(gamma->shape));
  std::vector<Value*> in{sum, c.value(5)};
  if (c.has_input(6)) in.push_back(c.value(6));
  c.set_output(0, c.emit(OpKind::LayerNorm, in, {{"eps", c.attr_float("epsilon", 1e-12)}}));
  c.ignore_attr(
      "mask_index_type");  // output 1's form: the one kind onnxruntime's CPU kernel writes
  if (c.output_used(1)) {
    // The count in f32 (ReduceSum's dtypes), exact below 2^24 entries a row.
    Value* ones =
        c.has_input(7)
            ? cast_value(c, c.emit(OpKind::Equal, {c.value(7), c.scalar(1, DType::i32)}),
                         DType::f32)
            : c.emit(OpKind::Mul, {cast_value(c, ids, DType::f32), c.scalar(0, DType::f32)});
    c.set_output(1, cast_value(c, reduce_axes(c, Red::Sum, ones, {1}, false), DType::i32));
  }
  if (c.output_used(2)) c.set_output(2, sum);
}

// RotaryEmbedding(input, position_ids, cos_cache, sin_cache; interleaved, num_heads,
// rotary_embedding_dim, scale, is_packed_batching): RoPE on the first `rotary` columns of each
// head of input ([B, S, heads * d] or [B, heads, S, d]), the rest passed through. The rows of
// cos_cache and sin_cache ([positions, rotary / 2]) are those of position_ids ([B, S]; or one
// offset, the positions then offset + 0..S-1), repeated to `rotary` columns as the form pairs
// them (halves: rotate_half; interleaved: adjacent pairs) and padded past `rotary` with 1 and -0:
// x * cos + RotateHalf(x) * sin, the form the fused RoPE kernel takes.
void rotary_embedding(NodeCtx& c) {
  require_float(c, 0);
  if (c.attr_int("is_packed_batching", 0) != 0) c.unsupported("is_packed_batching");
  c.ignore_attr("scale");  // onnxruntime's CPU kernel does not apply it
  Value* x = c.value(0);
  const Shape xs = x->shape;
  const bool bnsh = xs.size() == 4;
  if (xs.size() != 3 && !bnsh) {
    c.invalid(
        "input must be [batch, sequence, hidden] or [batch, heads, sequence, head size], got " +
        shape_str(xs));
  }
  Value* cos = c.value(2);
  Value* sin = c.value(3);
  if (cos->shape.size() != 2 || cos->shape != sin->shape || !cos->shape[1].is_static()) {
    c.invalid("cos_cache and sin_cache must be one [positions, rotary / 2] shape, got " +
              shape_str(cos->shape) + " and " + shape_str(sin->shape));
  }
  const int64_t half = cos->shape[1].value();
  int64_t rotary = c.attr_int("rotary_embedding_dim", 0);
  if (rotary == 0) rotary = 2 * half;
  if (rotary != 2 * half) {
    c.invalid("rotary_embedding_dim " + std::to_string(rotary) + " must be twice cos_cache's " +
              std::to_string(half) + " columns");
  }
  int64_t heads = c.attr_int("num_heads", 0);
  if (bnsh) heads = xs[1].is_static() ? xs[1].value() : heads;
  const Dim hidden = bnsh ? xs[3] : xs[2];
  if (!hidden.is_static()) c.invalid("the head size must be static, got " + shape_str(xs));
  // Without num_heads a [B, S, hidden] input is one head of cos_cache's width.
  const int64_t d = bnsh ? hidden.value() : heads > 0 ? hidden.value() / heads : rotary;
  if (d < rotary || (!bnsh && hidden.value() % d != 0)) {
    c.invalid("heads of " + std::to_string(d) + " columns (hidden " + hidden.str() +
              ", num_heads " + std::to_string(heads) + ") cannot take " + std::to_string(rotary) +
              " rotary columns");
  }
  const Dim B = xs[0], S = bnsh ? xs[2] : xs[1];
  // Positions: [B or 1, S] ids, or one offset.
  Value* pos = c.value(1);
  if (pos->dtype != DType::i64) c.invalid("position_ids must be int64");
  const bool offset = pos->shape.empty() || pos->shape == Shape{Dim(1)};
  if (offset) {
    pos = c.emit(OpKind::Add, {c.reshape_to(arange(c, S), {Dim(1), S}), c.reshape_to(pos, {})});
  } else if (pos->shape.size() != 2 || pos->shape[1] != S ||
             (pos->shape[0] != B && pos->shape[0] != Dim(1))) {
    c.invalid("position_ids must be [batch, sequence] or one offset, got " + shape_str(pos->shape));
  }
  Value* h = bnsh ? x : c.reshape_to(x, {B, S, Dim(hidden.value() / d), Dim(d)});
  Value* y =
      rotate(c, h, !bnsh, pos, c.value(2), c.value(3), c.attr_int("interleaved", 0) != 0, rotary);
  c.set_output(0, bnsh ? y : c.reshape_to(y, xs));
}

}  // namespace

void add_contrib_attention_ops(ConverterMap& microsoft) {
  microsoft["Attention"] = attention;
  microsoft["MultiHeadAttention"] = multihead_attention;
  microsoft["EmbedLayerNormalization"] = embed_layer_norm;
  microsoft["RotaryEmbedding"] = rotary_embedding;
}

}  // namespace ubfuse::onnx_import
