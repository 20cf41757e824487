#include "codegen/attention_kernel.h"

#include <algorithm>
#include <cstring>

#include "fusion/attention_match.h"
#include "ir/shape_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernel_util.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

// The offset sum_i idx[i] * stride[i] of every index of `batch`, in row-major order.
std::vector<int64_t> strided_offsets(const Sizes& batch, const std::vector<int64_t>& stride) {
  const size_t nb = batch.size();
  std::vector<int64_t> off(size_t(numel(batch)), 0);
  std::vector<int64_t> idx(nb, 0);
  for (int64_t& o : off) {
    for (size_t i = 0; i < nb; i++) o += idx[i] * stride[i];
    for (size_t i = nb; i-- > 0;) {
      if (++idx[i] < batch[i]) break;
      idx[i] = 0;
    }
  }
  return off;
}

// Element offsets of each batch's matrix in an operand of sizes `s` (its last two dims are the
// matrix, the dims before broadcast against `batch` from the right; a size-1 dim repeats).
std::vector<int64_t> batch_offsets(const Sizes& s, const Sizes& batch) {
  const int64_t matrix = s[s.size() - 2] * s.back();
  std::vector<int64_t> stride = broadcast_strides(Sizes(s.begin(), s.end() - 2), batch);
  for (int64_t& st : stride) st *= matrix;
  return strided_offsets(batch, stride);
}

// K's or V's offsets; with `repeat` (grouped-query heads) s is [..., Hkv, L, D] while the batch
// is [..., H]: as [..., Hkv, 1, L, D] against the batch [..., Hkv, H / Hkv], whose order is the
// batch's, so query head h reads x's head h / (H / Hkv).
std::vector<int64_t> kv_offsets(const Sizes& s, const Sizes& batch, bool repeat) {
  if (!repeat) return batch_offsets(s, batch);
  const int64_t hkv = s[s.size() - 3], h = batch.back();
  UBF_CHECK(s.size() == batch.size() + 2 && hkv > 0 && h % hkv == 0,
            "attention: " + sizes_str(s) + " repeated over the heads of " + sizes_str(batch));
  Sizes s1 = s, b1 = batch;
  s1.insert(s1.end() - 2, 1);
  b1.back() = hkv;
  b1.push_back(h / hkv);
  return batch_offsets(s1, b1);
}

// An operand the kernel reads in the heads layout: x [.., L, H, D], or part p of a fused
// projection [.., L, P, H, D] (parts = P), whose rows then lie P * H * D apart.
struct HeadsOperand {
  Sizes x;  // [.., L, H, D]
  int64_t parts = 1, part = 0;
  int64_t row_stride() const { return parts * x[x.size() - 2] * x.back(); }
};

// Offsets of each batch's matrix in x [.., L, H, D] read as [.., H, L, D] (a head Transpose the
// group holds) against the batch [.., H]: the dims before L broadcast as in batch_offsets, head h
// starts h * D in (0 for a single head read by all). Its rows lie H * D apart, or P * H * D as
// part p of P, which starts p * H * D in.
std::vector<int64_t> head_offsets(const HeadsOperand& op, const Sizes& batch) {
  const Sizes& x = op.x;
  const size_t n = x.size();
  UBF_CHECK(n >= 3 && batch.size() >= 1 && (batch.back() == x[n - 2] || x[n - 2] == 1) &&
                batch.size() + 2 >= n,
            "attention: heads layout " + sizes_str(x) + " against the batch " + sizes_str(batch));
  // x in the batch's frame: [batch's leading dims.., L, H, D] (one head broadcasts: stride 0).
  Sizes frame(batch.begin(), batch.end() - 1);
  frame.insert(frame.end(), {x[n - 3], batch.back(), x[n - 1]});
  const std::vector<int64_t> st = broadcast_strides(x, frame);
  const size_t nb = batch.size();
  std::vector<int64_t> stride(nb);
  for (size_t i = 0; i + 1 < nb; i++) stride[i] = st[i] * op.parts;  // dims outside P
  stride[nb - 1] = st[nb];  // H's (frame: nb - 1 leading dims, L, H, D)
  std::vector<int64_t> off = strided_offsets(batch, stride);
  for (int64_t& o : off) o += op.part * x[n - 2] * x[n - 1];
  return off;
}

class AttentionKernel : public Kernel {
 public:
  explicit AttentionKernel(const FusedGroup& g) {
    // The chain as the partitioner grouped it: a value counts when a member produces it.
    const auto in_group = [&](const Value* v, const Node*) {
      return std::find(g.nodes.begin(), g.nodes.end(), v->producer) != g.nodes.end();
    };
    const Node* last = g.nodes.back();
    const bool heads_out = last->op == OpKind::Transpose && last->inputs[0]->producer;
    auto m = fusion::match_attention(heads_out ? last->inputs[0]->producer : last, in_group);
    if (m && heads_out) fusion::match_output_heads(*m, last, in_group);
    UBF_CHECK(
        m.has_value() && m->nodes().size() == g.nodes.size() && bool(m->out_heads) == heads_out,
        "attention group " + g.name + " is no attention chain");
    match_ = *m;
    auto index = [&](const Value* v) {
      const auto it = std::find(g.inputs.begin(), g.inputs.end(), v);
      UBF_CHECK(it != g.inputs.end(), "'" + v->name + "' is no input of " + g.name);
      return int(it - g.inputs.begin());
    };
    q_ = index(m->q_input());
    auto part_index = [&](const Node* ga) { return ga ? index(ga->inputs[1]) : -1; };
    q_part_ = part_index(m->q_part);
    k_part_ = part_index(m->k_part);
    v_part_ = part_index(m->v_part);
    q_heads_ = m->q_heads != nullptr;
    k_heads_ = m->k_in_heads_layout();
    v_heads_ = m->v_heads != nullptr;
    k_rows_ = m->k_transpose != nullptr;
    kt_ = index(m->k_input());
    v_ = index(m->v_input());
    k_repeat_ = bool(m->k_repeat);
    v_repeat_ = bool(m->v_repeat);
    for (const Node* s : m->steps) {
      operands_.push_back(index(m->operand(s)));
      fills_.push_back(s->op == OpKind::Where ? index(m->fill(s)) : -1);
    }
    UBF_CHECK(g.outputs.size() == 1 && g.outputs[0] == m->output(),
              "attention group " + g.name + " must output only its context");
    out_heads_ = heads_out;
    who_ = g.name + " (" + m->scores->name + " .. " + m->context->name + ")";
  }

  // Operand t in the heads layout; with a part Gather (its index input `part`, -1 without) t is
  // the projection [.., L, P, H, D] and the index picks p.
  HeadsOperand heads(const Tensor& t, int part, const std::vector<Tensor>& in) const {
    HeadsOperand op;
    op.x = t.sizes();
    if (part < 0) return op;
    op.parts = t.dim(-3);
    op.x.erase(op.x.end() - 3);
    const int64_t p = int64_t(in[size_t(part)].get(0));
    op.part = p < 0 ? p + op.parts : p;
    if (op.part < 0 || op.part >= op.parts) {
      cpu::kernel_fail(who_,
                       "part index " + std::to_string(p) + " out of range for " +
                           sizes_str(t.sizes()) + " (" + std::to_string(op.parts) + " parts)",
                       "Gather's index lies in [-P, P) for the projection's P parts on axis -3");
    }
    return op;
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ExecContext& ctx) const override {
    const Tensor& q = in[size_t(q_)];
    const Tensor& kt = in[size_t(kt_)];
    const Tensor& v = in[size_t(v_)];
    Tensor& o = out.at(0);
    const int r = o.rank();
    // The output [.., Lq, Dv], or [.., Lq, H, Dv] with its head Transpose in the group.
    const int64_t o_rows = o.dim(out_heads_ ? -3 : -2);
    // kt is K^T [.., D, Lk], or K [.., Lk, D] when the group holds the Transpose between them;
    // an operand in the heads layout is [.., L, H, D] (L one axis further out), and a part of a
    // projection [.., L, P, H, D] (L two axes further out).
    const HeadsOperand qh = heads(q, q_part_, in), kh = heads(kt, k_part_, in),
                       vh = heads(v, v_part_, in);
    const int64_t lq = q_heads_ ? qh.x[qh.x.size() - 3] : q.dim(-2), d = q.dim(-1),
                  lk = k_heads_  ? kh.x[kh.x.size() - 3]
                       : k_rows_ ? kt.dim(-2)
                                 : kt.dim(-1),
                  dv = v.dim(-1);
    const int64_t v_rows = v_heads_ ? vh.x[vh.x.size() - 3] : v.dim(-2);
    if (kt.dim(k_rows_ ? -1 : -2) != d || v_rows != lk || o_rows != lq || o.dim(-1) != dv) {
      cpu::kernel_fail(who_, "operands do not chain: " + cpu::tensors_str({q, kt, v}),
                       k_rows_ ? "Q [.., Lq, D], K [.., Lk, D] and V [.., Lk, Dv]"
                               : "Q [.., Lq, D], K^T [.., D, Lk] and V [.., Lk, Dv]");
    }
    if (lk == 0) {  // no keys: the second product sums nothing
      std::memset(o.data(), 0, o.nbytes());
      return;
    }
    Sizes batch(o.sizes().begin(), o.sizes().end() - 2);
    if (out_heads_) batch.back() = o.dim(-2);  // [.., Lq, H] -> [.., H]
    cpu::AttentionProblem p;
    p.dtype = o.dtype();
    p.q = q.data();
    p.kt = kt.data();
    p.v = v.data();
    p.out = o.data();
    p.batches = numel(batch);
    p.lq = lq;
    p.lk = lk;
    p.d = d;
    p.dv = dv;
    if (q_heads_) {
      p.q_off = head_offsets(qh, batch);
      p.q_ld = qh.row_stride();
    } else {
      p.q_off = batch_offsets(q.sizes(), batch);
    }
    // K (as rows) and V may lead larger buffers along their rows (a KV cache's rows so far):
    // their matrices then lie the buffer's row count apart, their rows still D apart.
    auto storage = [&](int i, const Tensor& t) -> const Sizes& {
      if (!ctx.in_storage || (*ctx.in_storage)[size_t(i)].empty()) return t.sizes();
      return (*ctx.in_storage)[size_t(i)];
    };
    p.kt_off = k_heads_ ? head_offsets(kh, batch) : kv_offsets(storage(kt_, kt), batch, k_repeat_);
    p.k_ld = k_heads_ ? kh.row_stride() : 0;
    p.k_rows = k_rows_;
    p.v_off = v_heads_ ? head_offsets(vh, batch) : kv_offsets(storage(v_, v), batch, v_repeat_);
    p.v_ld = v_heads_ ? vh.row_stride() : 0;
    if (out_heads_) {
      p.out_off = head_offsets(HeadsOperand{o.sizes()}, batch);
      p.out_ld = o.dim(-2) * dv;
    } else {
      p.out_off = batch_offsets(o.sizes(), batch);
    }
    for (size_t i = 0; i < match_.steps.size(); i++) {
      const Node* s = match_.steps[i];
      const Tensor& t = in[size_t(operands_[i])];
      cpu::AttentionStep st;
      if (s->op == OpKind::Add || s->op == OpKind::Where) {
        st.kind = s->op == OpKind::Add ? cpu::AttentionStep::kAddMask : cpu::AttentionStep::kWhere;
        if (s->op == OpKind::Where) {
          st.scalar = float(in[size_t(fills_[i])].get(0));
          st.keep_when_true = match_.keeps_when_true(s);
        }
        // The mask's dims, padded with leading 1s to the scores' rank.
        Sizes ms(size_t(r) - std::min<size_t>(size_t(r), t.sizes().size()), 1);
        ms.insert(ms.end(), t.sizes().begin(), t.sizes().end());
        const int64_t mr = ms[size_t(r) - 2], mc = ms[size_t(r) - 1];
        if ((mr != 1 && mr != lq) || (mc != 1 && mc != lk)) {
          cpu::kernel_fail(who_, "mask '" + s->name + "' " + sizes_str(t.sizes()) +
                                     " does not broadcast to the scores' " + std::to_string(lq) +
                                     " x " + std::to_string(lk));
        }
        p.mask = t.data();
        p.mask_dtype = t.dtype();
        p.mask_col_stride = ms[size_t(r) - 1] == 1 ? 0 : 1;
        p.mask_row_stride = ms[size_t(r) - 2] == 1 ? 0 : ms[size_t(r) - 1];
        p.mask_off = batch_offsets(ms, batch);
      } else {
        st.kind = s->op == OpKind::Mul ? cpu::AttentionStep::kMul : cpu::AttentionStep::kDiv;
        st.scalar = float(t.get(0));
      }
      p.steps.push_back(st);
    }
    cpu::run_attention(p, *ctx.pool);
  }
  bool reads_pitched(size_t i, int axis, int rank) const override {
    const bool kv = (int(i) == kt_ && k_rows_ && !k_heads_) || (int(i) == v_ && !v_heads_);
    bool elsewhere = int(i) == q_;  // the same value as Q or a step's operand is read densely
    for (size_t k = 0; k < operands_.size(); k++) {
      elsewhere |= operands_[k] == int(i) || fills_[k] == int(i);
    }
    return kv && !elsewhere && axis == rank - 2;
  }

 private:
  fusion::AttentionMatch match_;
  int q_ = -1, kt_ = -1, v_ = -1;
  bool k_rows_ = false;  // kt_ is K (rows), the Transpose to K^T being in the group
  // Q, K, V in the heads layout [.., L, H, D], their head Transposes in the group.
  bool q_heads_ = false, k_heads_ = false, v_heads_ = false;
  bool k_repeat_ = false, v_repeat_ = false;     // K, V: fewer heads, each read by g query heads
  int q_part_ = -1, k_part_ = -1, v_part_ = -1;  // a part Gather's index among the inputs
  bool out_heads_ = false;                       // the output in the heads layout [.., Lq, H, Dv]
  std::vector<int> operands_;  // per step: its scalar, mask or condition among the inputs
  std::vector<int> fills_;     // per Where step: its scalar among the inputs
  std::string who_;
};

}  // namespace

std::unique_ptr<Kernel> make_attention_kernel(const FusedGroup& g) {
  return std::make_unique<AttentionKernel>(g);
}

}  // namespace ubfuse
