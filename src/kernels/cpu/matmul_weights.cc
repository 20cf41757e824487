#include "kernels/cpu/matmul_weights.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/matmul_small.h"
#include "util/big_alloc.h"

namespace ubfuse::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// The primitive descriptor of [M, K] x [K, N] in cdt with weights in wei.
dnnl::matmul::primitive_desc matmul_pd(int64_t M, int64_t K, int64_t N, dt cdt,
                                       const dnnl::memory::desc& wei) {
  return dnnl_matmul_pd(dnnl_plain_md({M, K}, cdt), wei, dnnl_plain_md({M, N}, cdt));
}

// B [K, N] (plain, in cdt) reordered into the layout oneDNN picks for M rows of A; its descriptor
// in *md_out. Null where oneDNN has no kernel.
std::shared_ptr<dnnl::memory> pack(int64_t M, int64_t K, int64_t N, dt cdt, const void* plain,
                                   dnnl::memory::desc* md_out) {
  try {
    auto pd =
        matmul_pd(M, K, N, cdt, dnnl::memory::desc({K, N}, cdt, dnnl::memory::format_tag::any));
    if (!pd) return nullptr;
    *md_out = pd.weights_desc();
    // In ubfuse's tensor storage (huge pages for large weights), freed with the memory object.
    std::unique_ptr<void, decltype(&std::free)> buf(
        alloc_tensor_bytes(std::max<size_t>(1, md_out->get_size())), &std::free);
    if (!buf) return nullptr;
    auto* m = new dnnl::memory(*md_out, dnnl_cpu_engine(), buf.get());
    std::shared_ptr<dnnl::memory> mem(m, [b = buf.release()](dnnl::memory* p) {
      delete p;
      std::free(b);
    });
    dnnl::memory user(dnnl_plain_md({K, N}, cdt), dnnl_cpu_engine(), const_cast<void*>(plain));
    dnnl::stream s(dnnl_cpu_engine());
    dnnl::reorder(user, *mem).execute(s, user, *mem);
    s.wait();
    return mem;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// The distance between 64-column panels when oneDNN packed [K, N] f32 weights as 16a64b blocks
// in panel order; else 0.
int64_t panel_stride(const dnnl::memory::desc& md, int64_t K) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 2 || d.offset0 != 0) return 0;
  const auto& b = d.format_desc.blocking;
  const int64_t k16 = (K + 15) / 16 * 16;
  if (b.inner_nblks != 2 || b.inner_blks[0] != 16 || b.inner_idxs[0] != 0 ||
      b.inner_blks[1] != 64 || b.inner_idxs[1] != 1 || b.strides[0] != 1024 ||
      b.strides[1] != k16 * 64 || d.padded_dims[0] != k16) {
    return 0;
  }
  return b.strides[1];
}

// Whether oneDNN's f32 kernel for weights in wmd is gemm:jit, which copies B into its own panels
// inside every call.
bool repacks_per_call(int64_t M, int64_t K, int64_t N, const dnnl::memory::desc& wmd) {
  try {
    auto pd = matmul_pd(M, K, N, dt::f32, wmd);
    return pd && pd.weights_desc() == wmd && std::string(pd.impl_info_str()).rfind("gemm:", 0) == 0;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

PackedWeights pack_matmul_weights(const Node& n, const Tensor& bt) {
  PackedWeights w;
  const Value* av = n.inputs[0];
  if (!is_float(bt.dtype()) || bt.rank() < 1) return w;
  Sizes sb = bt.sizes();
  if (sb.size() == 1) sb.push_back(1);
  for (size_t i = 0; i + 2 < sb.size(); ++i) {
    if (sb[i] != 1) return w;  // batched weights: plain path
  }
  const int64_t K = sb[sb.size() - 2], N = sb.back();
  // A representative M: A's rows where its dims are known, else 256.
  int64_t M = 256;
  if (!av->shape.empty() && av->shape.size() >= 2 && av->shape[av->shape.size() - 2].is_static()) {
    M = av->shape[av->shape.size() - 2].value();
    for (size_t i = 0; i + 2 < av->shape.size(); ++i) {
      if (av->shape[i].is_static()) M *= av->shape[i].value();
    }
  }
  M = std::max<int64_t>(1, M);
  // bf16 weights stay bf16 where oneDNN has a bf16 kernel; otherwise (and for f32 / f16) the
  // weights are packed as f32.
  if (bt.dtype() == DType::bf16) w.bf16 = pack(M, K, N, dt::bf16, bt.data(), &w.bf16_md);
  if (!w.bf16 && bt.dtype() == DType::f32) {
    w.f32 = pack(M, K, N, dt::f32, bt.data(), &w.f32_md);
  } else if (!w.bf16) {
    std::vector<float> w32(static_cast<size_t>(K * N));
    convert_floats(bt.dtype(), bt.data(), DType::f32, w32.data(), K * N);
    w.f32 = pack(M, K, N, dt::f32, w32.data(), &w.f32_md);
  }
  w.sizes = bt.sizes();
  if (w.f32) {
    w.panel_stride = panel_stride(w.f32_md, K);
    w.panel_tag =
        w.f32_md == dnnl::memory::desc({K, N}, dt::f32, dnnl::memory::format_tag::BA16a64b);
  }
  // Where oneDNN's f32 kernel would copy B into its panels inside every call (gemm:jit on AVX2),
  // ubfuse packs them once for its own loop, and oneDNN, past that loop's rows, reads B as given
  // (the packed copy would hold the same bytes twice).
  if (w.f32 && bt.dtype() == DType::f32 && w.panel_stride == 0 && own_panels_fit() &&
      repacks_per_call(M, K, N, w.f32_md)) {
    w.own_panels.reset(
        static_cast<float*>(alloc_tensor_bytes(size_t(own_panels_floats(K, N)) * sizeof(float))));
    if (w.own_panels) {
      pack_own_panels_f32(bt.data_as<float>(), K, N, w.own_panels.get());
      w.f32.reset();
    }
  }
  return w;
}

}  // namespace ubfuse::cpu
