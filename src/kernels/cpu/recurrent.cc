// RNN, GRU and LSTM (ir/recurrent.h) in f32. The input projections of every step, X W^T + Wb,
// are one oneDNN matmul per direction (W read through transposed strides). The recurrence then
// walks the steps: per step, the batch entries' h R^T + Rb (recurrent_steps.cc: R^T packed in
// panels streamed in order, each vector of it serving a block of entries), then the gates,
// activated a row at a time. Tasks are a direction and a block of batch entries. bf16 and f16
// operands are widened once per call and the outputs narrowed at the end.
#include "ir/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/recurrent_steps.h"

namespace ubfuse::cpu {
namespace {

namespace rc = recurrent;
using dt = dnnl::memory::data_type;

std::vector<float> widen(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  convert_floats(t.dtype(), t.data(), DType::f32, v.data(), t.numel());
  return v;
}

// c [m, n] = a [m, k] b^T, b given as [n, k] rows (oneDNN reads it through transposed strides).
class ProjectMatMul {
 public:
  void run(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
           int threads) const {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      std::fill(c, c + m * n, 0.0f);
      return;
    }
    std::shared_ptr<dnnl::matmul> p;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto& slot = cache_[std::make_tuple(m, k, n)];
      if (!slot) {
        if (cache_.size() > 64) cache_.clear();
        dnnl::matmul::desc d(dnnl_plain_md({m, k}, dt::f32),
                             dnnl::memory::desc({k, n}, dt::f32, dnnl::memory::dims{1, k}),
                             dnnl_plain_md({m, n}, dt::f32));
        slot = std::make_shared<dnnl::matmul>(dnnl::matmul::primitive_desc(d, dnnl_cpu_engine()));
      }
      p = slot;
    }
    dnnl::engine& eng = dnnl_cpu_engine();
    dnnl::stream st(eng);
    DnnlThreads t(m * k * n, threads);
    p->execute(st, {{DNNL_ARG_SRC,
                     dnnl::memory(dnnl_plain_md({m, k}, dt::f32), eng, const_cast<float*>(a))},
                    {DNNL_ARG_WEIGHTS,
                     dnnl::memory(dnnl::memory::desc({k, n}, dt::f32, dnnl::memory::dims{1, k}),
                                  eng, const_cast<float*>(b))},
                    {DNNL_ARG_DST, dnnl::memory(dnnl_plain_md({m, n}, dt::f32), eng, c)}});
    st.wait();
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::tuple<int64_t, int64_t, int64_t>, std::shared_ptr<dnnl::matmul>> cache_;
};

class RecurrentKernel : public KernelBase {
 public:
  explicit RecurrentKernel(const Node& n)
      : KernelBase(n),
        G_(rc::gates(n.op)),
        H_(n.attr_int("hidden_size", 0)),
        dir_(n.attr_int("direction", 0)),
        layout_(n.attr_int("layout", 0)),
        per_(rc::acts_per_direction(n.op)),
        clip_(float(n.attr_float("clip", 0.0))),
        lbr_(n.op == OpKind::GRU && n.attr_int("linear_before_reset", 0) != 0),
        coupled_(n.op == OpKind::LSTM && n.attr_int("input_forget", 0) != 0),
        acts_(n.attr_ints("activations")),
        opt_{rc::input_of(n, 3), rc::input_of(n, 4), rc::input_of(n, 5), rc::input_of(n, 6),
             rc::input_of(n, 7)} {
    // Constant W and R (a model's weights) in f32, and R^T packed, once rather than per call.
    const Node* wn = n.inputs[1]->producer;
    const Node* rn = n.inputs[2]->producer;
    if (wn && wn->op == OpKind::Constant && wn->payload.defined() && rn &&
        rn->op == OpKind::Constant && rn->payload.defined() && rn->payload.rank() == 3) {
      w_sizes_ = wn->payload.sizes();
      r_sizes_ = rn->payload.sizes();
      w_const_ = widen(wn->payload);
      r_panel_ = recur_panel_width();
      r_packed_const_ = packed_r(widen(rn->payload), r_sizes_[0]);
    }
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    const Tensor &x = in[0], &w = in[1], &r = in[2];
    const int64_t dirs = dir_ == 2 ? 2 : 1, H = H_, G = G_, GH = G * H;
    if (x.rank() != 3) fail("X must be rank 3, got " + tensors_str({x}));
    const int64_t S = x.dim(layout_ == 0 ? 0 : 1), N = x.dim(layout_ == 0 ? 1 : 0), I = x.dim(2);
    const Sizes ys = layout_ == 0 ? Sizes{S, dirs, N, H} : Sizes{N, S, dirs, H};
    const Sizes hs = layout_ == 0 ? Sizes{dirs, N, H} : Sizes{N, dirs, H};
    bool ok = w.sizes() == Sizes{dirs, GH, I} && r.sizes() == Sizes{dirs, GH, H} &&
              out.size() == size_t(op_ == OpKind::LSTM ? 3 : 2) && out[0].sizes() == ys;
    for (size_t o = 1; ok && o < out.size(); o++) ok = out[o].sizes() == hs;
    if (!ok) {
      fail("operands " + tensors_str({x, w, r}) + " and outputs " + tensors_str(out) +
           " do not match hidden_size " + std::to_string(H) + " and " + std::to_string(dirs) +
           " direction(s)");
    }
    auto opt = [&](int k) -> const Tensor* { return opt_[k] < 0 ? nullptr : &in[size_t(opt_[k])]; };
    const Tensor *bt = opt(0), *lt = opt(1), *h0t = opt(2), *c0t = opt(3), *pt = opt(4);
    std::vector<int64_t> lens(size_t(N), S);
    for (int64_t b = 0; lt && b < N; b++) {
      lens[size_t(b)] = int64_t(lt->get(b));
      if (lens[size_t(b)] < 0 || lens[size_t(b)] > S) {
        fail("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[size_t(b)]) +
                 " is outside [0, " + std::to_string(S) + "]",
             "each batch entry's length is at most X's sequence length");
      }
    }
    const bool cached = !w_const_.empty() && w.sizes() == w_sizes_ && r.sizes() == r_sizes_ &&
                        r_panel_ == recur_panel_width();
    // X read in place when f32; the other operands are small next to it.
    std::vector<float> xf;
    const float* xp =
        x.dtype() == DType::f32 ? static_cast<const float*>(x.data()) : (xf = widen(x)).data();
    const std::vector<float> wf = cached ? std::vector<float>() : widen(w),
                             bf = bt ? widen(*bt) : std::vector<float>(size_t(dirs * 2 * GH), 0),
                             h0 = h0t ? widen(*h0t) : std::vector<float>(),
                             c0 = c0t ? widen(*c0t) : std::vector<float>(),
                             pf = pt ? widen(*pt) : std::vector<float>();
    // X W^T per direction, rows in X's order ((t, n), or (n, t) with layout 1); R^T packed per
    // direction.
    std::vector<float> xw(size_t(dirs * S * N * GH));
    const float* wp = cached ? w_const_.data() : wf.data();
    for (int64_t d = 0; d < dirs; d++) {
      proj_.run(xp, wp + d * GH * I, xw.data() + d * S * N * GH, S * N, I, GH, pool.size());
    }
    const std::vector<float> rt_call = cached ? std::vector<float>() : packed_r(widen(r), dirs);
    const std::vector<float>& rt = cached ? r_packed_const_ : rt_call;
    // The outputs written in place when f32, else in f32 and narrowed at the end. Y is zero past
    // each entry's length.
    std::vector<float> narrow[3];
    float* res[3] = {nullptr, nullptr, nullptr};
    for (size_t o = 0; o < out.size(); o++) {
      if (out[o].dtype() == DType::f32) {
        res[o] = static_cast<float*>(out[o].data());
      } else {
        narrow[o].resize(size_t(out[o].numel()));
        res[o] = narrow[o].data();
      }
    }
    std::fill_n(res[0], out[0].numel(), 0.0f);
    // A direction and a block of batch entries per task, at least one task per thread.
    const int64_t per_dir = std::max<int64_t>(1, int64_t(pool.size()) / dirs);
    const int64_t nb = std::max<int64_t>(1, (N + per_dir - 1) / per_dir);
    const int64_t blocks = (N + nb - 1) / nb;
    const Inputs ins{&xw, &rt, &bf, &h0, &c0, &pf, &lens};
    pool.parallel_for(dirs * blocks, 1, [&](int64_t q0, int64_t q1, int) {
      for (int64_t q = q0; q < q1; q++) {
        const int64_t d = q / blocks, b0 = q % blocks * nb;
        entries(d, b0, std::min(N, b0 + nb), S, N, ins, res[0], res[1], res[2]);
      }
    });
    for (size_t o = 0; o < out.size(); o++) {
      if (!narrow[o].empty())
        convert_floats(DType::f32, res[o], out[o].dtype(), out[o].data(), out[o].numel());
    }
  }

 private:
  struct Inputs {
    const std::vector<float>*xw, *rt, *bias, *h0, *c0, *peep;
    const std::vector<int64_t>* lens;
  };

  // The column ranges of R^T one step's product reads together: GRU without linear_before_reset
  // multiplies h by z's and r's columns, then r (.) h by the candidate's.
  std::vector<std::pair<int64_t, int64_t>> segments() const {
    if (op_ == OpKind::GRU && !lbr_) return {{0, 2 * H_}, {2 * H_, 3 * H_}};
    return {{0, G_ * H_}};
  }

  // R [dirs, GH, H] as R^T per direction, each segment packed for recur_gemm at offset c0 H.
  std::vector<float> packed_r(const std::vector<float>& r, int64_t dirs) const {
    const int64_t GH = G_ * H_;
    std::vector<float> t(r.size());
    for (int64_t d = 0; d < dirs; d++) {
      for (auto [c0, c1] : segments())
        recur_pack(r.data() + d * GH * H_, H_, c0, c1, t.data() + d * GH * H_ + c0 * H_);
    }
    return t;
  }

  int64_t act_code(int64_t d, int64_t which) const { return acts_[size_t(d * per_ + which)]; }

  // Direction d of batch entries [b0, b1): their steps, forward or reversed, the entries' rows of
  // R^T shared per step.
  void entries(int64_t d, int64_t b0, int64_t b1, int64_t S, int64_t N, const Inputs& in, float* y,
               float* yh, float* yc) const {
    const int64_t G = G_, H = H_, dirs = dir_ == 2 ? 2 : 1, GH = G * H, E = b1 - b0;
    const bool rev = dir_ == 1 || d == 1;
    const float* xw = in.xw->data() + d * S * N * GH;
    const float* rt = in.rt->data() + d * GH * H;
    const float* wb = in.bias->data() + d * 2 * GH;
    const float* rb = wb + GH;
    const float* p = in.peep->empty() ? nullptr : in.peep->data() + d * 3 * H;
    const size_t eh = size_t(E * H), egh = size_t(E * GH);
    // Per entry: h, c, the recurrence's columns (acc), the gates before and after activation
    // (pre, act), and GRU's r or r (.) h (rh).
    std::vector<float> h(eh, 0.0f), c(eh, 0.0f), acc(egh, 0.0f), pre(egh, 0.0f), act(egh, 0.0f),
        rh(eh, 0.0f), tmp(size_t(H), 0.0f);
    auto state_at = [&](int64_t b) { return layout_ == 0 ? (d * N + b) * H : (b * dirs + d) * H; };
    for (int64_t e = 0; e < E; e++) {
      if (!in.h0->empty()) std::copy_n(in.h0->data() + state_at(b0 + e), H, &h[size_t(e * H)]);
      if (!in.c0->empty()) std::copy_n(in.c0->data() + state_at(b0 + e), H, &c[size_t(e * H)]);
    }
    int64_t steps = 0;
    for (int64_t e = 0; e < E; e++) steps = std::max(steps, (*in.lens)[size_t(b0 + e)]);
    const size_t ne = size_t(E);
    std::vector<char> live(ne, 0);
    std::vector<int64_t> at(ne, 0);
    // acc's columns [c0, c1) (a segment) of every entry: Rb + v R^T (entries past their length
    // too: their rows are computed and not used, so that R^T's panels serve all entries).
    auto recur = [&](const std::vector<float>& v, int64_t c0, int64_t c1) {
      for (int64_t e = 0; e < E; e++) std::copy(rb + c0, rb + c1, &acc[size_t(e * GH + c0)]);
      recur_gemm(rt + c0 * H, v.data(), H, E, H, &acc[size_t(c0)], GH, c1 - c0);
    };
    // The entry's row of X W^T at its current step.
    auto xw_row = [&](int64_t e) {
      const int64_t t = at[size_t(e)], b = b0 + e;
      return xw + (layout_ == 0 ? t * N + b : b * S + t) * GH;
    };
    // The entry's gate inputs X_t W^T + Wb + the recurrence, columns [c0, c1).
    auto gates_in = [&](int64_t e, int64_t c0, int64_t c1) {
      const float* g = xw_row(e);
      const float* a = &acc[size_t(e * GH)];
      float* q = &pre[size_t(e * GH)];
      for (int64_t j = c0; j < c1; j++) q[j] = g[j] + wb[j] + a[j];
      return q;
    };
    for (int64_t s = 0; s < steps; s++) {
      for (int64_t e = 0; e < E; e++) {
        const int64_t len = (*in.lens)[size_t(b0 + e)];
        live[size_t(e)] = s < len;
        at[size_t(e)] = rev ? len - 1 - s : s;  // the entry's step t
      }
      // GRU without linear_before_reset: z and r now, the candidate's recurrence reads r (.) h.
      recur(h, 0, op_ == OpKind::GRU && !lbr_ ? 2 * H : GH);
      for (int64_t e = 0; e < E; e++) {
        if (!live[size_t(e)]) continue;
        float* he = &h[size_t(e * H)];
        float* ae = &act[size_t(e * GH)];
        if (op_ == OpKind::RNN) {
          activate_row(act_code(d, 0), clip_, gates_in(e, 0, H), he, H);
        } else if (op_ == OpKind::GRU) {  // gates z, r, h: z and r activated, r kept in rh
          activate_row(act_code(d, 0), clip_, gates_in(e, 0, 2 * H), ae, 2 * H);
          float* re = &rh[size_t(e * H)];
          for (int64_t j = 0; j < H; j++) re[j] = lbr_ ? ae[H + j] : ae[H + j] * he[j];
        } else {  // LSTM: gates i, o, f, c; P = [Pi, Po, Pf]
          float* q = gates_in(e, 0, GH);
          float* ce = &c[size_t(e * H)];
          if (p) {
            for (int64_t j = 0; j < H; j++) {
              q[j] += p[j] * ce[j];
              q[2 * H + j] += p[2 * H + j] * ce[j];
            }
          }
          activate_row(act_code(d, 0), clip_, q, ae, H);                                 // i
          if (!coupled_) activate_row(act_code(d, 0), clip_, q + 2 * H, ae + 2 * H, H);  // f
          activate_row(act_code(d, 1), clip_, q + 3 * H, ae + 3 * H, H);  // c's candidate
          for (int64_t j = 0; j < H; j++) {
            const float fg = coupled_ ? 1 - ae[j] : ae[2 * H + j];
            ce[j] = fg * ce[j] + ae[j] * ae[3 * H + j];
            if (p) q[H + j] += p[H + j] * ce[j];
          }
          activate_row(act_code(d, 0), clip_, q + H, ae + H, H);  // o
          // h's activation takes no clip (ONNX clips the gates' inputs)
          activate_row(act_code(d, 2), 0.0f, ce, tmp.data(), H);
          for (int64_t j = 0; j < H; j++) he[j] = ae[H + j] * tmp[size_t(j)];
        }
      }
      if (op_ == OpKind::GRU) {
        if (!lbr_) recur(rh, 2 * H, GH);  // (r (.) h) R_h^T + Rb_h
        for (int64_t e = 0; e < E; e++) {
          if (!live[size_t(e)]) continue;
          const float* g = xw_row(e);
          const float* a = &acc[size_t(e * GH)];
          const float* re = &rh[size_t(e * H)];
          const float* ae = &act[size_t(e * GH)];
          float* he = &h[size_t(e * H)];
          for (int64_t j = 0; j < H; j++) {
            tmp[size_t(j)] =
                g[2 * H + j] + wb[2 * H + j] + (lbr_ ? re[j] * a[2 * H + j] : a[2 * H + j]);
          }
          activate_row(act_code(d, 1), clip_, tmp.data(), tmp.data(), H);
          for (int64_t j = 0; j < H; j++) {
            he[j] = (1 - ae[j]) * tmp[size_t(j)] + ae[j] * he[j];
          }
        }
      }
      for (int64_t e = 0; e < E; e++) {
        if (!live[size_t(e)]) continue;
        const int64_t t = at[size_t(e)], b = b0 + e;
        float* yt =
            y + (layout_ == 0 ? ((t * dirs + d) * N + b) * H : ((b * S + t) * dirs + d) * H);
        std::copy_n(&h[size_t(e * H)], H, yt);
      }
    }
    for (int64_t e = 0; e < E; e++) {
      std::copy_n(&h[size_t(e * H)], H, yh + state_at(b0 + e));
      if (op_ == OpKind::LSTM) std::copy_n(&c[size_t(e * H)], H, yc + state_at(b0 + e));
    }
  }

  int64_t G_, H_, dir_, layout_, per_;
  float clip_;
  bool lbr_, coupled_;
  std::vector<int64_t> acts_;
  int opt_[5];  // node input of B, sequence_lens, initial_h, initial_c, P; -1 when absent
  ProjectMatMul proj_;
  Sizes w_sizes_, r_sizes_;
  int64_t r_panel_ = 0;  // recur_panel_width() r_packed_const_ was packed at
  std::vector<float> w_const_, r_packed_const_;  // constant W in f32 and R^T packed, when both are
                                                 // constants
};

}  // namespace

std::unique_ptr<OpKernel> make_recurrent_kernel(const Node& n) {
  return std::make_unique<RecurrentKernel>(n);
}

}  // namespace ubfuse::cpu
