// Reference quantization and integer products (ONNX opset 13 forms), in double (reference_ops.h).
// The quotients and products ONNX's definitions take in float32 are taken in float32 here too, so
// a tie after rounding is the same tie.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/shape_util.h"
#include "kernels/reference/reference_ops.h"
#include "ubfuse/error.h"

namespace ubfuse::ref::detail {

// Element i's index into a per-axis parameter p (one element: per tensor).
static size_t param_index(const Node& n, const Sizes& xs, const RefTensor& p, int64_t i) {
  if (p.data.size() == 1) return 0;
  const int64_t axis = n.attr_int("axis", 1);
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < xs.size(); d++) inner *= xs[d];
  return size_t((i / inner) % xs[size_t(axis)]);
}

RefTensor quantize_linear(const Node& n, const std::vector<RefTensor>& in) {
  const DType t = n.out()->dtype;
  RefTensor y = make(n, in[0].sizes);
  for (size_t i = 0; i < y.data.size(); i++) {
    const size_t k = param_index(n, in[0].sizes, in[1], int64_t(i));
    const double zp = in.size() > 2 ? in[2].data[k] : 0;
    const float q = float(in[0].data[i]) / float(in[1].data[k]);
    y.data[i] = saturate(std::nearbyint(double(q)) + zp, t);
  }
  return y;
}

RefTensor dequantize_linear(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor y = make(n, in[0].sizes);
  for (size_t i = 0; i < y.data.size(); i++) {
    const size_t k = param_index(n, in[0].sizes, in[1], int64_t(i));
    const double zp = in.size() > 2 ? in[2].data[k] : 0;
    y.data[i] = double(float(in[0].data[i] - zp) * float(in[1].data[k]));
  }
  return y;
}

// ONNX's DynamicQuantizeLinear: the range widened to include 0, scale = range / 255 (1 / 255 for
// an all-zero input, whose range is empty), zero point = saturate(round(-min / scale)).
std::vector<RefTensor> dynamic_quantize_linear(const RefTensor& x) {
  float lo = 0, hi = 0;
  for (double v : x.data) {
    lo = std::min(lo, float(v));
    hi = std::max(hi, float(v));
  }
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const float zp = float(std::nearbyint(saturate(double(0.0f - lo / scale), DType::u8)));
  // Its outputs' dtypes are fixed (DynamicQuantMatMul's reference calls this with a node of one
  // f32 output).
  auto part = [](Sizes sizes, DType t) {
    RefTensor r;
    r.data.assign(size_t(numel(sizes)), 0.0);
    r.sizes = std::move(sizes);
    r.dtype = t;
    return r;
  };
  RefTensor y = part(x.sizes, DType::u8), ys = part({}, DType::f32), yz = part({}, DType::u8);
  for (size_t i = 0; i < y.data.size(); i++) {
    y.data[i] = saturate(std::nearbyint(double(float(x.data[i]) / scale)) + zp, DType::u8);
  }
  ys.data[0] = scale;
  yz.data[0] = zp;
  return {y, ys, yz};
}

// A per-row (of a) or per-column (of b) parameter p's value for row or column r.
static double row_col(const RefTensor& p, int64_t r) {
  return p.data.size() == 1 ? p.data[0] : p.data[size_t(r)];
}

// (a - a_zp) and (b - b_zp) of a MatMulInteger / QLinearMatMul, as plain matrices for matmul().
static std::vector<RefTensor> minus_zero_points(const RefTensor& a, const RefTensor* za,
                                                const RefTensor& b, const RefTensor* zb) {
  RefTensor da = a, db = b;
  const int64_t k = a.sizes.back(), m = a.sizes.size() > 1 ? a.sizes[a.sizes.size() - 2] : 1;
  const int64_t nn = b.sizes.size() > 1 ? b.sizes.back() : 1;
  for (size_t i = 0; za && i < da.data.size(); i++) da.data[i] -= row_col(*za, int64_t(i) / k % m);
  for (size_t i = 0; zb && i < db.data.size(); i++) db.data[i] -= row_col(*zb, int64_t(i) % nn);
  return {da, db};
}

RefTensor matmul_integer(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor y = matmul(n, minus_zero_points(in[0], in.size() > 2 ? &in[2] : nullptr, in[1],
                                            in.size() > 3 ? &in[3] : nullptr));
  for (double& v : y.data) v = double(int32_t(uint32_t(int64_t(v))));  // i32 wraps
  return y;
}

// ONNX's QLinearMatMul: the integer product times a_scale * b_scale / y_scale (that factor in
// float32, the product in double as numpy takes int32 times float32), rounded, plus y_zp,
// saturated.
RefTensor qlinear_matmul(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor y = matmul(n, minus_zero_points(in[0], &in[2], in[3], &in[5]));
  const DType t = n.out()->dtype;
  const int64_t nn = y.sizes.empty() ? 1 : in[3].sizes.size() > 1 ? y.sizes.back() : 1;
  const int64_t m = in[0].sizes.size() > 1 ? in[0].sizes[in[0].sizes.size() - 2] : 1;
  for (size_t i = 0; i < y.data.size(); i++) {
    const int64_t col = int64_t(i) % nn, row = int64_t(i) / nn % m;
    const float f = float(row_col(in[1], row)) * float(row_col(in[4], col)) / float(in[6].data[0]);
    y.data[i] = saturate(std::nearbyint(y.data[i] * double(f)) + in[7].data[0], t);
  }
  return y;
}

// The chain it stands for, step by step: DynamicQuantizeLinear, MatMulInteger, the i32 sum as f32,
// times the f32 product of the two scales.
RefTensor dynamic_quant_matmul(const Node& n, const std::vector<RefTensor>& in) {
  const std::vector<RefTensor> q = dynamic_quantize_linear(in[0]);
  RefTensor y = matmul(n, minus_zero_points(q[0], &q[2], in[1], in.size() > 3 ? &in[3] : nullptr));
  const int64_t nn = y.sizes.back();
  for (size_t i = 0; i < y.data.size(); i++) {
    const float acc = float(int32_t(uint32_t(int64_t(y.data[i]))));
    y.data[i] = acc * (float(q[1].data[0]) * float(row_col(in[2], int64_t(i) % nn)));
  }
  return y;
}

// a times the weight dequantized in double: w[k, n] = (code - zero point) * scale of k's block,
// codes and zero points packed low bits first (MatMulNBits in ops.def).
RefTensor matmul_nbits(const Node& n, const std::vector<RefTensor>& in) {
  const int64_t K = n.attr_int("K", 0), N = n.attr_int("N", 0), bits = n.attr_int("bits", 4),
                bs = n.attr_int("block_size", 0);
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8, zrow = (blocks * bits + 7) / 8;
  auto code = [&](const RefTensor& t, int64_t at, int64_t i) {
    const int64_t byte = int64_t(t.data[size_t(at + (bits == 8 ? i : i / 2))]);
    return bits == 8 ? byte : (byte >> (4 * (i % 2))) & 0xF;
  };
  RefTensor w{{K, N}, std::vector<double>(size_t(K * N)), DType::f32};
  for (int64_t c = 0; c < N; c++) {
    for (int64_t blk = 0; blk < blocks; blk++) {
      const double zero =
          in.size() > 3 ? double(code(in[3], c * zrow, blk)) : double(1 << (bits - 1));
      const double s = in[2].data[size_t(c * blocks + blk)];
      for (int64_t i = 0; i < bs && blk * bs + i < K; i++) {
        w.data[size_t((blk * bs + i) * N + c)] =
            (double(code(in[1], (c * blocks + blk) * blob, i)) - zero) * s;
      }
    }
  }
  RefTensor a = in[0];
  if (a.sizes.size() == 1) a.sizes.insert(a.sizes.begin(), 1);
  RefTensor y = matmul(n, {a, w});
  y.sizes = in[0].sizes;
  y.sizes.back() = N;
  return y;
}

// As dynamic_quant_matmul around a ConvInteger; the factor per output channel (axis 1).
RefTensor dynamic_quant_conv(const Node& n, const std::vector<RefTensor>& in) {
  const std::vector<RefTensor> q = dynamic_quantize_linear(in[0]);
  std::vector<RefTensor> ci = {q[0], in[1], q[2]};
  if (in.size() > 3) ci.push_back(in[3]);
  RefTensor y = conv_integer(n, ci);
  const int64_t mo = y.sizes[1], per = mo ? int64_t(y.data.size()) / (y.sizes[0] * mo) : 0;
  for (size_t i = 0; i < y.data.size(); i++) {
    const float acc = float(int32_t(uint32_t(int64_t(y.data[i]))));
    y.data[i] = acc * (float(q[1].data[0]) * float(row_col(in[2], int64_t(i) / per % mo)));
  }
  y.dtype = DType::f32;
  return y;
}

RefTensor conv_integer(const Node& n, const std::vector<RefTensor>& in) {
  RefTensor x = in[0], w = in[1];
  if (in.size() > 2) {
    for (double& v : x.data) v -= in[2].data[0];
  }
  if (in.size() > 3) {
    const int64_t per = w.sizes[0] ? int64_t(w.data.size()) / w.sizes[0] : 0;
    for (size_t i = 0; i < w.data.size(); i++) w.data[i] -= row_col(in[3], int64_t(i) / per);
  }
  return conv(n, {x, w});
}

}  // namespace ubfuse::ref::detail
