// The rules of the simplify pass, one family per file. Each looks at one node and rewrites the
// graph when it applies, returning whether it did. None changes what the graph computes: a rule
// applies only where the result is the same for every input, NaN and Inf included.
#pragma once

#include "ubfuse/graph.h"

namespace ubfuse::passes {

// Named limits of constant folding (simplify_fold.cc).
// Largest folded constant, and largest constant input a fold reads (the reference widens it to
// double: an embedding table must not be copied for a Gather of a few rows).
inline constexpr int64_t kMaxFoldElements = int64_t(1) << 20;
// A fold may produce more elements than its inputs hold (an Expand, a broadcast) only up to this:
// beyond it the folded constant would cost more memory traffic than computing it.
inline constexpr int64_t kMaxFoldGrowth = int64_t(1) << 16;
inline constexpr double kMaxFoldWork = double(int64_t(1) << 26);  // MatMul multiply-adds

// A node whose inputs are all Constants becomes a Constant (evaluated with the double reference
// and rounded to the output dtype).
bool fold_constant_node(Graph& g, Node* n);
// x*1, 1*x, x/1, x+0, 0+x, x-0, pow(x,1), neg(neg(x)), Cast to the same dtype: reads of the
// result read x. Never x*0 (NaN*0 is NaN) or x-x.
bool simplify_identity(Graph& g, Node* n);
// Reshape/Expand to the same shape, identity Transpose: bypassed. Reshape of Reshape and
// Transpose of Transpose: merged into one node. Reshape(rowop(Reshape(x))) with both reshapes
// keeping the last dim and the outer one restoring x's shape (the flatten-to-2-D that ONNX
// function bodies write around a norm or softmax): rowop(x). Gathers of one index each from a
// Transpose that only they read: each gathers from the Transpose's input, behind its own Transpose.
bool simplify_data_movement(Graph& g, Node* n);

}  // namespace ubfuse::passes
