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
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "ir/shape_util.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"

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
  std::vector<float> w32_;  // constant bf16 / f16 weights in f32 (else empty)
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<ConvPrim>> cache_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Conv, "make_conv_kernel: " + n.describe());
  return std::make_unique<ConvKernel>(n);
}

}  // namespace ubfuse::cpu
