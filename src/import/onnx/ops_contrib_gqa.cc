// com.microsoft GroupQueryAttention, the attention onnxruntime's model builder writes into the
// LLaMA-style models onnxruntime-genai runs, lowered onto the attention core
// (attention_lowering.h), with a check at run time of the cache lengths the lowering assumes.
#include <limits>
#include <string>
#include <vector>

#include "import/onnx/attention_lowering.h"
#include "import/onnx/registry.h"
#include "ubfuse/error.h"

namespace ubfuse::onnx_import {

namespace {

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

}  // namespace

void add_contrib_gqa_ops(ConverterMap& microsoft) {
  microsoft["GroupQueryAttention"] = group_query_attention;
}

}  // namespace ubfuse::onnx_import
