// What the shape inference files (shape_infer*.cc) share: the checks that name the node, and
// the inference of the ops whose cases live in their own files (index ops, nn ops).
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

// shape_infer_index.cc
void infer_gather(Node& n);
void infer_gather_elements(Node& n);
void infer_gather_nd(Node& n);
void infer_scatter_nd(Node& n);
void infer_scatter_elements(Node& n);
void infer_arg(Node& n);
void infer_cumsum(Node& n);
void infer_topk(Node& n);

// shape_infer_nn.cc
void infer_conv(Node& n);
void infer_group_norm(Node& n);
void infer_pad(Node& n);

}  // namespace ubfuse::shape_infer
