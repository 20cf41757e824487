// The losses of ONNX's training-era opsets, lowered to gathers and reductions:
// NegativeLogLikelihoodLoss picks -input[n, target[n, d...], d...] along the class axis (times the
// class weight), and SoftmaxCrossEntropyLoss is LogSoftmax over that axis followed by the same.
#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

enum class Reduction { None, Sum, Mean };

Reduction reduction_attr(NodeCtx& c) {
  const std::string r = c.attr_str("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  if (r == "mean") return Reduction::Mean;
  c.invalid("attribute 'reduction' = '" + r + "' (supported: none, sum, mean)");
}

// The loss of log-probabilities `x` [N, C, d...] against class indices `target` [N, d...]:
// -x gathered at each target along axis 1, times weight[target] (input `weight_in`, optional),
// 0 where target equals ignore_index; then summed, or averaged over the weights taken.
Value* nll_loss(NodeCtx& c, Value* x, int target_in, int weight_in) {
  const Shape xs = x->shape;
  if (xs.size() < 2) c.invalid("input must be [N, C, d...], got the shape " + shape_str(xs));
  if (c.dtype(target_in) != DType::i64 && c.dtype(target_in) != DType::i32) {
    c.invalid("target must be int64 or int32, got " + std::string(dtype_name(c.dtype(target_in))));
  }
  Value* t = c.value(target_in);
  Shape want = xs;
  want.erase(want.begin() + 1);
  if (t->shape != want) {
    c.invalid("target must be [N, d...] = " + shape_str(want) + " for input " + shape_str(xs) +
              ", got " + shape_str(t->shape));
  }
  Value* w = nullptr;
  if (c.has_input(weight_in)) {
    require_float(c, weight_in);
    w = c.value(weight_in);
    if (w->shape.size() != 1 || w->shape[0] != xs[1]) {
      c.invalid("weight must be [C] = [" + xs[1].str() + "], got " + shape_str(w->shape));
    }
    if (w->dtype != x->dtype) w = cast_value(c, w, x->dtype);
  }
  // Ignored targets gather class 0 and get weight 0.
  Value* ignored = nullptr;
  if (c.has_attr("ignore_index")) {
    const int64_t ii = c.attr_int("ignore_index", 0);
    ignored = c.emit(OpKind::Equal, {t, scalar_like(c, double(ii), t)});
    t = c.emit(OpKind::Where, {ignored, scalar_like(c, 0, t), t});
  }
  Shape idx_shape = want;
  const Dim one(1);
  idx_shape.insert(idx_shape.begin() + 1, one);
  Value* picked =
      c.emit(OpKind::GatherElements, {x, c.reshape_to(t, idx_shape)}, {{"axis", int64_t(1)}});
  Value* loss = c.emit(OpKind::Neg, {c.reshape_to(picked, want)});
  Value* taken = nullptr;  // the weight of each element, when not all 1
  if (w) taken = c.emit(OpKind::Gather, {w, t}, {{"axis", int64_t(0)}});
  if (ignored) {
    taken = c.emit(OpKind::Where,
                   {ignored, scalar_like(c, 0, x), taken ? taken : scalar_like(c, 1, x)});
  }
  if (taken) loss = c.emit(OpKind::Mul, {loss, taken});
  switch (reduction_attr(c)) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return reduce_axes(c, Red::Sum, loss, {}, false);
    case Reduction::Mean:
      if (!taken) return reduce_axes(c, Red::Mean, loss, {}, false);
      return c.emit(OpKind::Div, {reduce_axes(c, Red::Sum, loss, {}, false),
                                  reduce_axes(c, Red::Sum, taken, {}, false)});
  }
  UBF_CHECK(false, "nll_loss: unhandled reduction");
}

void negative_log_likelihood_loss(NodeCtx& c) {
  require_float(c, 0);
  c.set_output(0, nll_loss(c, c.value(0), 1, 2));
}

// Outputs the loss and, when asked for, the log-probabilities LogSoftmax(scores, axis 1).
void softmax_cross_entropy_loss(NodeCtx& c) {
  require_float(c, 0);
  Value* scores = c.value(0);
  if (scores->shape.size() < 2) {
    c.invalid("scores must be [N, C, d...], got the shape " + shape_str(scores->shape));
  }
  Value* log_prob = log_softmax_axis(c, scores, 1);
  c.set_output(0, nll_loss(c, log_prob, 1, 2));
  if (c.output_used(1)) c.set_output(1, log_prob);
}

}  // namespace

void add_loss_ops(ConverterMap& m) {
  m["NegativeLogLikelihoodLoss"] = negative_log_likelihood_loss;
  m["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy_loss;
}

}  // namespace ubfuse::onnx_import
