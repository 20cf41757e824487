// Reference RNN, GRU and LSTM in double (reference_ops.h): ONNX's equations step by step, one
// sequence (a direction and a batch entry) at a time.
#include <algorithm>
#include <string>
#include <vector>

#include "ir/recurrent.h"
#include "kernels/reference/reference_ops.h"
#include "ubfuse/error.h"

namespace ubfuse::ref::detail {

namespace rc = recurrent;

std::vector<RefTensor> recurrent_cell(const Node& n, const std::vector<RefTensor>& in) {
  const OpKind k = n.op;
  const int64_t G = rc::gates(k), H = n.attr_int("hidden_size", 0),
                dir = n.attr_int("direction", 0), dirs = dir == 2 ? 2 : 1,
                layout = n.attr_int("layout", 0), per = rc::acts_per_direction(k);
  const double clip = n.attr_float("clip", 0.0);
  const std::vector<int64_t> acts = n.attr_ints("activations");
  const RefTensor &x = in[0], &w = in[1], &r = in[2];
  const int64_t S = x.sizes[layout == 0 ? 0 : 1], N = x.sizes[layout == 0 ? 1 : 0], I = x.sizes[2];
  auto opt = [&](int64_t onnx_index) -> const RefTensor* {
    const int i = rc::input_of(n, onnx_index);
    return i < 0 ? nullptr : &in[size_t(i)];
  };
  const RefTensor *bias = opt(3), *lens = opt(4), *h0 = opt(5), *c0 = opt(6), *peep = opt(7);
  const Sizes ys = layout == 0 ? Sizes{S, dirs, N, H} : Sizes{N, S, dirs, H};
  const Sizes hs = layout == 0 ? Sizes{dirs, N, H} : Sizes{N, dirs, H};
  std::vector<RefTensor> out{make(n, ys, 0), make(n, hs, 1)};
  if (k == OpKind::LSTM) out.push_back(make(n, hs, 2));
  auto cl = [&](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  for (int64_t d = 0; d < dirs; d++) {
    const bool rev = dir == 1 || d == 1;
    const auto f = rc::Act(acts[size_t(d * per)]);
    const auto g = per > 1 ? rc::Act(acts[size_t(d * per + 1)]) : f;
    const auto h = per > 2 ? rc::Act(acts[size_t(d * per + 2)]) : f;
    for (int64_t b = 0; b < N; b++) {
      const int64_t len = lens ? int64_t(lens->data[size_t(b)]) : S;
      if (len < 0 || len > S) {
        throw Error(n.describe() + ": sequence_lens[" + std::to_string(b) +
                    "] = " + std::to_string(len) + " is outside [0, " + std::to_string(S) + "]");
      }
      const size_t hn = size_t(H);
      std::vector<double> hv(hn, 0.0), cv(hn, 0.0), nh(hn, 0.0), nc(hn, 0.0);
      // Initial and final states: [directions, batch, H], or [batch, directions, H] (layout 1).
      const int64_t at = layout == 0 ? (d * N + b) * H : (b * dirs + d) * H;
      for (int64_t j = 0; j < H; j++) {
        if (h0) hv[size_t(j)] = h0->data[size_t(at + j)];
        if (c0) cv[size_t(j)] = c0->data[size_t(at + j)];
      }
      for (int64_t s = 0; s < len; s++) {
        const int64_t t = rev ? len - 1 - s : s;
        // Row `gate * H + j` of X_t W^T + Wb and of v R^T + Rb.
        auto xw = [&](int64_t gate, int64_t j) {
          const int64_t row = d * G * H + gate * H + j;
          double acc = bias ? bias->data[size_t(d * 2 * G * H + gate * H + j)] : 0.0;
          for (int64_t i = 0; i < I; i++) {
            const int64_t xi = layout == 0 ? (t * N + b) * I + i : (b * S + t) * I + i;
            acc += x.data[size_t(xi)] * w.data[size_t(row * I + i)];
          }
          return acc;
        };
        auto hr = [&](int64_t gate, int64_t j, const std::vector<double>& v) {
          const int64_t row = d * G * H + gate * H + j;
          double acc = bias ? bias->data[size_t(d * 2 * G * H + G * H + gate * H + j)] : 0.0;
          for (int64_t m = 0; m < H; m++) acc += v[size_t(m)] * r.data[size_t(row * H + m)];
          return acc;
        };
        if (k == OpKind::RNN) {
          for (int64_t j = 0; j < H; j++)
            nh[size_t(j)] = rc::activate(f, cl(xw(0, j) + hr(0, j, hv)));
        } else if (k == OpKind::GRU) {  // gates z, r, h
          std::vector<double> z(hn), rs(hn), rh(hn);
          for (int64_t j = 0; j < H; j++) {
            z[size_t(j)] = rc::activate(f, cl(xw(0, j) + hr(0, j, hv)));
            rs[size_t(j)] = rc::activate(f, cl(xw(1, j) + hr(1, j, hv)));
            rh[size_t(j)] = rs[size_t(j)] * hv[size_t(j)];
          }
          const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
          for (int64_t j = 0; j < H; j++) {
            const double rec = lbr ? rs[size_t(j)] * hr(2, j, hv) : hr(2, j, rh);
            const double cand = rc::activate(g, cl(xw(2, j) + rec));
            nh[size_t(j)] = (1 - z[size_t(j)]) * cand + z[size_t(j)] * hv[size_t(j)];
          }
        } else {  // LSTM: gates i, o, f, c; peepholes P = [Pi, Po, Pf]
          const bool coupled = n.attr_int("input_forget", 0) != 0;
          auto p = [&](int64_t which, int64_t j) {
            return peep ? peep->data[size_t(d * 3 * H + which * H + j)] : 0.0;
          };
          for (int64_t j = 0; j < H; j++) {
            const double ig =
                rc::activate(f, cl(xw(0, j) + hr(0, j, hv) + p(0, j) * cv[size_t(j)]));
            const double fg =
                coupled ? 1 - ig
                        : rc::activate(f, cl(xw(2, j) + hr(2, j, hv) + p(2, j) * cv[size_t(j)]));
            const double cand = rc::activate(g, cl(xw(3, j) + hr(3, j, hv)));
            nc[size_t(j)] = fg * cv[size_t(j)] + ig * cand;
            const double og =
                rc::activate(f, cl(xw(1, j) + hr(1, j, hv) + p(1, j) * nc[size_t(j)]));
            nh[size_t(j)] = og * rc::activate(h, nc[size_t(j)]);
          }
          cv = nc;
        }
        hv = nh;
        for (int64_t j = 0; j < H; j++) {
          const int64_t yi =
              layout == 0 ? ((t * dirs + d) * N + b) * H + j : ((b * S + t) * dirs + d) * H + j;
          out[0].data[size_t(yi)] = hv[size_t(j)];
        }
      }
      for (int64_t j = 0; j < H; j++) {
        out[1].data[size_t(at + j)] = hv[size_t(j)];
        if (k == OpKind::LSTM) out[2].data[size_t(at + j)] = cv[size_t(j)];
      }
    }
  }
  return out;
}

}  // namespace ubfuse::ref::detail
