#include "kernels/cpu/dyn_quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/quantize.h"

namespace ubfuse::cpu {

// Constant weights made ready for oneDNN once, with x's zero point applied by oneDNN.
DynamicQuantMatMulKernel::DynamicQuantMatMulKernel(const Node& n)
    : KernelBase(n), w_(prepare_constant_b(n, 1, true)) {}

void DynamicQuantMatMulKernel::quantize(const std::vector<Tensor>& in, Quantized& q,
                                        ThreadPool& pool) const {
  if (in.size() < 3 || in.size() > 6 || in.size() == 5) {
    fail("takes 3, 4 or 6 inputs, got " + tensors_str(in));
  }
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& ws = in[2];
  const Tensor* wz = in.size() > 3 ? &in[3] : nullptr;
  if (!is_float(x.dtype()) || x.rank() < 2 || !is_int8(w.dtype()) || w.rank() != 2 ||
      x.dim(-1) != w.dim(0) || ws.dtype() != DType::f32 ||
      (ws.numel() != 1 && ws.numel() != w.dim(1)) ||
      (wz && (wz->dtype() != w.dtype() || (wz->numel() != 1 && wz->numel() != w.dim(1))))) {
    fail(
        "needs float x [..., M, K], w u8|i8 [K, N], w_scale f32 ([] or [N]) and w's zero "
        "point of w's dtype ([] or [N]), got " +
        tensors_str(in));
  }
  q.k = w.dim(0);
  q.n = w.dim(1);
  q.rows = numel(Sizes(x.sizes().begin(), x.sizes().end() - 1));  // K may be 0
  // 64-byte aligned: oneDNN's int8 product read a 16-byte-aligned A at half the speed (Xeon). Per
  // calling thread, kept at the largest activation it has quantized (one run's worth).
  thread_local Tensor buf;
  if (!buf.defined() || buf.numel() < x.numel()) buf = Tensor(DType::u8, {x.numel()});
  // x's range from its rows' maxima of x and -x when the producer computed them (a NaN among
  // them: the pass over x decides, skipping NaNs as DynamicQuantizeLinear does).
  float range[2];
  bool known = false;
  if (in.size() == 6 && in[4].dtype() == DType::f32 && in[5].dtype() == DType::f32 &&
      in[4].numel() == q.rows && in[5].numel() == q.rows && q.rows > 0) {
    float hi = -std::numeric_limits<float>::infinity(), neg = hi;
    known = true;
    for (int64_t r = 0; r < q.rows && known; r++) {
      const float a = in[4].data_as<float>()[r], b = in[5].data_as<float>()[r];
      known = !std::isnan(a) && !std::isnan(b);
      hi = std::max(hi, a);
      neg = std::max(neg, b);
    }
    range[0] = -neg;
    range[1] = hi;
  }
  const DynamicQuantized dq =
      dynamic_quantize(x, buf.data_as<uint8_t>(), pool, known ? range : nullptr);
  q.a = buf.data_as<uint8_t>();
  q.zero_point = dq.zero_point;
  q.col_scale.resize(size_t(q.n));
  q.w_zero_point.assign(size_t(q.n), 0);
  for (int64_t j = 0; j < q.n; j++) {
    // The chain's Mul(x_scale, w_scale): one f32 product per column.
    q.col_scale[size_t(j)] = dq.scale * ws.data_as<float>()[ws.numel() == 1 ? 0 : j];
    if (wz) q.w_zero_point[size_t(j)] = load8(wz->data(), wz->dtype(), wz->numel() == 1 ? 0 : j);
  }
}

void DynamicQuantMatMulKernel::rows(const std::vector<Tensor>& in, const Quantized& q, int64_t r0,
                                    int64_t r1, float* out, ThreadPool& pool) const {
  const int64_t m = r1 - r0;
  if (m <= 0 || q.n == 0) return;
  const Tensor& w = in[1];
  const std::vector<int32_t> za(size_t(m), q.zero_point);
  // The i32 sums land in out's bytes, then become f32 in place: float(sum) * factor, the Cast and
  // the Mul of the chain.
  auto* c = reinterpret_cast<int32_t*>(out);
  int_gemm(q.a + r0 * q.k, DType::u8, w.data(), w.dtype(), za.data(), q.w_zero_point.data(), c, m,
           q.k, q.n, pool, w_.ready_for(w));
  const float* cs = q.col_scale.data();
  const int64_t n = q.n;
  pool.parallel_for(m, grain_for(n), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; i++) rescale_row(c + i * n, cs, out + i * n, n);
  });
}

void DynamicQuantMatMulKernel::run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
                                   ThreadPool& pool) const {
  check_arity(in, 3, 6, out);
  Quantized q;
  quantize(in, q, pool);
  const Tensor& y = out[0];
  Sizes want = in[0].sizes();
  want.back() = q.n;
  if (y.dtype() != DType::f32 || y.sizes() != want) {
    fail("output " + tensors_str({y}) + " is not f32" + sizes_str(want));
  }
  rows(in, q, 0, q.rows, y.data_as<float>(), pool);
}

std::unique_ptr<OpKernel> make_dynamic_quant_matmul_kernel(const Node& n) {
  return std::make_unique<DynamicQuantMatMulKernel>(n);
}

}  // namespace ubfuse::cpu
