// The reference kernels' shared helpers (reference.cc) and the ops defined in files of their own,
// which reference.cc's eval_node calls: pooling, resizing, convolution and GroupNorm
// (reference_spatial.cc); quantization and the integer products (reference_quant.cc); TopK and
// the ops that gather or scatter by index tuples (reference_index.cc). Internal to the reference
// layer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/reference/reference.h"

namespace ubfuse::ref::detail {

// v rounded to dtype t as eager mode stores it (integers truncate and wrap, bool is v != 0).
double round_to(DType t, double v);
// Index of `flat` (in `out` sizes) into an input via broadcast strides.
int64_t bcast_index(int64_t flat, const Sizes& out, const std::vector<int64_t>& strides);
std::vector<int64_t> strides_of(const Sizes& s);
// A value operand's elements (a Reshape's target, Slice bounds) as integers.
std::vector<int64_t> ints_of(const RefTensor& t);
// Output `out` of n, of these sizes, zero-filled.
RefTensor make(const Node& n, Sizes sizes, int out = 0);
RefTensor matmul(const Node& n, const std::vector<RefTensor>& in);

// The range of an 8-bit integer dtype.
inline double qmin(DType t) { return t == DType::i8 ? -128 : 0; }
inline double qmax(DType t) { return t == DType::i8 ? 127 : 255; }
inline double saturate(double v, DType t) { return std::min(qmax(t), std::max(qmin(t), v)); }

// reference_spatial.cc
std::vector<RefTensor> pool(const Node& n, const RefTensor& x);
RefTensor resize(const Node& n, const std::vector<RefTensor>& in);
RefTensor conv(const Node& n, const std::vector<RefTensor>& in);
RefTensor group_norm(const Node& n, const std::vector<RefTensor>& in);

// reference_quant.cc
RefTensor quantize_linear(const Node& n, const std::vector<RefTensor>& in);
RefTensor dequantize_linear(const Node& n, const std::vector<RefTensor>& in);
std::vector<RefTensor> dynamic_quantize_linear(const RefTensor& x);
RefTensor matmul_integer(const Node& n, const std::vector<RefTensor>& in);
RefTensor qlinear_matmul(const Node& n, const std::vector<RefTensor>& in);
RefTensor dynamic_quant_matmul(const Node& n, const std::vector<RefTensor>& in);
RefTensor matmul_nbits(const Node& n, const std::vector<RefTensor>& in);
RefTensor dynamic_quant_conv(const Node& n, const std::vector<RefTensor>& in);
RefTensor conv_integer(const Node& n, const std::vector<RefTensor>& in);

// reference_recurrent.cc: RNN, GRU and LSTM (Y, Y_h and LSTM's Y_c)
std::vector<RefTensor> recurrent_cell(const Node& n, const std::vector<RefTensor>& in);

// reference_index.cc
std::vector<RefTensor> top_k(const Node& n, const std::vector<RefTensor>& in);
RefTensor gather_nd(const Node& n, const std::vector<RefTensor>& in);
RefTensor scatter(const Node& n, const std::vector<RefTensor>& in);

}  // namespace ubfuse::ref::detail
