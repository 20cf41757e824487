// Import-time constant folding: a node whose inputs are all constants becomes a constant, so that
// the shape arithmetic ONNX exporters write (Shape -> Gather -> Concat -> Reshape) never reaches
// the compiled graph and attribute-like inputs (a Reshape's shape) are known.
#pragma once

#include <optional>

#include "ubfuse/graph.h"

namespace ubfuse::onnx_import {

// Largest results folded: data movement (any dtype) and float arithmetic.
inline constexpr int64_t kMaxFoldMoveElems = int64_t(1) << 24;
inline constexpr int64_t kMaxFoldMathElems = int64_t(1) << 20;

// The value of `n` if every input is produced by a Constant node and the op folds here; nullopt
// otherwise. Integer arithmetic is exact (int64); float arithmetic uses the double reference.
std::optional<Tensor> fold_node(const Node& n);

}  // namespace ubfuse::onnx_import
