// Conv (ONNX Conv, 1-D, 2-D and 3-D) on oneDNN 2.6's convolution_forward.
//
// * A 1-D conv runs as 2-D with height 1 (the same bytes); groups use oneDNN's grouped weights
//   [G, M/G, C/G, k...], which are W's bytes as ONNX lays them out.
// * Input, weights and output stay plain (NCHW, OIHW): the caller's buffers, no reorder. oneDNN
//   runs them as im2col + GEMM (gemm:jit); its blocked brgconv kernels, asked for with
//   format_tag::any, were no faster on a Whisper-style Conv1d (80 -> 384 channels, length 3000,
//   AVX-512, 2 cores) and would add reorders of input and output per call.
// * Constant bf16 / f16 weights are converted to f32 once (for the calls that compute in f32).
// * f32 runs in f32; bf16 natively where oneDNN has a bf16 kernel (f32 accumulation); f16, and
//   bf16 elsewhere, through f32 copies. The bias is passed as f32.
// * Primitives are cached per concrete shape under a mutex; each call has its own stream and a
//   user-provided scratchpad, so concurrent run() calls are safe.
// * An f32 Conv whose kernel tiles its input (strides equal to the kernel, no dilation, no padding,
//   one group, constant weights: a ViT's or a video encoder's patch embedding) is a MatMul of its
//   patches instead (PatchMatMul): oneDNN's im2col + GEMM took 2.4x a MatMul of the same size for
//   a 64 x 64 image of 16 x 16 patches and 1.25x for 512 patches (Intel Xeon, 2 threads).
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "ir/shape_util.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"
#include "ubfuse/builder.h"

namespace ubfuse::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// One call's sizes as oneDNN sees them (2 or 3 spatial axes).
struct ConvGeometry {
  dims src, wei, dst, strides, dilates, pad_l, pad_r;
  int64_t bias = 0;  // output channels when a bias is passed, else 0
};

struct ConvPrim {
  dnnl::convolution_forward prim;
  dnnl::memory::desc src, wei, bias, dst;
  bool has_bias = false;
  size_t scratch_bytes = 0;
};

// A Conv whose kernel tiles its input: every output position reads its own patch of C x K inputs
// (K the kernel's taps), each input at most once. So y[n, :, p] = W2 x patch(n, p) + bias with W2
// the weights as [M, C * K]: the patches are gathered as the rows of A [N * P, C * K], A W2^T runs
// on the MatMul kernel (weights prepacked once, its own loop at few patches) and the result is
// written back transposed to [N, M, P] with the bias added.
class PatchMatMul {
 public:
  // w: the constant f32 weights [M, C, k...]; rows: N * P where the input's shape fixes it, else 0.
  PatchMatMul(const Tensor& w, int64_t rows) : M_(w.dim(0)), CK_(w.numel() / w.dim(0)) {
    Tensor wt(DType::f32, {CK_, M_});
    const float* src = w.data_as<float>();
    float* dst = wt.data_as<float>();
    for (int64_t m = 0; m < M_; m++) {
      for (int64_t i = 0; i < CK_; i++) dst[i * M_ + m] = src[m * CK_ + i];
    }
    GraphBuilder b;
    auto a = b.input("patches", DType::f32, {rows > 0 ? Dim(rows) : Dim("patches"), Dim(CK_)});
    b.output("y", b.matmul(a, b.constant(wt, "weights_t")));
    graph_ = std::make_unique<Graph>(b.build());
    for (Node* n : graph_->topo_order()) {
      if (n->op == OpKind::MatMul) matmul_ = make_matmul_kernel(*n);
    }
    UBF_CHECK(matmul_ != nullptr, "PatchMatMul: no MatMul in its graph");
    wt_ = wt;
  }

  // y = conv(x) for x [N, C, d...] and y [N, M, o...] of 1 to 3 spatial axes, kernel k (the
  // strides), bias b (M floats) or null.
  void run(const Tensor& x, const Sizes& k, const float* bias, const Tensor& y,
           ThreadPool& pool) const {
    const int64_t N = x.dim(0), C = x.dim(1), sp = x.rank() - 2;
    // The spatial axes as three (depth, height, width), leading ones of size 1 where fewer.
    int64_t len[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, out[3] = {1, 1, 1};
    for (int64_t i = 0; i < sp; i++) {
      len[3 - sp + i] = x.dim(int(2 + i));
      kk[3 - sp + i] = k[size_t(i)];
      out[3 - sp + i] = y.dim(int(2 + i));
    }
    const int64_t P = out[0] * out[1] * out[2], rows = N * P;
    float* a = dnnl_staging(0, rows * CK_);
    float* r = dnnl_staging(1, rows * M_);
    const float* xs = x.data_as<float>();
    // One task per row of patches (n, od, oh): for each channel and kernel row, the input row's
    // first out[2] * kk[2] elements split into the patches' columns.
    pool.parallel_for(N * out[0] * out[1], 4, [&](int64_t lo, int64_t hi, int) {
      for (int64_t t = lo; t < hi; t++) {
        const int64_t oh = t % out[1], od = t / out[1] % out[0], n = t / (out[1] * out[0]);
        float* arow = a + t * out[2] * CK_;
        for (int64_t c = 0; c < C; c++) {
          for (int64_t kd = 0; kd < kk[0]; kd++) {
            for (int64_t kh = 0; kh < kk[1]; kh++) {
              const float* in =
                  xs +
                  (((n * C + c) * len[0] + od * kk[0] + kd) * len[1] + oh * kk[1] + kh) * len[2];
              float* col = arow + ((c * kk[0] + kd) * kk[1] + kh) * kk[2];
              for (int64_t ow = 0; ow < out[2]; ow++) {
                std::memcpy(col + ow * CK_, in + ow * kk[2], size_t(kk[2]) * sizeof(float));
              }
            }
          }
        }
      }
    });
    std::vector<Tensor> in{Tensor::view(DType::f32, {rows, CK_}, a), wt_};
    std::vector<Tensor> res{Tensor::view(DType::f32, {rows, M_}, r)};
    matmul_->run(in, res, pool);
    // y[n, m, p] = r[n * P + p, m] + bias[m], in tiles of kTile x kTile.
    constexpr int64_t kTile = 32;
    const int64_t mt = (M_ + kTile - 1) / kTile, pt = (P + kTile - 1) / kTile;
    float* ys = y.data_as<float>();
    pool.parallel_for(N * mt, 1, [&](int64_t lo, int64_t hi, int) {
      for (int64_t t = lo; t < hi; t++) {
        const int64_t n = t / mt, m0 = t % mt * kTile, m1 = std::min(M_, m0 + kTile);
        for (int64_t q = 0; q < pt; q++) {
          const int64_t p0 = q * kTile, p1 = std::min(P, p0 + kTile);
          for (int64_t m = m0; m < m1; m++) {
            const float bm = bias ? bias[m] : 0.0f;
            float* yrow = ys + (n * M_ + m) * P;
            const float* rcol = r + n * P * M_ + m;
            for (int64_t p = p0; p < p1; p++) yrow[p] = rcol[p * M_] + bm;
          }
        }
      }
    });
  }

 private:
  int64_t M_, CK_;
  Tensor wt_;                     // the weights as [C * K, M]
  std::unique_ptr<Graph> graph_;  // the MatMul node matmul_ was made from
  std::unique_ptr<OpKernel> matmul_;
};

class ConvKernel : public KernelBase {
 public:
  explicit ConvKernel(const Node& n)
      : KernelBase(n),
        strides_(n.attr_ints("strides")),
        dilations_(n.attr_ints("dilations")),
        pads_(n.attr_ints("pads")),
        group_(n.attr_int("group", 1)),
        auto_pad_(n.attr_str("auto_pad", "NOTSET")) {
    // Constant bf16 or f16 weights in f32 once, for the calls that compute in f32.
    const Value* wv = n.inputs[1];
    if (wv->producer && wv->producer->op == OpKind::Constant && wv->producer->payload.defined()) {
      const Tensor& w = wv->producer->payload;
      if (w.dtype() == DType::bf16 || w.dtype() == DType::f16) {
        w32_sizes_ = w.sizes();
        w32_.resize(size_t(w.numel()));
        convert_floats(w.dtype(), w.data(), DType::f32, w32_.data(), w.numel());
      }
      if (w.dtype() == DType::f32 && tiles_input(w)) {
        // N * P where the input's shape fixes it: the MatMul's weights are packed for that many
        // rows.
        const Shape& xs = n.inputs[0]->shape;
        int64_t rows = xs.size() == size_t(w.rank()) ? 1 : 0;
        for (size_t i = 0; rows > 0 && i < xs.size(); i++) {
          if (i == 1) continue;
          rows = xs[i].is_static() ? rows * (i < 2 ? xs[i].value() : xs[i].value() / w.dim(int(i)))
                                   : 0;
        }
        patch_ = std::make_unique<PatchMatMul>(w, rows);
        patch_sizes_ = w.sizes();
      }
    }
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 3, out);
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const bool has_bias = in.size() > 2 && in[2].defined();
    const Tensor& y = out[0];
    const DType t = x.dtype();
    if (!is_float(t) || w.dtype() != t || y.dtype() != t || (has_bias && in[2].dtype() != t)) {
      fail("needs float operands and output of one dtype, got " +
               tensors_str(has_bias ? std::vector<Tensor>{x, w, in[2], y}
                                    : std::vector<Tensor>{x, w, y}),
           "Cast the operands to f32, bf16 or f16");
    }
    const ConvGeometry g = geometry(x, w, has_bias ? &in[2] : nullptr, y);
    if (y.numel() == 0) return;
    // No input channels per group: each output is its bias.
    if (w.dim(1) == 0) {
      fill_bias(has_bias ? &in[2] : nullptr, y);
      return;
    }
    if (patch_ && t == DType::f32 && w.sizes() == patch_sizes_) {
      patch_->run(x, Sizes(w.sizes().begin() + 2, w.sizes().end()),
                  has_bias ? in[2].data_as<float>() : nullptr, y, pool);
      return;
    }
    std::shared_ptr<ConvPrim> p;
    if (t == DType::bf16) p = get_prim(g, dt::bf16);
    if (!p) p = get_prim(g, dt::f32);
    if (!p) fail("oneDNN has no convolution for " + tensors_str({x, w}));
    const bool f32_path = p->src.data_type() == dt::f32;
    const void* px = x.data();
    const void* pw = w.data();
    void* py = y.data();
    if (f32_path && t != DType::f32) {
      float* x32 = dnnl_staging(0, x.numel());
      convert_floats(t, x.data(), DType::f32, x32, x.numel(), pool);
      px = x32;
      py = dnnl_staging(2, y.numel());
      if (!w32_.empty() && w.sizes() == w32_sizes_) {
        pw = w32_.data();
      } else {
        float* w32 = dnnl_staging(1, w.numel());
        convert_floats(t, w.data(), DType::f32, w32, w.numel(), pool);
        pw = w32;
      }
    }
    std::vector<float> b32;
    if (has_bias) {
      b32.resize(size_t(in[2].numel()));
      convert_floats(t, in[2].data(), DType::f32, b32.data(), in[2].numel());
    }
    dnnl::engine& eng = dnnl_cpu_engine();
    dnnl::stream s(eng);
    void* scratch = dnnl_scratchpad(p->scratch_bytes);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, dnnl::memory(p->src, eng, const_cast<void*>(px))},
        {DNNL_ARG_WEIGHTS, dnnl::memory(p->wei, eng, const_cast<void*>(pw))},
        {DNNL_ARG_DST, dnnl::memory(p->dst, eng, py)},
    };
    if (p->has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p->bias, eng, b32.data()));
    if (p->scratch_bytes) {
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(dnnl::memory::desc({int64_t(p->scratch_bytes)}, dt::u8,
                                                   dnnl::memory::format_tag::a),
                                eng, scratch));
    }
    {
      // Each output element sums over its window: in channels / groups times the kernel's taps.
      DnnlThreads threads(y.numel() * (w.numel() / std::max<int64_t>(1, w.dim(0))), pool.size());
      p->prim.execute(s, args);
      s.wait();
    }
    if (py != y.data()) convert_floats(DType::f32, py, t, y.data(), y.numel(), pool);
  }

 private:
  // Whether the attributes make every output position read its own patch of the input: one group,
  // strides equal to the kernel w's spatial sizes, no dilation, no padding (auto_pad NOTSET or
  // VALID).
  bool tiles_input(const Tensor& w) const {
    const size_t sp = size_t(w.rank() - 2);
    if (group_ != 1 || w.rank() < 3 || w.rank() > 5 || strides_.size() != sp ||
        dilations_.size() != sp || pads_.size() != 2 * sp || w.dim(0) < 1 || w.numel() == 0) {
      return false;
    }
    for (size_t i = 0; i < sp; i++) {
      if (strides_[i] != w.dim(int(2 + i)) || dilations_[i] != 1 || pads_[i] != 0 ||
          pads_[sp + i] != 0) {
        return false;
      }
    }
    return auto_pad_ == "NOTSET" || auto_pad_ == "VALID";
  }

  // The oneDNN sizes of this call, checking the operands against each other and the output.
  ConvGeometry geometry(const Tensor& x, const Tensor& w, const Tensor* bias,
                        const Tensor& y) const {
    const int64_t r = x.rank();
    const size_t sp = size_t(r - 2);
    auto shapes = [&] {
      return tensors_str(bias ? std::vector<Tensor>{x, w, *bias} : std::vector<Tensor>{x, w});
    };
    if (r < 3 || r > 5 || w.rank() != r || strides_.size() != sp || dilations_.size() != sp ||
        pads_.size() != 2 * sp) {
      fail(
          "input and weight must both be rank 3 (1-D), 4 (2-D) or 5 (3-D) with one stride, "
          "dilation and two pads per spatial axis, got " +
          shapes());
    }
    const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0);
    if (M % group_ != 0 || C % group_ != 0 || w.dim(1) * group_ != C) {
      fail("group " + std::to_string(group_) + " does not split input " + shapes() +
               " evenly (W must be [M, C/group, k...], group dividing M and C)",
           "check the group attribute against the channel counts");
    }
    if (bias && (bias->rank() != 1 || bias->dim(0) != M)) {
      fail("bias must have one value per output channel (" + std::to_string(M) + "), got " +
           shapes());
    }
    ConvGeometry g;
    const size_t nd = std::max<size_t>(2, sp);  // oneDNN's spatial axes (1-D as 2-D)
    dims len(nd, 1), k(nd, 1), out(nd, 1);
    g.strides.assign(nd, 1);
    g.dilates.assign(nd, 0);  // oneDNN counts dilation from 0
    g.pad_l.assign(nd, 0);
    g.pad_r.assign(nd, 0);
    Sizes want{N, M};
    for (size_t i = 0; i < sp; i++) {
      const size_t a = nd - sp + i;
      len[a] = x.dim(int(2 + i));
      k[a] = w.dim(int(2 + i));
      const ConvAxis ca =
          conv_axis(len[a], k[a], strides_[i], dilations_[i], auto_pad_, pads_[i], pads_[sp + i]);
      if (ca.out < 1) {
        fail("spatial axis " + std::to_string(i) + " gives no output for " + shapes() +
                 " (kernel " + std::to_string(k[a]) + ", dilation " +
                 std::to_string(dilations_[i]) + ")",
             "pad the input or use a smaller kernel or dilation");
      }
      out[a] = ca.out;
      g.strides[a] = strides_[i];
      g.dilates[a] = dilations_[i] - 1;
      g.pad_l[a] = ca.pad_begin;
      g.pad_r[a] = ca.pad_end;
      want.push_back(ca.out);
    }
    if (y.sizes() != want) {
      fail("output " + tensors_str({y}) + " does not match the convolution of " + shapes() +
           ", which gives " + sizes_str(want));
    }
    g.src = {N, C};
    g.dst = {N, M};
    g.wei = group_ == 1 ? dims{M, C} : dims{group_, M / group_, C / group_};
    g.src.insert(g.src.end(), len.begin(), len.end());
    g.dst.insert(g.dst.end(), out.begin(), out.end());
    g.wei.insert(g.wei.end(), k.begin(), k.end());
    g.bias = bias ? M : 0;
    return g;
  }

  void fill_bias(const Tensor* bias, const Tensor& y) const {
    const int64_t N = y.dim(0), M = y.dim(1), S = y.numel() / std::max<int64_t>(1, N * M);
    Tensor b32(DType::f32, {M});
    for (int64_t m = 0; m < M; m++) b32.set(m, bias ? bias->get(m) : 0.0);
    std::vector<float> row(static_cast<size_t>(S));
    for (int64_t i = 0; i < N * M; i++) {
      std::fill(row.begin(), row.end(), b32.data_as<float>()[i % M]);
      convert_floats(DType::f32, row.data(), y.dtype(),
                     static_cast<char*>(y.data()) + size_t(i * S) * dtype_size(y.dtype()), S);
    }
  }

  // Builds (or finds) the primitive for geometry g in compute dtype cdt; null if unsupported.
  std::shared_ptr<ConvPrim> get_prim(const ConvGeometry& g, dt cdt) const {
    std::vector<int64_t> key{int64_t(cdt), g.bias};
    for (const dims* d : {&g.src, &g.wei, &g.dst, &g.strides, &g.dilates, &g.pad_l, &g.pad_r}) {
      key.push_back(int64_t(d->size()));
      key.insert(key.end(), d->begin(), d->end());
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::shared_ptr<ConvPrim> p = create(g, cdt);
    if (cache_.size() > 256) cache_.clear();  // bound memory for many distinct shapes
    cache_[key] = p;
    return p;
  }

  static std::shared_ptr<ConvPrim> create(const ConvGeometry& g, dt cdt) {
    try {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      auto p = std::make_shared<ConvPrim>();
      p->src = dnnl_plain_md(g.src, cdt);
      p->dst = dnnl_plain_md(g.dst, cdt);
      p->wei = dnnl_plain_md(g.wei, cdt);
      p->has_bias = g.bias > 0;
      if (p->has_bias) p->bias = dnnl_plain_md({g.bias}, dt::f32);
      const auto fwd = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      auto d = p->has_bias
                   ? dnnl::convolution_forward::desc(fwd, alg, p->src, p->wei, p->bias, p->dst,
                                                     g.strides, g.dilates, g.pad_l, g.pad_r)
                   : dnnl::convolution_forward::desc(fwd, alg, p->src, p->wei, p->dst, g.strides,
                                                     g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, dnnl_cpu_engine(),
                                                   /*allow_empty=*/true);
      if (!pd) return nullptr;
      p->prim = dnnl::convolution_forward(pd);
      p->scratch_bytes = pd.scratchpad_desc().get_size();
      return p;
    } catch (const dnnl::error&) {
      return nullptr;
    }
  }

  std::vector<int64_t> strides_, dilations_, pads_;
  int64_t group_;
  std::string auto_pad_;
  Sizes w32_sizes_;
  std::vector<float> w32_;              // constant bf16 / f16 weights in f32 (else empty)
  std::unique_ptr<PatchMatMul> patch_;  // constant f32 weights whose kernel tiles the input
  Sizes patch_sizes_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<ConvPrim>> cache_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Conv, "make_conv_kernel: " + n.describe());
  return std::make_unique<ConvKernel>(n);
}

}  // namespace ubfuse::cpu
