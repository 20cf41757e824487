// onnxruntime's contrib ops that its graph optimizer writes into the models it saves
// (SessionOptions.optimized_model_filepath; `scripts/ort.sh --save-optimized`), lowered onto
// ubfuse's ops so that such a model loads as shipped and fusion forms the kernels the original
// graph gets. Domain com.microsoft, but for SimplifiedLayerNormalization, which onnxruntime
// registers in the default domain.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

// x with its last two dims swapped.
Value* swap_last_two(NodeCtx& c, Value* x, const std::string& what) {
  const int64_t r = int64_t(x->shape.size());
  if (r < 2) c.invalid(what + " needs an operand of rank 2 or more, got " + shape_str(x->shape));
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; i++) perm.push_back(i);
  std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
  return c.emit(OpKind::Transpose, {x}, {{"perm", perm}});
}

// FusedMatMul(A, B; alpha, transA, transB): alpha op(A) op(B), a MatMul with its scale.
void fused_matmul(NodeCtx& c) {
  require_float(c, 0);
  if (c.attr_int("transBatchA", 0) != 0 || c.attr_int("transBatchB", 0) != 0) {
    c.unsupported("transBatchA or transBatchB (a batch dim moved into the matrix)");
  }
  Value* a = c.value(0);
  Value* b = c.value(1);
  if (c.attr_int("transA", 0) != 0) a = swap_last_two(c, a, "transA");
  if (c.attr_int("transB", 0) != 0) b = swap_last_two(c, b, "transB");
  Value* y = c.emit(OpKind::MatMul, {a, b});
  const double alpha = c.attr_float("alpha", 1.0);
  if (alpha != 1.0) y = c.emit(OpKind::Mul, {y, scalar_like(c, alpha, y)});
  c.set_output(0, y);
}

// Gelu (erf), BiasGelu(A, B) = Gelu(A + B), FastGelu(X, bias?) = the tanh form of X (+ bias).
template <bool kTanh, bool kBias>
void gelu(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  if (kBias && c.has_input(1)) x = c.emit(OpKind::Add, {x, c.value(1)});
  c.set_output(0,
               c.emit(OpKind::Gelu, {x}, {{"approximate", std::string(kTanh ? "tanh" : "none")}}));
}

// QuickGelu(X; alpha) = X Sigmoid(alpha X): with alpha 1 (SiLU as onnxruntime fuses it), the
// canonicalize pass makes it a SiLU.
void quick_gelu(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  const double alpha = c.attr_float("alpha", 1.702);
  Value* ax = alpha == 1.0 ? x : c.emit(OpKind::Mul, {x, scalar_like(c, alpha, x)});
  c.set_output(0, c.emit(OpKind::Mul, {x, c.emit(OpKind::Sigmoid, {ax})}));
}

// The statistics outputs of the layer norms (mean, inverse standard deviation) are only for
// training; a model that reads them is unsupported.
void no_statistics(NodeCtx& c, std::initializer_list<int> outputs) {
  for (int i : outputs) {
    if (c.output_used(i)) {
      c.unsupported("output " + std::to_string(i) + " (a normalization statistic) is used");
    }
  }
}

// A 1-D parameter of H values (gamma, beta, bias) for rows of length H.
Value* row_param(NodeCtx& c, int i, const Dim& h, const std::string& what) {
  if (!c.has_input(i)) return nullptr;
  Value* p = c.value(i);
  if (p->shape.size() != 1 || p->shape[0] != h) {
    c.invalid(what + " must be [" + h.str() + "] (the hidden size), got " + shape_str(p->shape));
  }
  return p;
}

// SkipLayerNormalization(input, skip, gamma, beta?, bias?; epsilon) and
// SkipSimplifiedLayerNormalization(input, skip, gamma, bias?; epsilon): the norm of
// input + skip (+ bias) over the last axis, output 3 the sum itself.
template <bool kSimplified>
void skip_norm(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  if (x->shape.empty()) c.invalid("input must have rank 1 or more");
  const Dim h = x->shape.back();
  Value* gamma = row_param(c, 2, h, "gamma");
  if (!gamma) c.invalid("gamma is required");
  Value* beta = kSimplified ? nullptr : row_param(c, 3, h, "beta");
  Value* bias = row_param(c, kSimplified ? 3 : 4, h, "bias");
  no_statistics(c, {1, 2});
  Value* sum = c.emit(OpKind::Add, {x, c.value(1)});
  if (bias) sum = c.emit(OpKind::Add, {sum, bias});
  const double eps = c.attr_float("epsilon", 1e-12);
  std::vector<Value*> in{sum, gamma};
  if (beta) in.push_back(beta);
  c.set_output(0, c.emit(kSimplified ? OpKind::RMSNorm : OpKind::LayerNorm, in, {{"eps", eps}}));
  if (c.output_used(3)) c.set_output(3, sum);
}

// SimplifiedLayerNormalization(X, scale; axis, epsilon): RMSNorm over the last axis.
void simplified_layer_norm(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  const int64_t r = c.rank(0);
  if (r == 0) c.invalid("X must have rank 1 or more");
  if (c.norm_axis(c.attr_int("axis", -1), r, "axis") != r - 1) {
    c.unsupported("axis other than the last (normalizing over several axes)");
  }
  c.ignore_attr("stash_type");  // the statistics are computed in f32 whatever it says
  no_statistics(c, {1});
  Value* scale = row_param(c, 1, x->shape.back(), "scale");
  if (!scale) c.invalid("scale is required");
  c.set_output(0, c.emit(OpKind::RMSNorm, {x, scale}, {{"eps", c.attr_float("epsilon", 1e-5)}}));
}

// MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?; K, N, bits, block_size): A times a
// weight quantized in blocks along K (onnxruntime's 4-bit quantizer and onnxruntime-genai's model
// builder write it): W[k, n] = (q - zero point) * scale (codes packed low bits first; zero points
// packed the same, 2^(bits-1) without them). An f32 A runs as ubfuse's MatMulNBits, which keeps
// the packed weight; another float A gets the weight dequantized at import into a constant of its
// dtype (32 / bits times the packed size), an ordinary MatMul.
void matmul_nbits(NodeCtx& c) {
  require_float(c, 0);
  const int64_t K = c.attr_int("K", 0), N = c.attr_int("N", 0), bits = c.attr_int("bits", 4),
                bs = c.attr_int("block_size", 0);
  c.ignore_attr("accuracy_level");  // the product's precision: f32 here whatever it asks
  if (K < 1 || N < 1) c.invalid("needs attributes K and N of at least 1");
  if (bits != 4 && bits != 8) {
    c.unsupported("bits " + std::to_string(bits) + " (4 and 8 are supported)");
  }
  if (bs < 16 || (bs & (bs - 1)) != 0) {
    c.invalid("block_size must be a power of two of at least 16, got " + std::to_string(bs));
  }
  if (c.has_input(4)) c.unsupported("g_idx (act-order quantization)");
  const Shape& a = c.shape(0);
  if (a.empty() || a.back() != Dim(K)) {
    c.invalid("A must end in K = " + std::to_string(K) + ", got " + shape_str(a));
  }
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
  const std::string at_import = " given at run time (MatMulNBits' weight must be an initializer)";
  const Tensor& b = c.const_input(1, "B" + at_import);
  if (b.dtype() != DType::u8 || b.sizes() != Sizes{N, blocks, blob}) {
    c.invalid("B must be uint8 [N, blocks, blob] = " + sizes_str({N, blocks, blob}) + ", got " +
              std::string(dtype_name(b.dtype())) + sizes_str(b.sizes()));
  }
  const Tensor& sc = c.const_input(2, "scales" + at_import);
  if (!is_float(sc.dtype()) || sc.numel() != N * blocks) {
    c.invalid("scales must hold N x blocks = " + std::to_string(N * blocks) + " floats, got " +
              std::string(dtype_name(sc.dtype())) + sizes_str(sc.sizes()));
  }
  const int64_t zrow = (blocks * bits + 7) / 8;  // packed zero-point bytes per column n
  const Tensor* zp = c.has_input(3) ? &c.const_input(3, "zero_points" + at_import) : nullptr;
  if (zp && (zp->dtype() != DType::u8 || zp->numel() != N * zrow)) {
    c.unsupported("zero_points other than packed uint8 [N x " + std::to_string(zrow) + "], got " +
                  std::string(dtype_name(zp->dtype())) + sizes_str(zp->sizes()));
  }
  if (c.dtype(0) == DType::f32) {
    Tensor scales(DType::f32, {N * blocks});
    for (int64_t i = 0; i < N * blocks; i++) scales.set(i, sc.get(i));
    std::vector<Value*> in{c.value(0), c.value(1), c.constant(scales)};
    if (zp) in.push_back(c.value(3));
    Value* y =
        c.emit(OpKind::MatMulNBits, in, {{"K", K}, {"N", N}, {"bits", bits}, {"block_size", bs}});
    if (c.has_input(5)) y = c.emit(OpKind::Add, {y, c.value(5)});
    c.set_output(0, y);
    return;
  }
  const uint8_t* q = b.data_as<uint8_t>();
  const uint8_t* z = zp ? zp->data_as<uint8_t>() : nullptr;
  auto code = [&](const uint8_t* bytes, int64_t i) {  // the i-th code of a packed run
    return bits == 8 ? int(bytes[i]) : int(bytes[i / 2] >> (4 * (i % 2))) & 0xF;
  };
  Value* x = c.value(0);
  Tensor w(x->dtype, {K, N});
  for (int64_t n = 0; n < N; n++) {
    for (int64_t blk = 0; blk < blocks; blk++) {
      const int zero = z ? code(z + n * zrow, blk) : 1 << (bits - 1);
      const float s = float(sc.get(n * blocks + blk));
      for (int64_t i = 0; i < bs && blk * bs + i < K; i++) {
        const int v = code(q + (n * blocks + blk) * blob, i);
        w.set((blk * bs + i) * N + n, double(float(v - zero) * s));
      }
    }
  }
  Value* y = c.emit(OpKind::MatMul, {x, c.constant(w)});
  if (c.has_input(5)) y = c.emit(OpKind::Add, {y, c.value(5)});
  c.set_output(0, y);
}

}  // namespace

void add_contrib_ops(ConverterMap& onnx_domain, ConverterMap& microsoft) {
  onnx_domain["SimplifiedLayerNormalization"] = simplified_layer_norm;
  microsoft["FusedMatMul"] = fused_matmul;
  microsoft["MatMulNBits"] = matmul_nbits;
  microsoft["Gelu"] = gelu<false, false>;
  microsoft["BiasGelu"] = gelu<false, true>;
  microsoft["FastGelu"] = gelu<true, true>;
  microsoft["QuickGelu"] = quick_gelu;
  microsoft["SkipLayerNormalization"] = skip_norm<false>;
  microsoft["SkipSimplifiedLayerNormalization"] = skip_norm<true>;
}

}  // namespace ubfuse::onnx_import
