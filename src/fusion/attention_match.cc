#include "fusion/attention_match.h"

#include <algorithm>
#include <array>

namespace ubfuse::fusion {

namespace {

constexpr size_t kMaxSteps = 3;

bool is_scalar(const Value* v) { return is_static(v->shape) && numel(static_sizes(v->shape)) == 1; }

bool is_matrix_matmul(const Node* n) {
  return n && n->op == OpKind::MatMul && n->inputs.size() == 2 && n->inputs[0]->shape.size() >= 2 &&
         n->inputs[1]->shape.size() >= 2;
}

// The chain input of step n (the value that leads back to the scores), or null when n is no step.
// For an Add either input may be the chain; `first` picks which one is tried.
const Value* chain_input(const Node* n, bool first) {
  if (n->inputs.size() != 2 && n->op != OpKind::Where) return nullptr;
  const Value* a = n->inputs[0];
  const Value* b = n->inputs[1];
  if (n->op == OpKind::Div) return first && is_scalar(b) ? a : nullptr;
  if (n->op == OpKind::Mul) return !first ? nullptr : is_scalar(b) ? a : is_scalar(a) ? b : nullptr;
  if (n->op == OpKind::Add) return first ? a : b;
  if (n->op == OpKind::Where && n->inputs.size() == 3) {  // (cond, x, y): one branch a scalar
    const Value* x = n->inputs[1];
    const Value* y = n->inputs[2];
    if (first) return is_scalar(y) ? x : nullptr;
    return is_scalar(x) ? y : nullptr;
  }
  return nullptr;
}

// v as x's heads repeated (HeadRepeat), read by `reader` alone, with static head counts: x
// [..., Hkv, L, D] -> [..., Hkv, 1, L, D] -> [..., Hkv, g, L, D] -> [..., Hkv * g, L, D].
HeadRepeat match_head_repeat(const Value* v, const Node* reader, size_t out_rank,
                             const std::function<bool(const Value*, const Node*)>& only_reader) {
  HeadRepeat r;
  const Node* merge = v->producer;
  if (!merge || merge->op != OpKind::Reshape || !only_reader(v, reader)) return {};
  const Value* e = merge->inputs[0];
  const Node* expand = e->producer;
  if (!expand || expand->op != OpKind::Expand || !only_reader(e, merge)) return {};
  const Value* u = expand->inputs[0];
  const Node* unsq = u->producer;
  if (!unsq || unsq->op != OpKind::Reshape || !only_reader(u, expand)) return {};
  const Value* x = unsq->inputs[0];
  const size_t n = x->shape.size();
  // The kernel maps heads by the output's batch dims: K/V of the output's rank only.
  if (n < 3 || u->shape.size() != n + 1 || e->shape.size() != n + 1 || v->shape.size() != n ||
      out_rank != n || x->dtype != v->dtype) {
    return {};
  }
  const Shape& xs = x->shape;
  const Dim& hkv = xs[n - 3];
  const Dim& g = e->shape[n - 2];
  if (!hkv.is_static() || !g.is_static()) return {};
  for (size_t i = 0; i + 3 < n; i++) {
    if (!(u->shape[i] == xs[i]) || !(e->shape[i] == xs[i]) || !(v->shape[i] == xs[i])) return {};
  }
  const bool ok = u->shape[n - 3] == hkv && u->shape[n - 2] == Dim(int64_t(1)) &&
                  u->shape[n - 1] == xs[n - 2] && u->shape[n] == xs[n - 1] &&
                  e->shape[n - 3] == hkv && e->shape[n - 1] == xs[n - 2] &&
                  e->shape[n] == xs[n - 1] && v->shape[n - 3] == Dim(hkv.value() * g.value()) &&
                  v->shape[n - 2] == xs[n - 2] && v->shape[n - 1] == xs[n - 1];
  if (!ok) return {};
  r.unsqueeze = unsq;
  r.expand = expand;
  r.merge = merge;
  return r;
}

// Whether perm keeps every axis but the last three and maps them as `last3` (positions r-3, r-2,
// r-1 read axes r-3 + last3[i]).
bool is_perm_of_last3(const std::vector<int64_t>& perm, const std::array<int64_t, 3>& last3) {
  const int64_t r = int64_t(perm.size());
  if (r < 3) return false;
  for (int64_t i = 0; i + 3 < r; i++) {
    if (perm[size_t(i)] != i) return false;
  }
  for (int64_t i = 0; i < 3; i++) {
    if (perm[size_t(r - 3 + i)] != r - 3 + last3[size_t(i)]) return false;
  }
  return true;
}

// [.., L, H, D] -> [.., H, L, D] and [.., L, H, D] -> [.., H, D, L] (K^T).
constexpr std::array<int64_t, 3> kHeadsPerm = {1, 0, 2};
constexpr std::array<int64_t, 3> kHeadsToKtPerm = {1, 2, 0};

// Whether tr is a Transpose of a dtype-t value by `last3` (a perm attribute).
bool is_heads_transpose(const Node* tr, const std::array<int64_t, 3>& last3, DType t) {
  return tr && tr->op == OpKind::Transpose && tr->has_attr("perm") && tr->inputs[0]->dtype == t &&
         is_perm_of_last3(tr->attr_ints("perm"), last3);
}

// The Transpose producing v with `last3`, of dtype t, when `reader` alone reads v.
const Node* transpose_of(const Value* v, const Node* reader, const std::array<int64_t, 3>& last3,
                         DType t,
                         const std::function<bool(const Value*, const Node*)>& only_reader) {
  const Node* tr = v->producer;
  return is_heads_transpose(tr, last3, t) && only_reader(v, reader) ? tr : nullptr;
}

// The Gather choosing part p of [.., L, P, H, D] (axis -3, a scalar integer index) that produces
// x [.., L, H, D], when `reader` alone reads x.
const Node* part_of(const Value* x, const Node* reader,
                    const std::function<bool(const Value*, const Node*)>& only_reader) {
  const Node* ga = x->producer;
  if (!ga || ga->op != OpKind::Gather || !only_reader(x, reader)) return nullptr;
  const Value* y = ga->inputs[0];
  const Value* idx = ga->inputs[1];
  const size_t n = x->shape.size();
  if (n < 3 || y->shape.size() != n + 1 || y->dtype != x->dtype || !idx->shape.empty() ||
      (idx->dtype != DType::i64 && idx->dtype != DType::i32) ||
      ga->attr_int("axis", 0) != int64_t(n) - 2 || !y->shape[n - 2].is_static()) {
    return nullptr;
  }
  for (size_t i = 0; i < n; i++) {
    if (!(y->shape[i < n - 2 ? i : i + 1] == x->shape[i])) return nullptr;
  }
  return ga;
}

}  // namespace

std::vector<const Node*> AttentionMatch::nodes() const {
  std::vector<const Node*> out;
  for (const Node* p : {q_part, k_part, v_part}) {
    if (p) out.push_back(p);
  }
  for (const Node* h : {q_heads, k_heads, v_heads}) {
    if (h) out.push_back(h);
  }
  for (const HeadRepeat* r : {&v_repeat, &k_repeat}) {
    if (*r) out.insert(out.end(), {r->unsqueeze, r->expand, r->merge});
  }
  if (k_transpose) out.push_back(k_transpose);
  out.push_back(scores);
  out.insert(out.end(), steps.begin(), steps.end());
  out.push_back(softmax);
  out.push_back(context);
  if (out_heads) out.push_back(out_heads);
  return out;
}

namespace {
// The node before step s in the chain.
const Node* before(const AttentionMatch& m, const Node* s) {
  const auto it = std::find(m.steps.begin(), m.steps.end(), s);
  return it == m.steps.begin() ? m.scores : *(it - 1);
}
}  // namespace

const Value* AttentionMatch::q_input() const {
  if (q_part) return q_part->inputs[0];
  return q_heads ? q_heads->inputs[0] : scores->inputs[0];
}
const Value* AttentionMatch::k_input() const {
  if (k_part) return k_part->inputs[0];
  if (k_repeat) return k_repeat.source();
  if (k_heads) return k_heads->inputs[0];
  return k_transpose ? k_transpose->inputs[0] : scores->inputs[1];
}
const Value* AttentionMatch::v_input() const {
  if (v_part) return v_part->inputs[0];
  if (v_repeat) return v_repeat.source();
  return v_heads ? v_heads->inputs[0] : context->inputs[1];
}

const Value* AttentionMatch::output() const {
  return out_heads ? out_heads->out() : context->out();
}

const Value* AttentionMatch::operand(const Node* s) const {
  if (s->op == OpKind::Where) return s->inputs[0];
  return s->inputs[0]->producer == before(*this, s) ? s->inputs[1] : s->inputs[0];
}

bool AttentionMatch::keeps_when_true(const Node* s) const {
  return s->inputs[1]->producer == before(*this, s);
}

const Value* AttentionMatch::fill(const Node* s) const {
  return keeps_when_true(s) ? s->inputs[2] : s->inputs[1];
}

void match_output_heads(AttentionMatch& m, const Node* reader,
                        const std::function<bool(const Value*, const Node*)>& only_reader) {
  const Value* c = m.context->out();
  if (is_heads_transpose(reader, kHeadsPerm, c->dtype) && reader->inputs[0] == c &&
      only_reader(c, reader)) {
    m.out_heads = reader;
  }
}

std::optional<AttentionMatch> match_attention(
    const Node* context, const std::function<bool(const Value*, const Node*)>& only_reader) {
  if (!is_matrix_matmul(context)) return std::nullopt;
  AttentionMatch m;
  m.context = context;
  const Value* p = context->inputs[0];
  if (!p->producer || p->producer->op != OpKind::Softmax || !only_reader(p, context)) {
    return std::nullopt;
  }
  m.softmax = p->producer;
  // Back from the softmax's input to the scores' MatMul through at most kMaxSteps steps.
  std::vector<const Node*> rev;
  std::function<bool(const Value*, const Node*)> walk = [&](const Value* x, const Node* reader) {
    const Node* n = x->producer;
    if (!n || !only_reader(x, reader)) return false;
    if (is_matrix_matmul(n)) {
      m.scores = n;
      return true;
    }
    if (rev.size() == kMaxSteps) return false;
    for (bool first : {true, false}) {
      const Value* in = chain_input(n, first);
      if (!in) continue;
      rev.push_back(n);
      if (walk(in, n)) return true;
      rev.pop_back();
    }
    return false;
  };
  if (!walk(m.softmax->inputs[0], m.softmax)) return std::nullopt;
  m.steps.assign(rev.rbegin(), rev.rend());
  // One element type, a float one; every step keeps the scores' shape (a mask only broadcasts).
  const Value* s = m.scores->out();
  const DType t = s->dtype;
  if (!is_float(t)) return std::nullopt;
  for (const Value* v :
       std::initializer_list<const Value*>{m.scores->inputs[0], m.scores->inputs[1],
                                           context->inputs[1], context->out(), m.softmax->out()}) {
    if (v->dtype != t) return std::nullopt;
  }
  const std::vector<const Node*> chain = m.nodes();
  for (const Node* st : m.steps) {
    const Node* from = m.operand(st)->producer;
    if (std::find(chain.begin(), chain.end(), from) != chain.end()) return std::nullopt;
    const DType want = st->op == OpKind::Where ? DType::boolean : m.operand(st)->dtype;
    if (!(st->out()->shape == s->shape) || m.operand(st)->dtype != want) return std::nullopt;
    if (!is_float(want) && want != DType::boolean) return std::nullopt;
    if (st->op == OpKind::Where && m.fill(st)->dtype != t) return std::nullopt;
    if (m.operand(st)->shape.size() > s->shape.size()) return std::nullopt;
  }
  if (!(m.softmax->out()->shape == s->shape)) return std::nullopt;
  // K^T = Transpose(K) swapping the last two axes, read by the scores alone.
  const Value* kt = m.scores->inputs[1];
  const Node* tr = kt->producer;
  if (tr && tr->op == OpKind::Transpose && tr->has_attr("perm") && only_reader(kt, m.scores)) {
    const auto perm = tr->attr_ints("perm");
    const int64_t r = int64_t(perm.size());
    bool swap = r >= 2 && perm[size_t(r - 1)] == r - 2 && perm[size_t(r - 2)] == r - 1;
    for (int64_t i = 0; i + 2 < r && swap; i++) swap = perm[size_t(i)] == i;
    if (swap && tr->inputs[0]->dtype == t) m.k_transpose = tr;
  }
  if (!m.k_transpose) {
    m.k_transpose = transpose_of(kt, m.scores, kHeadsToKtPerm, t, only_reader);
    m.k_transpose_heads = m.k_transpose != nullptr;
  }
  // Grouped-query heads: K (as rows) and V repeated from fewer heads.
  if (m.k_transpose && !m.k_transpose_heads)
    m.k_repeat = match_head_repeat(m.k_transpose->inputs[0], m.k_transpose,
                                   context->out()->shape.size(), only_reader);
  m.v_repeat =
      match_head_repeat(context->inputs[1], context, context->out()->shape.size(), only_reader);
  // Head Transposes read in place (the heads layout needs rank 3 or more, as the scores have).
  if (s->shape.size() >= 3) {
    m.q_heads = transpose_of(m.scores->inputs[0], m.scores, kHeadsPerm, t, only_reader);
    if (m.k_transpose && !m.k_transpose_heads && !m.k_repeat) {
      m.k_heads = transpose_of(m.k_transpose->inputs[0], m.k_transpose, kHeadsPerm, t, only_reader);
    }
    if (!m.v_repeat)
      m.v_heads = transpose_of(context->inputs[1], context, kHeadsPerm, t, only_reader);
    if (m.q_heads) m.q_part = part_of(m.q_heads->inputs[0], m.q_heads, only_reader);
    const Node* k_reader = m.k_heads ? m.k_heads : m.k_transpose_heads ? m.k_transpose : nullptr;
    if (k_reader) m.k_part = part_of(k_reader->inputs[0], k_reader, only_reader);
    if (m.v_heads) m.v_part = part_of(m.v_heads->inputs[0], m.v_heads, only_reader);
  }
  int masks = 0;
  for (const Node* st : m.steps) masks += st->op == OpKind::Add || st->op == OpKind::Where;
  if (masks > 1) return std::nullopt;  // the kernel reads one mask
  return m;
}

}  // namespace ubfuse::fusion
