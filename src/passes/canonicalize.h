// The pattern families of the canonicalize pass, one file each. A matcher looks at node n as the
// root (or, for norms, the core) of its pattern; when the pattern matches, its intermediates are
// private to it (no other readers, no graph outputs) and every constant is within tolerance, it
// replaces the pattern by one node that keeps the root's name and returns the nodes it made dead
// (empty: no match, graph unchanged).
#pragma once

#include <vector>

#include "passes/rewrite_util.h"

namespace ubfuse::passes {

// Silu from x*sigmoid(x); Gelu from 0.5*x*(1+erf(x/sqrt(2))) and
// 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), in any grouping (canonicalize_activation.cc).
std::vector<Node*> match_activation(Graph& g, Node* n, const UseInfo& uses);
// LayerNorm and RMSNorm over the last axis, with a weight and (LayerNorm) a bias, from the forms
// PyTorch, its ONNX export and the ONNX function bodies write (canonicalize_norm.cc).
std::vector<Node*> match_norm(Graph& g, Node* n, const UseInfo& uses);
// Softmax from exp(x - max(x)) / sum(exp(x - max(x))) (canonicalize_softmax.cc).
std::vector<Node*> match_softmax(Graph& g, Node* n, const UseInfo& uses);
// RotateHalf from RoPE's cat(-x[..., d/2:], x[..., :d/2]) over the last axis
// (canonicalize_rope.cc).
std::vector<Node*> match_rotate_half(Graph& g, Node* n, const UseInfo& uses);
// RotateHalf{interleaved} from GPT-J's stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2).
std::vector<Node*> match_rotate_pairs(Graph& g, Node* n, const UseInfo& uses);
// Partial rotary cat(x[..., :r] * cos + rot(x[..., :r]) * sin, x[..., r:]) as one product over
// the whole head: x * pad(cos, 1) + RotateHalf{rotary_dims=r}(x) * pad(sin, -0).
std::vector<Node*> match_partial_rotary(Graph& g, Node* n, const UseInfo& uses);

}  // namespace ubfuse::passes
