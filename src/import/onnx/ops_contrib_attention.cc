// onnxruntime's attention ops (domain com.microsoft), as its transformer optimizer and Hugging
// Face Optimum write them into the BERT, GPT-2, LLaMA and encoder-decoder models they save:
// Attention (the QKV projection and the heads in one node), MultiHeadAttention (Q, K and V
// projected), RotaryEmbedding (RoPE from position ids and cos/sin caches) and
// EmbedLayerNormalization (BERT's embeddings and their LayerNorm). Each is lowered onto MatMul,
// head Reshapes and Transposes, the scale, one additive mask and Softmax: the pattern the
// attention fusion (fusion/attention_match.cc) runs as one flash kernel, as for the exported
// originals. The masks follow onnxruntime's CPU kernels: a key masked by mask_index or
// key_padding_mask adds mask_filter_value to its score, a key past a query's position under
// `unidirectional` is left out (-inf).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "import/onnx/registry.h"
#include "ubfuse/error.h"

namespace ubfuse::onnx_import {

namespace {

// x [B, L, heads * d] -> [B, heads, L, d].
Value* split_heads(NodeCtx& c, Value* x, int64_t heads, const std::string& what) {
  const Shape& s = x->shape;
  if (s.size() != 3) c.invalid(what + " must be [batch, length, hidden], got " + shape_str(s));
  if (!s[2].is_static() || s[2].value() % heads != 0) {
    c.invalid(what + "'s hidden size " + s[2].str() + " must be a multiple of num_heads " +
              std::to_string(heads));
  }
  Value* r = c.reshape_to(x, {s[0], s[1], Dim(heads), Dim(s[2].value() / heads)});
  return c.emit(OpKind::Transpose, {r}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
}

// [B, heads, S, d] -> [B, S, heads * d].
Value* merge_heads(NodeCtx& c, Value* x) {
  Value* t = c.emit(OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const Shape& s = t->shape;
  return c.reshape_to(t, Shape{s[0], s[1], Dim::mul(s[2], s[3])});
}

// 0, 1, ..., n - 1 (int64) for a size n that may be symbolic (read from a graph input's shape,
// not from a value inside the attention, which would then have to be written out).
Value* arange(NodeCtx& c, const Dim& n) {
  if (n.is_static()) return positions(c, {n.value()});
  return c.emit(OpKind::Range, {c.scalar(0, DType::i64), c.dim_scalar(n), c.scalar(1, DType::i64)});
}

// What the attention core takes besides Q, K and V.
struct MaskSpec {
  int input = -1;            // the padding mask's input (mask_index, key_padding_mask); -1: none
  int bias_input = -1;       // attention_bias ([B or 1, heads or 1, S, T]); -1: none
  bool causal = false;       // unidirectional
  double filter = -10000.0;  // mask_filter_value
  double softcap = 0.0;      // > 0: the scaled scores become softcap * tanh(scores / softcap)
  Value* add = nullptr;      // an additive mask the op builds itself ([.., S, T])
};

// The additive mask of the padding input (onnxruntime's mask forms), as [B, 1, 1 or S, T] of
// dtype dt: 0 for a key kept, `filter` for one masked. q and k are [B, heads, S or T, d].
Value* padding_mask(NodeCtx& c, const MaskSpec& m, Value* q, Value* k, DType dt) {
  const IValue& iv = c.input(m.input);
  if (iv.dtype != DType::i32) {
    c.invalid("the mask (input " + std::to_string(m.input) + ") must be int32, got " +
              std::string(dtype_name(iv.dtype)));
  }
  Value* mask = c.value(m.input);
  const Shape& ms = mask->shape;
  const Dim B = q->shape[0], S = q->shape[2], T = k->shape[2];
  auto fill = [&](Value* keep) {
    return c.emit(OpKind::Where, {keep, c.scalar(0, dt), c.scalar(m.filter, dt)});
  };
  auto keep_of = [&](Value* raw) {  // a raw mask's nonzero entries
    return c.emit(OpKind::Greater, {raw, c.scalar(0, DType::i32)});
  };
  // A dim of the mask that is a graph input's symbol of its own (a decoder's mask of the total
  // length, [batch, "past_sequence_length + 1"]) is taken to be the size it must be; the executor
  // checks that at run time.
  auto same = [&](size_t k, const Dim& want) {
    if (ms[k] == want) return true;
    return ms[k].is_symbol() && c.unify_symbol(ms[k].symbol(), want) && ms[k] == want;
  };
  auto need = [&](bool ok, const std::string& form) {
    if (ok) return;
    const std::string msg = "a mask of shape " + shape_str(ms) + " does not match " + form +
                            " for batch " + B.str() + ", " + S.str() + " queries and " + T.str() +
                            " keys";
    if (is_static(ms) && B.is_static() && S.is_static() && T.is_static()) c.invalid(msg);
    c.unsupported(msg + " as the model declares them (name the same sizes with the same symbols)");
  };
  if (ms.size() == 2) {  // [B, T] raw 0/1
    need(same(0, B) && same(1, T), "[batch, keys]");
    return c.reshape_to(fill(keep_of(mask)), {B, Dim(1), Dim(1), T});
  }
  if (ms.size() == 3) {  // [B, S, T] raw 0/1 per query
    need(same(0, B) && same(1, S) && same(2, T), "[batch, queries, keys]");
    return c.reshape_to(fill(keep_of(mask)), {B, Dim(1), S, T});
  }
  if (ms.size() != 1) {
    c.unsupported("a mask of rank " + std::to_string(ms.size()) +
                  " (Megatron's 4-D form; the 1-D, 2-D and 3-D forms are supported)");
  }
  // [B]: each batch's keys end there; [2 B]: they also start at the second half's entries.
  const bool with_start = ms[0] == Dim::mul(B, Dim(2));
  need(ms[0] == B || with_start, "[batch] (key lengths) or [2 x batch] (ends and starts)");
  Value* idx = cast_value(c, mask, DType::i64);
  Value* t = c.reshape_to(arange(c, T), {Dim(1), T});
  Value* ends = idx;
  Value* starts = nullptr;
  if (with_start) {
    Value* two = c.emit(OpKind::Reshape, {idx}, {{"shape", std::vector<int64_t>{2, -1}}});
    ends = c.emit(OpKind::Gather, {two, c.scalar(0, DType::i64)}, {{"axis", int64_t(0)}});
    starts = c.emit(OpKind::Gather, {two, c.scalar(1, DType::i64)}, {{"axis", int64_t(0)}});
  }
  Value* keep = c.emit(OpKind::Less, {t, c.reshape_to(ends, {B, Dim(1)})});
  Value* add = fill(keep);
  if (starts) {
    Value* before = c.emit(OpKind::Less, {t, c.reshape_to(starts, {B, Dim(1)})});
    add = c.emit(OpKind::Where, {before, c.scalar(m.filter, dt), add});
  }
  return c.reshape_to(add, {B, Dim(1), Dim(1), T});
}

// softmax(scale q k^T + mask) v for q [B, heads, S, d], k [B, heads, T, d], v [B, heads, T, dv]
// (the past already joined): [B, S, heads * dv].
Value* attend(NodeCtx& c, Value* q, Value* k, Value* v, double scale, const MaskSpec& m) {
  const DType dt = q->dtype;
  Value* add = m.input >= 0 && c.has_input(m.input) ? padding_mask(c, m, q, k, dt) : nullptr;
  if (m.causal) {
    // Query s (of S, after T - S past keys) sees keys t <= s + T - S.
    const Dim S = q->shape[2], T = k->shape[2];
    Value* limit = c.emit(OpKind::Add,
                          {c.reshape_to(arange(c, S), {S, Dim(1)}), c.dim_scalar(Dim::sub(T, S))});
    Value* later = c.emit(OpKind::Greater, {c.reshape_to(arange(c, T), {Dim(1), T}), limit});
    add = c.emit(OpKind::Where, {later, c.scalar(-std::numeric_limits<double>::infinity(), dt),
                                 add ? add : c.scalar(0, dt)});
  }
  if (m.add) add = add ? c.emit(OpKind::Add, {add, m.add}) : m.add;
  if (m.bias_input >= 0 && c.has_input(m.bias_input)) {
    Value* bias = c.value(m.bias_input);
    if (bias->shape.size() != 4) {
      c.invalid("attention_bias must be [batch or 1, heads or 1, queries, keys], got " +
                shape_str(bias->shape));
    }
    add = add ? c.emit(OpKind::Add, {add, bias}) : bias;
  }
  Value* kt = c.emit(OpKind::Transpose, {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value* scores = c.emit(OpKind::Mul, {c.emit(OpKind::MatMul, {q, kt}), c.scalar(scale, dt)});
  if (m.softcap > 0) {
    Value* t = c.emit(OpKind::Tanh, {c.emit(OpKind::Div, {scores, c.scalar(m.softcap, dt)})});
    scores = c.emit(OpKind::Mul, {t, c.scalar(m.softcap, dt)});
  }
  if (add) scores = c.emit(OpKind::Add, {scores, add});
  return merge_heads(c, c.emit(OpKind::MatMul, {c.emit(OpKind::Softmax, {scores}), v}));
}

// `scale`, or 1 / sqrt(d) when it is 0 (the attribute's default).
double scale_attr(NodeCtx& c, int64_t d) {
  const double s = c.attr_float("scale", 0.0);
  return s != 0.0 ? s : 1.0 / std::sqrt(double(d));
}

int64_t heads_attr(NodeCtx& c) {
  const int64_t n = c.attr_int("num_heads", 0);
  if (n < 1) c.invalid("needs the attribute num_heads of at least 1");
  return n;
}

// x [B, heads, L, d] with 1 in front: [1, B, heads, L, d].
Value* unsqueeze0(NodeCtx& c, Value* x) {
  Shape s{Dim(1)};
  for (const Dim& d : x->shape) s.push_back(d);
  return c.reshape_to(x, s);
}

// RoPE on the first `rotary` columns of each head of x ([B, heads, S, d], or [B, S, heads, d]
// when bshd): the rows of cos and sin ([positions, rotary / 2]) at pos ([B or 1, S], int64),
// repeated to `rotary` columns as the form pairs them (halves: rotate_half; `pairs`: adjacent
// pairs) and padded past `rotary` with 1 and -0: x * cos + RotateHalf(x) * sin, the form the
// fused RoPE kernel takes.
Value* rotate(NodeCtx& c, Value* x, bool bshd, Value* pos, Value* cos, Value* sin, bool pairs,
              int64_t rotary) {
  const int64_t half = rotary / 2, d = x->shape[3].value();
  const Dim S = bshd ? x->shape[1] : x->shape[2];
  // cos and sin rows [b, S, half] -> [b, S, rotary] as the form pairs the columns.
  auto spread = [&](Value* table) {
    Value* rows = c.emit(OpKind::Gather, {table, pos}, {{"axis", int64_t(0)}});
    const Shape rs = rows->shape;
    if (!pairs) return c.emit(OpKind::Concat, {rows, rows}, {{"axis", int64_t(-1)}});
    Value* col = c.reshape_to(rows, {rs[0], rs[1], Dim(half), Dim(1)});
    return c.reshape_to(c.emit(OpKind::Concat, {col, col}, {{"axis", int64_t(-1)}}),
                        {rs[0], rs[1], Dim(rotary)});
  };
  auto pad = [&](Value* v, double fill) {
    if (rotary == d) return v;
    return c.emit(OpKind::Pad, {v, c.scalar(fill, v->dtype)},
                  {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, d - rotary}},
                   {"mode", std::string("constant")}});
  };
  Value* cs = pad(spread(cos), 1.0);
  Value* sn = pad(spread(sin), -0.0);
  // As [b, 1, S, d] against [B, heads, S, d], or [b, S, 1, d] against [B, S, heads, d].
  const Dim pb0 = cs->shape[0];
  const Shape bshape = bshd ? Shape{pb0, S, Dim(1), Dim(d)} : Shape{pb0, Dim(1), S, Dim(d)};
  cs = c.reshape_to(cs, bshape);
  sn = c.reshape_to(sn, bshape);
  Attrs ra;
  if (pairs) ra["interleaved"] = int64_t(1);
  if (rotary != d) ra["rotary_dims"] = rotary;
  return c.emit(OpKind::Add, {c.emit(OpKind::Mul, {x, cs}),
                              c.emit(OpKind::Mul, {c.emit(OpKind::RotateHalf, {x}, ra), sn})});
}

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

// The lengths GroupQueryAttention's lowering takes as given, checked when the node runs: the
// int64 vector [total_sequence_length, past, sequence, seqlens_k...] (past and sequence from the
// inputs' shapes). onnxruntime writes a sequence's new keys after its own past length
// (seqlens_k + 1 - sequence) into a cache of total_sequence_length or the past's length, whichever
// is larger; that is the past followed by the new keys, which the lowering computes, exactly when
// the total is past + sequence and, after the first prompt, every sequence has that length.
HostFn gqa_lengths_check(const std::string& node) {
  return [node](Tensor& t) {
    const auto at = [&](int64_t i) { return int64_t(t.get(i)); };
    const int64_t total = at(0), P = at(1), S = at(2);
    const std::string where = "GroupQueryAttention '" + node + "': ";
    if (total != P + S) {
      throw Error(where + "total_sequence_length is " + std::to_string(total) + ", but past_key " +
                  "holds " + std::to_string(P) + " keys and query " + std::to_string(S) +
                  " (past + sequence = " + std::to_string(P + S) +
                  "). Hint: ubfuse keeps present as the past followed by the new keys; a past of "
                  "the cache's maximum length updated in place (past_present_share_buffer) is "
                  "unsupported: pass the past as the last run's present");
    }
    for (int64_t b = 0; b + 3 < t.numel(); b++) {
      const int64_t len = at(3 + b);
      if (len < 0 || len >= total) {
        throw Error(where + "seqlens_k[" + std::to_string(b) + "] is " + std::to_string(len) +
                    ", outside 0.." + std::to_string(total - 1) + " (total_sequence_length - 1)");
      }
      if (P > 0 && len != total - 1) {
        throw Error(where + "seqlens_k[" + std::to_string(b) + "] is " + std::to_string(len) +
                    " but the cache holds " + std::to_string(total) +
                    " keys for every sequence (seqlens_k = " + std::to_string(total - 1) +
                    "). Hint: sequences of different lengths in one batch are supported in the "
                    "first prompt only (right-padded); run them as batches of one after it");
      }
    }
  };
}

// GroupQueryAttention(query, key?, value?, past_key?, past_value?, seqlens_k,
// total_sequence_length, cos_cache?, sin_cache?, position_ids?, attention_bias?; num_heads,
// kv_num_heads, scale, softcap, local_window_size, do_rotary, rotary_interleaved): the causal
// attention of LLaMA-style decoders with kv_num_heads heads of K and V shared by num_heads /
// kv_num_heads query heads each (onnxruntime's model builder writes it into the Phi, Llama, Mistral
// and Qwen models onnxruntime-genai runs). query [B, S, num_heads * d] with key and value [B, S,
// kv_num_heads * d], or query packing all three; past_key and past_value [B, kv_num_heads, P, d]
// go before K and V, and present_key and present_value (outputs 1, 2) are the results. RoPE at
// position_ids, else P + 0..S-1, when do_rotary; softcap, then attention_bias, then the mask: a
// key t is left out for query s when t > P + s, t > seqlens_k[b] (a right-padded first prompt) or
// t <= P + s - local_window_size. As onnxruntime 1.30's CPU kernel computes it (gqa_lengths_check
// for what the lengths must be).
void group_query_attention(NodeCtx& c) {
  require_float(c, 0);
  const int64_t N = heads_attr(c), Nkv = c.attr_int("kv_num_heads", 0);
  if (Nkv < 1 || N % Nkv != 0) {
    c.invalid("kv_num_heads must divide num_heads " + std::to_string(N) + ", got " +
              std::to_string(Nkv));
  }
  if (c.attr_int("smooth_softmax", 0) != 0)
    c.unsupported("smooth_softmax (a softmax with an extra zero logit)");
  if (c.has_input(11)) c.unsupported("head_sink (input 11, an extra logit per head)");
  if (c.attr_int("qk_output", 0) != 0 || c.output_used(3))
    c.unsupported("qk_output (output 3, the scores)");
  c.ignore_attr("mask_filter_value");  // onnxruntime's CPU kernel leaves masked keys out
  Value* q = c.value(0);
  if (q->shape.size() != 3 || !q->shape[2].is_static()) {
    c.invalid("query must be [batch, sequence, hidden] with a static hidden size, got " +
              shape_str(q->shape));
  }
  const int64_t hidden = q->shape[2].value();
  Value* k = nullptr;
  Value* v = nullptr;
  int64_t d = 0;
  if (c.has_input(1) != c.has_input(2)) {
    c.invalid("key and value come together (both absent: query packs Q, K and V)");
  }
  if (!c.has_input(1)) {
    if (hidden % (N + 2 * Nkv) != 0) {
      c.invalid("a packed query's hidden size " + std::to_string(hidden) +
                " must be (num_heads + 2 kv_num_heads) = " + std::to_string(N + 2 * Nkv) +
                " times the head size");
    }
    d = hidden / (N + 2 * Nkv);
    k = slice_axis(c, q, 2, N * d, (N + Nkv) * d);
    v = slice_axis(c, q, 2, (N + Nkv) * d, (N + 2 * Nkv) * d);
    q = slice_axis(c, q, 2, 0, N * d);
  } else {
    if (hidden % N != 0) {
      c.invalid("query's hidden size " + std::to_string(hidden) + " must be a multiple of " +
                "num_heads " + std::to_string(N));
    }
    d = hidden / N;
    k = c.value(1);
    v = c.value(2);
    const Shape want{q->shape[0], q->shape[1], Dim(Nkv * d)};
    if (k->shape != want || v->shape != want) {
      c.invalid("key and value must be [batch, sequence, kv_num_heads x head size] = " +
                shape_str(want) + ", got " + shape_str(k->shape) + " and " + shape_str(v->shape));
    }
  }
  q = split_heads(c, q, N, "query");
  k = split_heads(c, k, Nkv, "key");
  v = split_heads(c, v, Nkv, "value");
  const Dim B = q->shape[0], S = q->shape[2];
  if (c.has_input(3) != c.has_input(4)) c.invalid("past_key and past_value come together");
  Dim P(int64_t(0));
  Value* past_k = nullptr;
  Value* past_v = nullptr;
  if (c.has_input(3)) {
    past_k = c.value(3);
    past_v = c.value(4);
    const Shape& ps = past_k->shape;
    if (ps.size() != 4 || ps[0] != B || ps[1] != Dim(Nkv) || ps[3] != Dim(d) ||
        past_v->shape != ps) {
      c.invalid("past_key and past_value must be [batch, kv_num_heads, past, head size] = [" +
                B.str() + ", " + std::to_string(Nkv) + ", P, " + std::to_string(d) + "], got " +
                shape_str(ps) + " and " + shape_str(past_v->shape));
    }
    P = ps[2];
  }
  // Query s's position: P + s, unless position_ids gives it.
  Value* after = c.reshape_to(arange(c, S), {Dim(1), S});
  if (!(P == Dim(int64_t(0)))) after = c.emit(OpKind::Add, {after, c.dim_scalar(P)});
  if (c.attr_int("do_rotary", 0) != 0) {
    if (!c.has_input(7) || !c.has_input(8)) c.invalid("do_rotary needs cos_cache and sin_cache");
    Value* cos = c.value(7);
    Value* sin = c.value(8);
    if (cos->shape.size() != 2 || cos->shape != sin->shape || !cos->shape[1].is_static() ||
        2 * cos->shape[1].value() > d) {
      c.invalid("cos_cache and sin_cache must be one [positions, rotary / 2] shape of at most " +
                std::to_string(d / 2) + " columns (half the head size), got " +
                shape_str(cos->shape) + " and " + shape_str(sin->shape));
    }
    Value* pos = after;
    if (c.has_input(9)) {
      pos = c.value(9);
      if (pos->dtype != DType::i64 || pos->shape.size() != 2 || pos->shape[1] != S ||
          (pos->shape[0] != B && pos->shape[0] != Dim(1))) {
        c.invalid("position_ids must be int64 [batch, sequence], got " +
                  std::string(dtype_name(pos->dtype)) + shape_str(pos->shape));
      }
    }
    const bool pairs = c.attr_int("rotary_interleaved", 0) != 0;
    const int64_t rotary = 2 * cos->shape[1].value();
    q = rotate(c, q, false, pos, cos, sin, pairs, rotary);
    k = rotate(c, k, false, pos, cos, sin, pairs, rotary);
  } else {
    c.ignore_attr("rotary_interleaved");
  }
  if (past_k) {
    k = c.emit(OpKind::Concat, {past_k, k}, {{"axis", int64_t(2)}});
    v = c.emit(OpKind::Concat, {past_v, v}, {{"axis", int64_t(2)}});
  }
  if (c.output_used(1)) c.set_output(1, k);
  if (c.output_used(2)) c.set_output(2, v);
  const Dim T = k->shape[2];
  // The lengths, checked at run time.
  const IValue& lens = c.input(5);
  const IValue& total = c.input(6);
  if (lens.dtype != DType::i32 || lens.shape.size() != 1 || lens.shape[0] != B) {
    c.invalid("seqlens_k must be int32 [batch] = [" + B.str() + "], got " +
              std::string(dtype_name(lens.dtype)) + shape_str(lens.shape));
  }
  if (total.dtype != DType::i32 || !(total.shape.empty() || total.shape == Shape{Dim(1)})) {
    c.invalid("total_sequence_length must be one int32, got " +
              std::string(dtype_name(total.dtype)) + shape_str(total.shape));
  }
  Value* seqlens = cast_value(c, c.value(5), DType::i64);
  auto one = [&](Value* x) { return c.reshape_to(x, {Dim(1)}); };
  Value* facts = c.emit(OpKind::Concat,
                        {one(cast_value(c, c.value(6), DType::i64)), one(c.dim_scalar(P)),
                         one(c.dim_scalar(S)), seqlens},
                        {{"axis", int64_t(0)}});
  c.emit_host(facts, gqa_lengths_check(c.name()));
  // The keys left out besides those after the query's position (attend's causal mask): past the
  // sequence's length, before its window.
  const DType dt = q->dtype;
  Value* t = c.reshape_to(arange(c, T), {Dim(1), Dim(1), Dim(1), T});
  Value* s = c.reshape_to(after, {Dim(1), Dim(1), S, Dim(1)});
  const double ninf = -std::numeric_limits<double>::infinity();
  Value* padded = c.emit(OpKind::Greater, {t, c.reshape_to(seqlens, {B, Dim(1), Dim(1), Dim(1)})});
  Value* add = c.emit(OpKind::Where, {padded, c.scalar(ninf, dt), c.scalar(0, dt)});
  const int64_t window = c.attr_int("local_window_size", -1);
  if (window > 0) {
    Value* first = c.emit(OpKind::Sub, {s, c.scalar(double(window - 1), DType::i64)});
    add = c.emit(OpKind::Where, {c.emit(OpKind::Less, {t, first}), c.scalar(ninf, dt), add});
  }
  // Each K and V head serves N / Nkv query heads: [B, Nkv, T, d] -> [B, N, T, d].
  auto share = [&](Value* x) {
    if (N == Nkv) return x;
    Value* u = c.reshape_to(x, {B, Dim(Nkv), Dim(1), T, Dim(d)});
    u = c.emit(OpKind::Expand, {u}, {{"shape", std::vector<int64_t>{1, 1, N / Nkv, 1, 1}}});
    return c.reshape_to(u, {B, Dim(N), T, Dim(d)});
  };
  MaskSpec m;
  m.bias_input = 10;
  m.causal = true;  // keys t > P + s: T - S is P
  m.softcap = c.attr_float("softcap", 0.0);
  m.add = add;
  c.set_output(0, attend(c, q, share(k), share(v), scale_attr(c, d), m));
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
  microsoft["GroupQueryAttention"] = group_query_attention;
}

}  // namespace ubfuse::onnx_import
