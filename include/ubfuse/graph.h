// The graph IR: Values (typed, shaped edges) produced and consumed by Nodes (one op each).
// A Graph owns its nodes and values; passes rewrite it in place.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ubfuse/dtype.h"
#include "ubfuse/op.h"
#include "ubfuse/shape.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

class Node;
class Graph;

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<std::string>>;
using Attrs = std::map<std::string, AttrValue>;

// A Host node's callback: sees (and may change) the tensor at that point of the graph.
using HostFn = std::function<void(Tensor&)>;

struct Value {
  int id = -1;
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  Node* producer = nullptr;  // null for graph inputs
  int producer_output = 0;
  // For a small integer value (rank 0 or 1) whose elements shape inference knows as dims, static
  // or symbolic (Shape of a tensor, and arithmetic on it): those elements. Ops whose output shape
  // depends on an operand's contents (Reshape, Range, Expand, ...) read it (ir/values.h).
  std::optional<std::vector<Dim>> known;
};

class Node {
 public:
  int id = -1;
  OpKind op = OpKind::Add;
  std::string name;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  Attrs attrs;
  Tensor payload;  // Constant's value
  HostFn host;     // Host's callback
  // If's then and else graphs, shared and never changed once built. Input j of a branch reads
  // the If's input attr_ints("then_inputs")[j] (or "else_inputs"); its outputs are the If's.
  std::vector<std::shared_ptr<const Graph>> branches;

  const Value* out() const { return outputs.at(0); }
  Value* out() { return outputs.at(0); }
  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  double attr_float(const std::string& k, double dflt) const;
  std::string attr_str(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k) const;  // throws naming node if missing
  // "node 'ln0' (LayerNorm)" for messages.
  std::string describe() const;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  // A deep copy (callbacks and constant payloads are shared).
  Graph clone() const;

  Value* add_input(const std::string& name, DType dtype, Shape shape);
  // Adds a node; output dtype/shape are filled by shape inference (infer_node).
  Node* add_node(OpKind op, std::vector<Value*> inputs, Attrs attrs = {}, std::string name = "",
                 int num_outputs = 1);
  void add_output(const std::string& name, Value* v);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<std::pair<std::string, Value*>>& outputs() const { return outputs_; }
  std::vector<std::pair<std::string, Value*>>& mutable_outputs() { return outputs_; }

  // Live nodes in a topological order (inputs before users), stable w.r.t. insertion order.
  std::vector<Node*> topo_order() const;
  std::vector<Node*> users(const Value* v) const;  // live nodes that read v
  bool is_output(const Value* v) const;
  // Replaces every read of `from` (node inputs and graph outputs) with `to`.
  void replace_uses(Value* from, Value* to);
  // Removes nodes whose outputs nobody reads and that are not Host nodes; returns count removed.
  int remove_dead_nodes();
  void remove_node(Node* n);
  int num_nodes() const;
  Node* node_by_name(const std::string& name) const;
  std::string unique_name(const std::string& base);

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<Value*> inputs_;
  std::vector<std::pair<std::string, Value*>> outputs_;
  std::map<std::string, int> name_counts_;
  int next_node_id_ = 0;
};

// Fills n's output dtype and shape from its inputs and attributes, checking them. Throws
// ubfuse::Error naming the node, op and shapes on bad input.
void infer_node(Node& n);
// Checks every node and value of the graph (structure, arity, inferred types); throws Error.
void verify(const Graph& g);
// Readable text form for debugging and golden tests.
std::string print_graph(const Graph& g);

}  // namespace ubfuse
