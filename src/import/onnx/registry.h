// The ONNX op table: op type -> converter. Each ops_*.cc file adds its converters.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "import/onnx/context.h"

namespace ubfuse::onnx_import {

using Converter = void (*)(NodeCtx&);
using ConverterMap = std::map<std::string, Converter>;

const ConverterMap& converters();
// onnxruntime's contrib ops of domain com.microsoft that import (ops_contrib.cc).
const ConverterMap& microsoft_converters();

void add_math_ops(ConverterMap& m);
void add_activation_ops(ConverterMap& m);
void add_shape_ops(ConverterMap& m);
void add_movement_ops(ConverterMap& m);
void add_index_ops(ConverterMap& m);
void add_nn_ops(ConverterMap& m);
void add_reduce_ops(ConverterMap& m);
void add_control_ops(ConverterMap& m);
void add_einsum_ops(ConverterMap& m);
void add_quant_ops(ConverterMap& m);
void add_loss_ops(ConverterMap& m);
void add_recurrent_ops(ConverterMap& m);
void add_spectral_ops(ConverterMap& m);
void add_contrib_ops(ConverterMap& onnx_domain, ConverterMap& microsoft);
void add_contrib_attention_ops(ConverterMap& microsoft);
void add_contrib_gqa_ops(ConverterMap& microsoft);
// The ONNX ops that may take int8/uint8 inputs (data movement, Cast, Where, integer elementwise
// arithmetic and comparisons, and the quantization ops; ops_quant.cc); others are unsupported on
// them.
const std::set<std::string>& int8_input_ops();

// Imports an If branch (importer.cc): names it does not define come from `parent`; those that
// become inputs of the branch graph are listed in `captures`, in the graph's input order.
std::shared_ptr<Graph> import_branch(ImportState& parent, const onnx::GraphProto& g,
                                     const std::string& what, std::vector<std::string>& captures);

// Helpers shared by the op files.
void require_float(NodeCtx& c, int input);
// Applies a binary op with numpy broadcasting (ONNX and ubfuse agree).
Value* binary(NodeCtx& c, OpKind k, Value* a, Value* b);
// A scalar constant of v's dtype.
Value* scalar_like(NodeCtx& c, double v, Value* like);
// Axes, split sizes or repeats given at run time (input i, named `what`): the number of values,
// which must be a known length of an integer vector, since it sets the result's rank or outputs.
int64_t runtime_values_length(NodeCtx& c, int i, const std::string& what);
// AxesShape (ops.def) of x's shape vector and those values: computed and checked when the plan for
// a run is built.
Value* axes_shape(NodeCtx& c, Value* x, Value* values, const std::string& mode, int64_t axis = 0);
// Conv's and ConvInteger's window attributes (group, auto_pad, kernel_shape, strides, pads,
// dilations) as ubfuse's Conv takes them; `op` over more than `max_spatial` spatial axes (or
// none) is unsupported.
Attrs conv_window_attrs(NodeCtx& c, const std::string& op, int max_spatial);
// LogSoftmax of x along `axis` (ops_nn.cc).
Value* log_softmax_axis(NodeCtx& c, Value* x, int64_t axis);
// v as dtype `to` (a Cast node unless it is of that dtype already).
Value* cast_value(NodeCtx& c, Value* v, DType to);
// An i64 constant of `sizes` (one dim above 1) holding 0, 1, 2, ... along that dim: the positions
// along an axis, shaped to broadcast against a tensor.
Value* positions(NodeCtx& c, const Sizes& sizes);
// x[start:end] along one axis (a Slice node).
Value* slice_axis(NodeCtx& c, Value* x, int64_t axis, int64_t start, int64_t end);
// The ONNX reductions (ops_reduce.cc), and x reduced by one over `axes` (all when empty), 1s kept
// at the reduced axes or not.
enum class Red { Mean, Sum, Max, Min, L1, L2, SumSquare, LogSum, LogSumExp, Prod };
Value* reduce_axes(NodeCtx& c, Red kind, Value* x, const std::vector<int64_t>& axes, bool keep);

}  // namespace ubfuse::onnx_import
