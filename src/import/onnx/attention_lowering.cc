// The attention core of onnxruntime's attention ops (attention_lowering.h).
#include "import/onnx/attention_lowering.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace ubfuse::onnx_import {

namespace {

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

}  // namespace

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

Value* merge_heads(NodeCtx& c, Value* x) {
  Value* t = c.emit(OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const Shape& s = t->shape;
  return c.reshape_to(t, Shape{s[0], s[1], Dim::mul(s[2], s[3])});
}

Value* arange(NodeCtx& c, const Dim& n) {
  if (n.is_static()) return positions(c, {n.value()});
  return c.emit(OpKind::Range, {c.scalar(0, DType::i64), c.dim_scalar(n), c.scalar(1, DType::i64)});
}

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

double scale_attr(NodeCtx& c, int64_t d) {
  const double s = c.attr_float("scale", 0.0);
  return s != 0.0 ? s : 1.0 / std::sqrt(double(d));
}

int64_t heads_attr(NodeCtx& c) {
  const int64_t n = c.attr_int("num_heads", 0);
  if (n < 1) c.invalid("needs the attribute num_heads of at least 1");
  return n;
}

Value* unsqueeze0(NodeCtx& c, Value* x) {
  Shape s{Dim(1)};
  for (const Dim& d : x->shape) s.push_back(d);
  return c.reshape_to(x, s);
}

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

}  // namespace ubfuse::onnx_import
