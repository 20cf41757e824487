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

}  // namespace

void add_contrib_ops(ConverterMap& onnx_domain, ConverterMap& microsoft) {
  onnx_domain["SimplifiedLayerNormalization"] = simplified_layer_norm;
  microsoft["FusedMatMul"] = fused_matmul;
  microsoft["Gelu"] = gelu<false, false>;
  microsoft["BiasGelu"] = gelu<false, true>;
  microsoft["FastGelu"] = gelu<true, true>;
  microsoft["QuickGelu"] = quick_gelu;
  microsoft["SkipLayerNormalization"] = skip_norm<false>;
  microsoft["SkipSimplifiedLayerNormalization"] = skip_norm<true>;
}

}  // namespace ubfuse::onnx_import
