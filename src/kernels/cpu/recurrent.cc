// RNN, GRU and LSTM (ir/recurrent.h) in f32. Sequences (a direction and a batch entry) run in
// parallel; each first computes X_t W^T + Wb for all of its steps (rows of W against rows of X),
// then walks its steps: h R^T + Rb, the gates, the new state. bf16 and f16 operands are widened
// once per call and the outputs narrowed at the end.
#include "ir/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

namespace rc = recurrent;

// a . b over n floats, in 8 partial sums (a loop the compiler vectorizes without reassociating).
float dot8(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
  }
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

std::vector<float> widen(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  convert_floats(t.dtype(), t.data(), DType::f32, v.data(), t.numel());
  return v;
}

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
    const int64_t dirs = dir_ == 2 ? 2 : 1, H = H_, G = G_;
    if (x.rank() != 3) fail("X must be rank 3, got " + tensors_str({x}));
    const int64_t S = x.dim(layout_ == 0 ? 0 : 1), N = x.dim(layout_ == 0 ? 1 : 0), I = x.dim(2);
    const Sizes ys = layout_ == 0 ? Sizes{S, dirs, N, H} : Sizes{N, S, dirs, H};
    const Sizes hs = layout_ == 0 ? Sizes{dirs, N, H} : Sizes{N, dirs, H};
    bool ok = w.sizes() == Sizes{dirs, G * H, I} && r.sizes() == Sizes{dirs, G * H, H} &&
              out.size() == size_t(op_ == OpKind::LSTM ? 3 : 2) && out[0].sizes() == ys;
    for (size_t o = 1; ok && o < out.size(); o++) ok = out[o].sizes() == hs;
    if (!ok) {
      fail("operands " + tensors_str({x, w, r}) + " and outputs " + tensors_str(out) +
           " do not match hidden_size " + std::to_string(H) + " and " + std::to_string(dirs) +
           " direction(s)");
    }
    const std::vector<float> xf = widen(x), wf = widen(w), rf = widen(r);
    auto opt = [&](int k) -> const Tensor* { return opt_[k] < 0 ? nullptr : &in[size_t(opt_[k])]; };
    const Tensor *bt = opt(0), *lt = opt(1), *h0t = opt(2), *c0t = opt(3), *pt = opt(4);
    const std::vector<float> bf = bt ? widen(*bt) : std::vector<float>(size_t(dirs * 2 * G * H), 0),
                             h0 = h0t ? widen(*h0t) : std::vector<float>(),
                             c0 = c0t ? widen(*c0t) : std::vector<float>(),
                             pf = pt ? widen(*pt) : std::vector<float>();
    std::vector<int64_t> lens(size_t(N), S);
    for (int64_t b = 0; lt && b < N; b++) {
      lens[size_t(b)] = int64_t(lt->get(b));
      if (lens[size_t(b)] < 0 || lens[size_t(b)] > S) {
        fail("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[size_t(b)]) +
                 " is outside [0, " + std::to_string(S) + "]",
             "each batch entry's length is at most X's sequence length");
      }
    }
    std::vector<float> y(size_t(numel(ys)), 0.0f), yh(size_t(numel(hs))), yc(size_t(numel(hs)));
    pool.parallel_for(dirs * N, 1, [&](int64_t q0, int64_t q1, int) {
      for (int64_t q = q0; q < q1; q++)
        sequence(q / N, q % N, S, N, I, lens[size_t(q % N)], xf, wf, rf, bf, h0, c0, pf, y, yh, yc);
    });
    const std::vector<float>* res[3] = {&y, &yh, &yc};
    for (size_t o = 0; o < out.size(); o++) {
      convert_floats(DType::f32, res[o]->data(), out[o].dtype(), out[o].data(), out[o].numel());
    }
  }

 private:
  float act(int64_t d, int64_t which, float v) const {
    if (clip_ > 0) v = std::clamp(v, -clip_, clip_);
    return rc::activate(rc::Act(acts_[size_t(d * per_ + which)]), v);
  }

  // One direction d of batch entry b: its len steps, forward or reversed.
  void sequence(int64_t d, int64_t b, int64_t S, int64_t N, int64_t I, int64_t len,
                const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& r, const std::vector<float>& bias,
                const std::vector<float>& h0, const std::vector<float>& c0,
                const std::vector<float>& peep, std::vector<float>& y, std::vector<float>& yh,
                std::vector<float>& yc) const {
    const int64_t G = G_, H = H_, dirs = dir_ == 2 ? 2 : 1, GH = G * H;
    const bool rev = dir_ == 1 || d == 1;
    const float* wd = w.data() + d * GH * I;
    const float* rd = r.data() + d * GH * H;
    const float* wb = bias.data() + d * 2 * GH;
    const float* rb = wb + GH;
    // X_t W^T + Wb for every step, by position t.
    std::vector<float> xw(size_t(std::max<int64_t>(len, 1) * GH));
    for (int64_t t = 0; t < len; t++) {
      const float* xt = x.data() + (layout_ == 0 ? (t * N + b) * I : (b * S + t) * I);
      for (int64_t row = 0; row < GH; row++) {
        xw[size_t(t * GH + row)] = wb[row] + dot8(xt, wd + row * I, I);
      }
    }
    const size_t hn = size_t(H);
    std::vector<float> h(hn, 0.0f), c(hn, 0.0f), hr(size_t(GH), 0.0f), tmp(hn, 0.0f), rh(hn, 0.0f);
    // Initial and final states: [directions, batch, H], or [batch, directions, H] (layout 1).
    const int64_t at = layout_ == 0 ? (d * N + b) * H : (b * dirs + d) * H;
    if (!h0.empty()) std::copy_n(h0.data() + at, H, h.data());
    if (!c0.empty()) std::copy_n(c0.data() + at, H, c.data());
    const float* p = peep.empty() ? nullptr : peep.data() + d * 3 * H;
    for (int64_t s = 0; s < len; s++) {
      const int64_t t = rev ? len - 1 - s : s;
      const float* g = xw.data() + t * GH;
      if (op_ == OpKind::GRU && !lbr_) {  // the candidate's recurrence reads r (.) h: later
        for (int64_t row = 0; row < 2 * H; row++)
          hr[size_t(row)] = rb[row] + dot8(h.data(), rd + row * H, H);
      } else {
        for (int64_t row = 0; row < GH; row++)
          hr[size_t(row)] = rb[row] + dot8(h.data(), rd + row * H, H);
      }
      if (op_ == OpKind::RNN) {
        for (int64_t j = 0; j < H; j++) h[size_t(j)] = act(d, 0, g[j] + hr[size_t(j)]);
      } else if (op_ == OpKind::GRU) {  // gates z, r, h
        for (int64_t j = 0; j < H; j++) {
          tmp[size_t(j)] = act(d, 0, g[H + j] + hr[size_t(H + j)]);  // r
        }
        if (!lbr_) {
          for (int64_t j = 0; j < H; j++) rh[size_t(j)] = tmp[size_t(j)] * h[size_t(j)];
          for (int64_t j = 0; j < H; j++) {
            hr[size_t(2 * H + j)] = rb[2 * H + j] + dot8(rh.data(), rd + (2 * H + j) * H, H);
          }
        }
        for (int64_t j = 0; j < H; j++) {
          const float z = act(d, 0, g[j] + hr[size_t(j)]);
          const float rec = lbr_ ? tmp[size_t(j)] * hr[size_t(2 * H + j)] : hr[size_t(2 * H + j)];
          const float cand = act(d, 1, g[2 * H + j] + rec);
          tmp[size_t(j)] = (1 - z) * cand + z * h[size_t(j)];
        }
        h.swap(tmp);
      } else {  // LSTM: gates i, o, f, c; P = [Pi, Po, Pf]
        for (int64_t j = 0; j < H; j++) {
          const float cj = c[size_t(j)];
          const float ig = act(d, 0, g[j] + hr[size_t(j)] + (p ? p[j] * cj : 0.0f));
          const float fg =
              coupled_ ? 1 - ig
                       : act(d, 0,
                             g[2 * H + j] + hr[size_t(2 * H + j)] + (p ? p[2 * H + j] * cj : 0.0f));
          const float cand = act(d, 1, g[3 * H + j] + hr[size_t(3 * H + j)]);
          const float cn = fg * cj + ig * cand;
          const float og = act(d, 0, g[H + j] + hr[size_t(H + j)] + (p ? p[H + j] * cn : 0.0f));
          c[size_t(j)] = cn;
          // h's activation takes no clip (ONNX clips the gates' inputs)
          h[size_t(j)] = og * rc::activate(rc::Act(acts_[size_t(d * per_ + 2)]), cn);
        }
      }
      float* yt =
          y.data() + (layout_ == 0 ? ((t * dirs + d) * N + b) * H : ((b * S + t) * dirs + d) * H);
      std::copy_n(h.data(), H, yt);
    }
    std::copy_n(h.data(), H, yh.data() + at);
    if (op_ == OpKind::LSTM) std::copy_n(c.data(), H, yc.data() + at);
  }

  int64_t G_, H_, dir_, layout_, per_;
  float clip_;
  bool lbr_, coupled_;
  std::vector<int64_t> acts_;
  int opt_[5];  // node input of B, sequence_lens, initial_h, initial_c, P; -1 when absent
};

}  // namespace

std::unique_ptr<OpKernel> make_recurrent_kernel(const Node& n) {
  return std::make_unique<RecurrentKernel>(n);
}

}  // namespace ubfuse::cpu
