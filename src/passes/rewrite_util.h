// Helpers shared by the rewrite passes (simplify, canonicalize): who reads a value, constants
// with one repeated value, tolerant constant comparison, and replacing a node by a new one that
// keeps its name.
#pragma once

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse::passes {

// Readers of every value, built once per sweep (Graph::users scans the whole graph per call).
// Nodes a rewrite has just made dead still count as readers until the next rebuild: that only
// over-counts, which makes matchers more careful, never wrong.
class UseInfo {
 public:
  explicit UseInfo(const Graph& g) { rebuild(g); }
  void rebuild(const Graph& g);
  const std::vector<Node*>& users(const Value* v) const;
  bool is_output(const Value* v) const { return outputs_.count(v) != 0; }
  // Read by exactly one node and not a graph output: safe to fold into a pattern.
  bool single_use(const Value* v) const { return !is_output(v) && users(v).size() == 1; }
  // True when every node in `set` other than `root` has outputs that are no graph outputs and are
  // read only by nodes of `set`: the pattern's intermediates are private to it.
  bool private_to(const std::vector<Node*>& set, const Node* root) const;

 private:
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_set<const Value*> outputs_;
};

// The producer of v when it is `op`, else null (graph inputs have no producer).
Node* producer_if(const Value* v, OpKind op);
// The element value of a Constant whose elements are all equal (a scalar of any shape).
std::optional<double> uniform_constant(const Value* v);
bool is_constant(const Value* v);
// Relative tolerance for matching a pattern's constant (0.044715, sqrt(2/pi), ...) stored in
// dtype t: 1e-4, widened to the rounding error of bf16/f16, where 0.044715 is stored as 0.04468.
double const_rel_tol(DType t);
bool near(double got, double want, double rel_tol);

// Adds node `op(inputs){attrs}` (with `payload` for a Constant) that takes over root's name and
// every read of root's (single) output, graph outputs included. Returns null and leaves the graph
// as it was when the new node's dtype or shape would differ from root's (or inference rejects it).
// Root stays in the graph, dead and renamed, until dead-code elimination.
Node* replace_node(Graph& g, Node* root, OpKind op, std::vector<Value*> inputs, Attrs attrs = {},
                   Tensor payload = {});

}  // namespace ubfuse::passes
