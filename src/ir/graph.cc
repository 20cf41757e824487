#include "ubfuse/graph.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ubfuse/error.h"

namespace ubfuse {

int64_t Node::attr_int(const std::string& k, int64_t dflt) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
  if (auto* v = std::get_if<double>(&it->second)) return int64_t(*v);
  throw Error(describe() + ": attribute '" + k + "' must be an integer");
}

double Node::attr_float(const std::string& k, double dflt) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return double(*v);
  throw Error(describe() + ": attribute '" + k + "' must be a number");
}

std::string Node::attr_str(const std::string& k, const std::string& dflt) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return dflt;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  throw Error(describe() + ": attribute '" + k + "' must be a string");
}

std::vector<int64_t> Node::attr_ints(const std::string& k) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) throw Error(describe() + ": missing attribute '" + k + "'");
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* v = std::get_if<int64_t>(&it->second)) return {*v};
  throw Error(describe() + ": attribute '" + k + "' must be a list of integers");
}

std::string Node::describe() const {
  return "node '" + name + "' (" + std::string(op_name(op)) + ")";
}

std::string Graph::unique_name(const std::string& base) {
  int& n = name_counts_[base];
  std::string name;
  do {
    name = base + std::to_string(n++);
  } while (name_counts_.count(name) && name != base);
  name_counts_[name];  // reserve
  return name;
}

Value* Graph::add_input(const std::string& name, DType dtype, Shape shape) {
  for (auto* v : inputs_) {
    if (v->name == name) throw Error("graph input '" + name + "' is declared twice");
  }
  auto v = std::make_unique<Value>();
  v->id = int(values_.size());
  v->name = name;
  v->dtype = dtype;
  v->shape = std::move(shape);
  for (auto& d : v->shape) {
    if (d.is_static() && d.value() < 0) {
      throw Error("graph input '" + name + "' has a negative dim in " + shape_str(v->shape));
    }
  }
  inputs_.push_back(v.get());
  values_.push_back(std::move(v));
  return inputs_.back();
}

Node* Graph::add_node(OpKind op, std::vector<Value*> inputs, Attrs attrs, std::string name,
                      int num_outputs) {
  auto n = std::make_unique<Node>();
  n->id = next_node_id_++;
  n->op = op;
  if (name.empty()) {
    std::string base(op_name(op));
    std::transform(base.begin(), base.end(), base.begin(), ::tolower);
    name = unique_name(base);
  } else {
    if (node_by_name(name)) throw Error("node name '" + name + "' is used twice");
    name_counts_[name];
  }
  n->name = std::move(name);
  n->inputs = std::move(inputs);
  n->attrs = std::move(attrs);
  for (int i = 0; i < num_outputs; i++) {
    auto v = std::make_unique<Value>();
    v->id = int(values_.size());
    v->name = num_outputs == 1 ? n->name : n->name + ":" + std::to_string(i);
    v->producer = n.get();
    v->producer_output = i;
    n->outputs.push_back(v.get());
    values_.push_back(std::move(v));
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

void Graph::add_output(const std::string& name, Value* v) {
  for (auto& [n, _] : outputs_) {
    if (n == name) throw Error("graph output '" + name + "' is declared twice");
  }
  outputs_.emplace_back(name, v);
}

std::vector<Node*> Graph::topo_order() const {
  // Iterative DFS from each node in insertion order, producers first.
  std::vector<Node*> order;
  std::unordered_map<const Node*, int> state;  // 0 new, 1 on stack, 2 done
  for (auto& root : nodes_) {
    if (state[root.get()] == 2) continue;
    std::vector<std::pair<Node*, size_t>> stack{{root.get(), 0}};
    state[root.get()] = 1;
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        Value* in = n->inputs[i++];
        Node* p = in ? in->producer : nullptr;
        if (p && state[p] == 0) {
          state[p] = 1;
          stack.push_back({p, 0});
        } else if (p && state[p] == 1) {
          throw Error("graph has a cycle through " + p->describe());
        }
      } else {
        state[n] = 2;
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

std::vector<Node*> Graph::users(const Value* v) const {
  std::vector<Node*> out;
  for (auto& n : nodes_) {
    if (std::find(n->inputs.begin(), n->inputs.end(), v) != n->inputs.end()) out.push_back(n.get());
  }
  return out;
}

bool Graph::is_output(const Value* v) const {
  for (auto& [_, o] : outputs_) {
    if (o == v) return true;
  }
  return false;
}

void Graph::replace_uses(Value* from, Value* to) {
  for (auto& n : nodes_) {
    for (auto& in : n->inputs) {
      if (in == from) in = to;
    }
  }
  for (auto& [_, o] : outputs_) {
    if (o == from) o = to;
  }
}

int Graph::remove_dead_nodes() {
  int removed = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    std::unordered_set<const Value*> read;
    for (auto& n : nodes_) {
      for (auto* in : n->inputs) read.insert(in);
    }
    for (auto& [_, o] : outputs_) read.insert(o);
    for (size_t i = 0; i < nodes_.size();) {
      Node* n = nodes_[i].get();
      bool live =
          n->op == OpKind::Host || std::any_of(n->outputs.begin(), n->outputs.end(),
                                               [&](Value* v) { return read.count(v) != 0; });
      if (!live) {
        nodes_.erase(nodes_.begin() + i);
        removed++;
        changed = true;
      } else {
        i++;
      }
    }
  }
  return removed;
}

void Graph::remove_node(Node* n) {
  for (size_t i = 0; i < nodes_.size(); i++) {
    if (nodes_[i].get() == n) {
      nodes_.erase(nodes_.begin() + i);
      return;
    }
  }
  UBF_CHECK(false, "remove_node: node not in graph");
}

int Graph::num_nodes() const { return int(nodes_.size()); }

Node* Graph::node_by_name(const std::string& name) const {
  for (auto& n : nodes_) {
    if (n->name == name) return n.get();
  }
  return nullptr;
}

Graph Graph::clone() const {
  Graph g;
  std::unordered_map<const Value*, Value*> vmap;
  for (auto* in : inputs_) vmap[in] = g.add_input(in->name, in->dtype, in->shape);
  for (Node* n : topo_order()) {
    std::vector<Value*> ins;
    for (auto* v : n->inputs) ins.push_back(vmap.at(v));
    Node* c = g.add_node(n->op, ins, n->attrs, n->name, int(n->outputs.size()));
    c->id = n->id;  // run-time dims in the copied shapes are named after it (runtime_dim)
    c->payload = n->payload;
    c->host = n->host;
    for (size_t i = 0; i < n->outputs.size(); i++) {
      c->outputs[i]->name = n->outputs[i]->name;
      c->outputs[i]->dtype = n->outputs[i]->dtype;
      c->outputs[i]->shape = n->outputs[i]->shape;
      c->outputs[i]->known = n->outputs[i]->known;
      vmap[n->outputs[i]] = c->outputs[i];
    }
  }
  for (auto& [name, v] : outputs_) g.add_output(name, vmap.at(v));
  g.name_counts_ = name_counts_;
  g.next_node_id_ = next_node_id_;
  return g;
}

}  // namespace ubfuse
