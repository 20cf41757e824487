// What the shape inference files (shape_infer*.cc) share: the checks that name the node, and
// the inference of the ops whose cases live in their own files (movement, index, nn and
// quantization ops).
#pragma once

#include <string>

#include "ubfuse/graph.h"

namespace ubfuse::shape_infer {

// "node 'x' (Op): what (inputs: ...); hint: hint": the error every inference check throws.
[[noreturn]] void fail(const Node& n, const std::string& what, const std::string& hint = "");
std::string in_shapes(const Node& n);
void require_float(const Node& n, const Value* v);
void require_same_dtype(const Node& n, const Value* a, const Value* b);
// axis in [-rank, rank) made non-negative, else a failure.
int64_t norm_axis(const Node& n, int64_t axis, int64_t rank);
// A value operand that must be a vector of known length: its length, or a failure naming it.
int64_t operand_length(Node& n, int i, const char* what);
// The output of a one-input elementwise op: its input's shape and dtype.
void infer_same(Node& n);
// The batched MatMul output shape of [..., M, K] x [..., K, N] (numpy broadcasting of the batch).
Shape matmul_shape(const Node& n, const Value* a, const Value* b);

// shape_infer_movement.cc
void infer_reshape(Node& n);
void infer_transpose(Node& n);
void infer_rotate_half(Node& n);
void infer_slice(Node& n);
void infer_concat(Node& n);
void infer_expand(Node& n);
// Shape and AxesShape also set their output's known contents (infer_node leaves them).
void infer_shape_op(Node& n);
void infer_axes_shape(Node& n);
void infer_range(Node& n);
void infer_constant_of_shape(Node& n);

// shape_infer_index.cc
void infer_gather(Node& n);
void infer_gather_elements(Node& n);
void infer_gather_nd(Node& n);
void infer_scatter_nd(Node& n);
void infer_scatter_elements(Node& n);
void infer_arg(Node& n);
void infer_cumsum(Node& n);
void infer_topk(Node& n);

// shape_infer_recurrent.cc: RNN, GRU, LSTM
void infer_recurrent(Node& n);

// shape_infer_nn.cc
void infer_conv(Node& n);
// Conv's attributes and output shape; `integer`: ConvInteger (i32 output, operands checked by
// the caller, inputs 2 and 3 zero points rather than a bias).
void infer_conv_geometry(Node& n, bool integer);
void infer_group_norm(Node& n);
void infer_pad(Node& n);
// Resize: attributes written back complete (mode, coordinate_transformation_mode, nearest_mode,
// keep_aspect_ratio_policy, cubic_coeff_a, extrapolation_value, exclude_outside, antialias, axes)
void infer_resize(Node& n);
// MaxPool, AveragePool: attributes written back complete (kernel_shape, strides, dilations, pads,
// auto_pad, ceil_mode, count_include_pad, storage_order)
void infer_pool(Node& n);

// shape_infer_quant.cc
void infer_quantize_linear(Node& n);
void infer_dequantize_linear(Node& n);
void infer_dynamic_quantize_linear(Node& n);
void infer_matmul_integer(Node& n);
void infer_qlinear_matmul(Node& n);
void infer_dynamic_quant_matmul(Node& n);
void infer_matmul_nbits(Node& n);
void infer_dynamic_quant_conv(Node& n);
void infer_conv_integer(Node& n);
// Whether input i of n may be i8 or u8 (the ops that move 8-bit values, Cast, the integer
// elementwise arithmetic and comparisons, and the quantization ops); other ops reject them with a
// hint.
bool takes_int8(const Node& n, int i);

}  // namespace ubfuse::shape_infer
