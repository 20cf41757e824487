// MatMulInteger, QLinearMatMul and ConvInteger on one integer product (int_gemm.h):
//   C[m, n] = sum_k (A[m, k] - za[m]) * (B[k, n] - zb[n])   (i32, wrapping)
// with A and B u8 or i8 and the zero points per row of A / per column of B (a scalar repeated).
// A constant B is made ready for the product once, when the kernel is made.
// * QLinearMatMul requantizes C: saturate(round(C * (a_scale * b_scale / y_scale)) + y_zp), the
//   factor in f32 and the product in double (as ONNX's reference, numpy, computes int32 x float32).
// * ConvInteger: per sample and group, im2col of x (pads take x's zero point, so they are zero
//   after its subtraction, as ONNX's reference subtracts before a zero-padded conv), then W_g
//   [M/g, C/g * k] times the columns with w's zero points per row and x's per column.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ir/shape_util.h"
#include "kernels/cpu/int_gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantize.h"

namespace ubfuse::cpu {
namespace {

// A zero point or scale tensor (one element, per row or per column) as `len` values.
template <typename T, typename Get>
std::vector<T> expand_param(const Tensor* t, int64_t len, Get get) {
  std::vector<T> v(size_t(len), T(0));
  if (!t) return v;
  for (int64_t i = 0; i < len; i++) v[size_t(i)] = get(*t, t->numel() == 1 ? 0 : i);
  return v;
}

int32_t zp_get(const Tensor& t, int64_t i) { return load8(t.data(), t.dtype(), i); }
float scale_get(const Tensor& t, int64_t i) { return t.data_as<float>()[i]; }

class MatMulIntegerKernel : public KernelBase {
 public:
  explicit MatMulIntegerKernel(const Node& n)
      : KernelBase(n), qlinear_(n.op == OpKind::QLinearMatMul) {
    // Constant weights are made ready for oneDNN once. A u8 A with a zero point (input 2 of both
    // ops), as DynamicQuantizeLinear makes it, also gets B packed for oneDNN to apply that zero
    // point itself.
    const bool a_zp =
        n.inputs.size() > 2 && n.inputs[2] != nullptr && n.inputs[0]->dtype == DType::u8;
    b_ = prepare_constant_b(n, qlinear_ ? 3 : 1, a_zp);
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    if (qlinear_) {
      check_arity(in, 8, 8, out);
    } else {
      check_arity(in, 2, 4, out);
    }
    const Tensor& a = in[0];
    const Tensor& b = qlinear_ ? in[3] : in[1];
    const Tensor* za = qlinear_ ? &in[2] : in.size() > 2 ? &in[2] : nullptr;
    const Tensor* zb = qlinear_ ? &in[5] : in.size() > 3 ? &in[3] : nullptr;
    const Tensor& y = out[0];
    const DType yt = qlinear_ ? in[7].dtype() : DType::i32;
    if (!is_int8(a.dtype()) || !is_int8(b.dtype()) || y.dtype() != yt ||
        (za && za->dtype() != a.dtype()) || (zb && zb->dtype() != b.dtype())) {
      fail("needs u8 or i8 operands, zero points of their dtypes and an " +
           std::string(dtype_name(yt)) + " output, got " + tensors_str(in) + " -> " +
           tensors_str(out));
    }
    // numpy's matmul: 1-D operands become a row / a column.
    Sizes sa = a.sizes(), sb = b.sizes();
    if (sa.size() == 1) sa.insert(sa.begin(), 1);
    if (sb.size() == 1) sb.push_back(1);
    const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    if (sb[sb.size() - 2] != k) {
      fail("inner dims differ: " + sizes_str(a.sizes()) + " x " + sizes_str(b.sizes()));
    }
    const Sizes ba(sa.begin(), sa.end() - 2), bbs(sb.begin(), sb.end() - 2);
    std::string why;
    auto bshape = broadcast_shapes(to_shape(ba), to_shape(bbs), &why);
    if (!bshape) fail("batch dims do not broadcast: " + why);
    const Sizes batch = static_sizes(*bshape);
    if (y.numel() != numel(batch) * m * n) {
      fail("output " + tensors_str({y}) + " does not hold " + sizes_str(a.sizes()) + " x " +
           sizes_str(b.sizes()));
    }
    auto check_len = [&](const Tensor* t, int64_t len, const char* what) {
      if (t && t->numel() != 1 && t->numel() != len) {
        fail(std::string(what) + " " + tensors_str({*t}) + " is neither one element nor " +
             std::to_string(len));
      }
    };
    check_len(za, m, "a's zero point");
    check_len(zb, n, "b's zero point");
    if (qlinear_) {
      check_len(&in[1], m, "a_scale");
      check_len(&in[4], n, "b_scale");
    }
    const std::vector<int32_t> zav = expand_param<int32_t>(za, m, zp_get);
    const std::vector<int32_t> zbv = expand_param<int32_t>(zb, n, zp_get);
    int32_t* c = qlinear_ ? nullptr : y.data_as<int32_t>();
    std::vector<int32_t> cbuf;
    if (qlinear_) {
      cbuf.resize(size_t(y.numel()));
      c = cbuf.data();
    }
    const char* pa = static_cast<const char*>(a.data());
    const char* pb = static_cast<const char*>(b.data());
    const bool b_batched = numel(bbs) > 1;
    if (!b_batched) {
      // B shared by every batch: A's batch folds into M (its zero points repeat per batch).
      const int64_t nb = numel(batch), mm = nb * m;
      std::vector<int32_t> zam(static_cast<size_t>(mm));
      for (int64_t i = 0; i < mm; i++) zam[size_t(i)] = zav[size_t(i % m)];
      int_gemm(pa, a.dtype(), pb, b.dtype(), zam.data(), zbv.data(), c, mm, k, n, pool,
               b_.ready_for(b));
    } else {
      const auto sta = broadcast_strides(ba, batch), stb = broadcast_strides(bbs, batch);
      const int64_t nb = numel(batch);
      for (int64_t t = 0; t < nb; t++) {
        int64_t ia = 0, ib = 0, f = t;
        for (size_t d = batch.size(); d-- > 0;) {
          const int64_t cd = f % batch[d];
          f /= batch[d];
          ia += cd * sta[d];
          ib += cd * stb[d];
        }
        int_gemm(pa + ia * m * k, a.dtype(), pb + ib * k * n, b.dtype(), zav.data(), zbv.data(),
                 c + t * m * n, m, k, n, pool);
      }
    }
    if (!qlinear_) return;
    // Requantize: the factor per (row, column) in f32, the product in double.
    const std::vector<float> sa_v = expand_param<float>(&in[1], m, scale_get);
    const std::vector<float> sb_v = expand_param<float>(&in[4], n, scale_get);
    const float ys = in[6].data_as<float>()[0];
    const double yz = zp_get(in[7], 0);
    const double lo = yt == DType::i8 ? -128 : 0, hi = yt == DType::i8 ? 127 : 255;
    const int64_t total = y.numel();
    pool.parallel_for(total, kMinParallelElems, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; i++) {
        const int64_t j = i % n, r = i / n % m;
        const float f = sa_v[size_t(r)] * sb_v[size_t(j)] / ys;
        const double q = std::min(hi, std::max(lo, std::nearbyint(double(c[i]) * double(f)) + yz));
        if (yt == DType::i8) {
          y.data_as<int8_t>()[i] = int8_t(q);
        } else {
          y.data_as<uint8_t>()[i] = uint8_t(q);
        }
      }
    });
  }

 private:
  bool qlinear_;
  ConstantB b_;  // constant B made ready for oneDNN, or empty
};

class ConvIntegerKernel : public KernelBase {
 public:
  explicit ConvIntegerKernel(const Node& n)
      : KernelBase(n),
        strides_(n.attr_ints("strides")),
        dilations_(n.attr_ints("dilations")),
        pads_(n.attr_ints("pads")),
        group_(n.attr_int("group", 1)),
        auto_pad_(n.attr_str("auto_pad", "NOTSET")) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 4, out);
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const Tensor* xz = in.size() > 2 ? &in[2] : nullptr;
    const Tensor* wz = in.size() > 3 ? &in[3] : nullptr;
    const Tensor& y = out[0];
    const int64_t r = x.rank();
    const size_t sp = size_t(r - 2);
    if (!is_int8(x.dtype()) || !is_int8(w.dtype()) || y.dtype() != DType::i32 ||
        (xz && (xz->dtype() != x.dtype() || xz->numel() != 1)) ||
        (wz && (wz->dtype() != w.dtype() || (wz->numel() != 1 && wz->numel() != w.dim(0)))) ||
        (r != 3 && r != 4) || w.rank() != r || strides_.size() != sp || dilations_.size() != sp ||
        pads_.size() != 2 * sp) {
      fail(
          "needs u8 or i8 x [N, C, L] or [N, C, H, W] and w of its rank, zero points of their "
          "dtypes (x's one element, w's one or one per output channel) and an i32 output, got " +
          tensors_str(in) + " -> " + tensors_str(out));
    }
    // Axis 0 the height (1 for a 1-D conv), axis 1 the width.
    int64_t len[2] = {1, 1}, kk[2] = {1, 1}, st[2] = {1, 1}, dl[2] = {1, 1}, pb[2] = {0, 0},
            on[2] = {1, 1};
    for (size_t i = 0; i < sp; i++) {
      const size_t ax = 2 - sp + i;
      len[ax] = x.dim(int(2 + i));
      kk[ax] = w.dim(int(2 + i));
      st[ax] = strides_[i];
      dl[ax] = dilations_[i];
      const ConvAxis ca =
          conv_axis(len[ax], kk[ax], st[ax], dl[ax], auto_pad_, pads_[i], pads_[sp + i]);
      pb[ax] = ca.pad_begin;
      on[ax] = ca.out;
    }
    const int64_t nbatch = x.dim(0), c = x.dim(1), mo = w.dim(0), g = group_;
    const int64_t cg = c / g, mg = mo / g, rows = cg * kk[0] * kk[1], cols = on[0] * on[1];
    Sizes want{nbatch, mo};
    for (size_t i = 0; i < sp; i++) want.push_back(on[2 - sp + i]);
    if (y.sizes() != want || cg * g != c || mg * g != mo || w.dim(1) != cg) {
      fail("output " + tensors_str({y}) + " does not match the conv of " + tensors_str({x, w}));
    }
    if (y.numel() == 0) return;
    const int32_t xzp = xz ? load8(xz->data(), xz->dtype(), 0) : 0;
    const std::vector<int32_t> wzv = expand_param<int32_t>(wz, mo, zp_get);
    const std::vector<int32_t> xzv(size_t(cols), xzp);
    // The columns: 8-bit, x's dtype, pads holding its zero point.
    std::vector<uint8_t> col(size_t(rows * cols));
    const uint8_t pad_byte = uint8_t(xzp);
    const uint8_t* px = x.data_as<uint8_t>();
    for (int64_t nb = 0; nb < nbatch; nb++) {
      for (int64_t gi = 0; gi < g; gi++) {
        for (int64_t ci = 0; ci < cg; ci++) {
          const uint8_t* xc = px + ((nb * c) + gi * cg + ci) * len[0] * len[1];
          for (int64_t ky = 0; ky < kk[0]; ky++) {
            for (int64_t kx = 0; kx < kk[1]; kx++) {
              uint8_t* dst = col.data() + ((ci * kk[0] + ky) * kk[1] + kx) * cols;
              for (int64_t oy = 0; oy < on[0]; oy++) {
                const int64_t iy = oy * st[0] - pb[0] + ky * dl[0];
                for (int64_t ox = 0; ox < on[1]; ox++) {
                  const int64_t ix = ox * st[1] - pb[1] + kx * dl[1];
                  const bool inside = iy >= 0 && iy < len[0] && ix >= 0 && ix < len[1];
                  dst[oy * on[1] + ox] = inside ? xc[iy * len[1] + ix] : pad_byte;
                }
              }
            }
          }
        }
        const uint8_t* wg = w.data_as<uint8_t>() + gi * mg * rows;
        int32_t* yg = y.data_as<int32_t>() + (nb * mo + gi * mg) * cols;
        int_gemm(wg, w.dtype(), col.data(), x.dtype(), wzv.data() + gi * mg, xzv.data(), yg, mg,
                 rows, cols, pool);
      }
    }
  }

 private:
  std::vector<int64_t> strides_, dilations_, pads_;
  int64_t group_;
  std::string auto_pad_;
};

// DynamicQuantConv: x quantized once (DynamicQuantizeLinear's pass), ConvInteger's product into a
// buffer of the calling thread, then float(sum) * (x_scale * w_scale[m]) per output channel m, as
// the chain's Cast and Mul compute it.
class DynamicQuantConvKernel : public KernelBase {
 public:
  explicit DynamicQuantConvKernel(const Node& n) : KernelBase(n), conv_(n) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 3, 4, out);
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const Tensor& ws = in[2];
    const Tensor& y = out[0];
    const int64_t mo = w.rank() >= 1 ? w.dim(0) : 0;
    if (!is_float(x.dtype()) || ws.dtype() != DType::f32 || (ws.numel() != 1 && ws.numel() != mo) ||
        y.dtype() != DType::f32 || y.rank() < 2 || y.dim(1) != mo) {
      fail(
          "needs float x, int8 w [M, ...], w_scale f32 ([] or [M]) and an f32 [N, M, ...] "
          "output, got " +
          tensors_str(in) + " -> " + tensors_str(out));
    }
    thread_local Tensor qbuf, ibuf;  // 64-byte aligned, grown as needed
    if (!qbuf.defined() || qbuf.numel() < x.numel()) qbuf = Tensor(DType::u8, {x.numel()});
    if (!ibuf.defined() || ibuf.numel() < y.numel()) ibuf = Tensor(DType::i32, {y.numel()});
    const DynamicQuantized dq = dynamic_quantize(x, qbuf.data_as<uint8_t>(), pool);
    std::vector<Tensor> ci = {Tensor::view(DType::u8, x.sizes(), qbuf.data()), w,
                              Tensor::from_floats(DType::u8, {}, {float(dq.zero_point)})};
    if (in.size() > 3) ci.push_back(in[3]);
    std::vector<Tensor> co = {Tensor::view(DType::i32, y.sizes(), ibuf.data())};
    conv_.run(ci, co, pool);
    const int64_t rows = y.dim(0) * mo, per = rows ? y.numel() / rows : 0;
    const int32_t* c = ibuf.data_as<int32_t>();
    float* py = y.data_as<float>();
    pool.parallel_for(rows, grain_for(per), [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; r++) {
        const float f = dq.scale * ws.data_as<float>()[ws.numel() == 1 ? 0 : r % mo];
        for (int64_t j = 0; j < per; j++) py[r * per + j] = float(c[r * per + j]) * f;
      }
    });
  }

 private:
  ConvIntegerKernel conv_;  // reads the node's Conv attributes only
};

}  // namespace

std::unique_ptr<OpKernel> make_matmul_integer_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::MatMulInteger || n.op == OpKind::QLinearMatMul,
            "make_matmul_integer_kernel: " + n.describe());
  return std::make_unique<MatMulIntegerKernel>(n);
}

std::unique_ptr<OpKernel> make_conv_integer_kernel(const Node& n) {
  if (n.op == OpKind::DynamicQuantConv) return std::make_unique<DynamicQuantConvKernel>(n);
  UBF_CHECK(n.op == OpKind::ConvInteger, "make_conv_integer_kernel: " + n.describe());
  return std::make_unique<ConvIntegerKernel>(n);
}

}  // namespace ubfuse::cpu
