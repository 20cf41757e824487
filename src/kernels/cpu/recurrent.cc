// RNN, GRU and LSTM (ir/recurrent.h) in f32. The input projections of every step, X W^T + Wb,
// are one oneDNN matmul per direction (W read through transposed strides). The recurrence then
// walks the steps: per step, each batch entry's h R^T + Rb with R^T's rows shared by the entries
// (h[n][k] times row k, a loop over the gates' columns that vectorizes), then the gates. Tasks are
// a direction and a block of batch entries. bf16 and f16 operands are widened once per call and
// the outputs narrowed at the end.
#include "ir/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

namespace rc = recurrent;
using dt = dnnl::memory::data_type;

std::vector<float> widen(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  convert_floats(t.dtype(), t.data(), DType::f32, v.data(), t.numel());
  return v;
}

// acc[0, n) += a * row[0, n)
inline void axpy(float a, const float* row, float* acc, int64_t n) {
  for (int64_t j = 0; j < n; j++) acc[j] += a * row[j];
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
             rc::input_of(n, 7)} {}

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
    const std::vector<float> xf = widen(x), wf = widen(w), rf = widen(r),
                             bf = bt ? widen(*bt) : std::vector<float>(size_t(dirs * 2 * GH), 0),
                             h0 = h0t ? widen(*h0t) : std::vector<float>(),
                             c0 = c0t ? widen(*c0t) : std::vector<float>(),
                             pf = pt ? widen(*pt) : std::vector<float>();
    // X W^T per direction, rows in X's order ((t, n), or (n, t) with layout 1); R^T per direction.
    std::vector<float> xw(size_t(dirs * S * N * GH)), rt(size_t(dirs * H * GH));
    for (int64_t d = 0; d < dirs; d++) {
      proj_.run(xf.data(), wf.data() + d * GH * I, xw.data() + d * S * N * GH, S * N, I, GH,
                pool.size());
      for (int64_t row = 0; row < GH; row++) {
        for (int64_t k = 0; k < H; k++)
          rt[size_t((d * H + k) * GH + row)] = rf[size_t((d * GH + row) * H + k)];
      }
    }
    std::vector<float> y(size_t(numel(ys)), 0.0f), yh(size_t(numel(hs))), yc(size_t(numel(hs)));
    // A direction and a block of batch entries per task, at least one task per thread.
    const int64_t per_dir = std::max<int64_t>(1, int64_t(pool.size()) / dirs);
    const int64_t nb = std::max<int64_t>(1, (N + per_dir - 1) / per_dir);
    const int64_t blocks = (N + nb - 1) / nb;
    const Inputs ins{&xw, &rt, &bf, &h0, &c0, &pf, &lens};
    pool.parallel_for(dirs * blocks, 1, [&](int64_t q0, int64_t q1, int) {
      for (int64_t q = q0; q < q1; q++) {
        const int64_t d = q / blocks, b0 = q % blocks * nb;
        entries(d, b0, std::min(N, b0 + nb), S, N, ins, y, yh, yc);
      }
    });
    const std::vector<float>* res[3] = {&y, &yh, &yc};
    for (size_t o = 0; o < out.size(); o++) {
      convert_floats(DType::f32, res[o]->data(), out[o].dtype(), out[o].data(), out[o].numel());
    }
  }

 private:
  struct Inputs {
    const std::vector<float>*xw, *rt, *bias, *h0, *c0, *peep;
    const std::vector<int64_t>* lens;
  };

  float act(int64_t d, int64_t which, float v) const {
    if (clip_ > 0) v = std::clamp(v, -clip_, clip_);
    return rc::activate(rc::Act(acts_[size_t(d * per_ + which)]), v);
  }

  // Direction d of batch entries [b0, b1): their steps, forward or reversed, the entries' rows of
  // R^T shared per step.
  void entries(int64_t d, int64_t b0, int64_t b1, int64_t S, int64_t N, const Inputs& in,
               std::vector<float>& y, std::vector<float>& yh, std::vector<float>& yc) const {
    const int64_t G = G_, H = H_, dirs = dir_ == 2 ? 2 : 1, GH = G * H, E = b1 - b0;
    const bool rev = dir_ == 1 || d == 1;
    const float* xw = in.xw->data() + d * S * N * GH;
    const float* rt = in.rt->data() + d * H * GH;
    const float* wb = in.bias->data() + d * 2 * GH;
    const float* rb = wb + GH;
    const float* p = in.peep->empty() ? nullptr : in.peep->data() + d * 3 * H;
    std::vector<float> h(size_t(E * H), 0.0f), c(size_t(E * H), 0.0f), acc(size_t(E * GH)),
        rh(size_t(E * H));
    auto state_at = [&](int64_t b) { return layout_ == 0 ? (d * N + b) * H : (b * dirs + d) * H; };
    for (int64_t e = 0; e < E; e++) {
      if (!in.h0->empty()) std::copy_n(in.h0->data() + state_at(b0 + e), H, &h[size_t(e * H)]);
      if (!in.c0->empty()) std::copy_n(in.c0->data() + state_at(b0 + e), H, &c[size_t(e * H)]);
    }
    int64_t steps = 0;
    for (int64_t e = 0; e < E; e++) steps = std::max(steps, (*in.lens)[size_t(b0 + e)]);
    // The recurrent part of the columns [c0, c1) of every live entry: acc = Rb + v R^T.
    auto recur = [&](const std::vector<float>& v, int64_t c0, int64_t c1,
                     const std::vector<char>& live) {
      for (int64_t e = 0; e < E; e++) {
        if (live[size_t(e)]) std::copy(rb + c0, rb + c1, &acc[size_t(e * GH + c0)]);
      }
      for (int64_t k = 0; k < H; k++) {
        const float* row = rt + k * GH + c0;
        for (int64_t e = 0; e < E; e++) {
          if (live[size_t(e)]) axpy(v[size_t(e * H + k)], row, &acc[size_t(e * GH + c0)], c1 - c0);
        }
      }
    };
    const size_t ne = size_t(E);
    std::vector<char> live(ne, 0);
    std::vector<int64_t> at(ne, 0);
    for (int64_t s = 0; s < steps; s++) {
      for (int64_t e = 0; e < E; e++) {
        const int64_t len = (*in.lens)[size_t(b0 + e)];
        live[size_t(e)] = s < len;
        at[size_t(e)] = rev ? len - 1 - s : s;  // the entry's step t
      }
      if (op_ == OpKind::GRU && !lbr_) {
        recur(h, 0, 2 * H, live);  // z and r; the candidate's recurrence reads r (.) h
      } else {
        recur(h, 0, GH, live);
      }
      for (int64_t e = 0; e < E; e++) {
        if (!live[size_t(e)]) continue;
        const int64_t t = at[size_t(e)], b = b0 + e;
        const float* g = xw + (layout_ == 0 ? t * N + b : b * S + t) * GH;
        const float* a = &acc[size_t(e * GH)];
        float* he = &h[size_t(e * H)];
        if (op_ == OpKind::RNN) {
          for (int64_t j = 0; j < H; j++) he[j] = act(d, 0, g[j] + wb[j] + a[j]);
        } else if (op_ == OpKind::GRU) {  // gates z, r, h: r first, kept in rh
          for (int64_t j = 0; j < H; j++) {
            const float rg = act(d, 0, g[H + j] + wb[H + j] + a[H + j]);
            rh[size_t(e * H + j)] = lbr_ ? rg : rg * he[j];
          }
        } else {  // LSTM: gates i, o, f, c; P = [Pi, Po, Pf]
          float* ce = &c[size_t(e * H)];
          for (int64_t j = 0; j < H; j++) {
            const float cj = ce[j];
            const float ig = act(d, 0, g[j] + wb[j] + a[j] + (p ? p[j] * cj : 0.0f));
            const float fg = coupled_ ? 1 - ig
                                      : act(d, 0,
                                            g[2 * H + j] + wb[2 * H + j] + a[2 * H + j] +
                                                (p ? p[2 * H + j] * cj : 0.0f));
            const float cand = act(d, 1, g[3 * H + j] + wb[3 * H + j] + a[3 * H + j]);
            const float cn = fg * cj + ig * cand;
            const float og =
                act(d, 0, g[H + j] + wb[H + j] + a[H + j] + (p ? p[H + j] * cn : 0.0f));
            ce[j] = cn;
            // h's activation takes no clip (ONNX clips the gates' inputs)
            he[j] = og * rc::activate(rc::Act(acts_[size_t(d * per_ + 2)]), cn);
          }
        }
      }
      if (op_ == OpKind::GRU) {
        if (!lbr_) recur(rh, 2 * H, GH, live);  // (r (.) h) R_h^T + Rb_h
        for (int64_t e = 0; e < E; e++) {
          if (!live[size_t(e)]) continue;
          const int64_t t = at[size_t(e)], b = b0 + e;
          const float* g = xw + (layout_ == 0 ? t * N + b : b * S + t) * GH;
          const float* a = &acc[size_t(e * GH)];
          float* he = &h[size_t(e * H)];
          for (int64_t j = 0; j < H; j++) {
            const float z = act(d, 0, g[j] + wb[j] + a[j]);
            const float rec = lbr_ ? rh[size_t(e * H + j)] * a[2 * H + j] : a[2 * H + j];
            const float cand = act(d, 1, g[2 * H + j] + wb[2 * H + j] + rec);
            he[j] = (1 - z) * cand + z * he[j];
          }
        }
      }
      for (int64_t e = 0; e < E; e++) {
        if (!live[size_t(e)]) continue;
        const int64_t t = at[size_t(e)], b = b0 + e;
        float* yt =
            y.data() + (layout_ == 0 ? ((t * dirs + d) * N + b) * H : ((b * S + t) * dirs + d) * H);
        std::copy_n(&h[size_t(e * H)], H, yt);
      }
    }
    for (int64_t e = 0; e < E; e++) {
      std::copy_n(&h[size_t(e * H)], H, yh.data() + state_at(b0 + e));
      if (op_ == OpKind::LSTM) std::copy_n(&c[size_t(e * H)], H, yc.data() + state_at(b0 + e));
    }
  }

  int64_t G_, H_, dir_, layout_, per_;
  float clip_;
  bool lbr_, coupled_;
  std::vector<int64_t> acts_;
  int opt_[5];  // node input of B, sequence_lens, initial_h, initial_c, P; -1 when absent
  ProjectMatMul proj_;
};

}  // namespace

std::unique_ptr<OpKernel> make_recurrent_kernel(const Node& n) {
  return std::make_unique<RecurrentKernel>(n);
}

}  // namespace ubfuse::cpu
