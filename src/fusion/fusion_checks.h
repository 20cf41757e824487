// The partitioner's state and its checks (fusion_checks.cc): what partition.cc shares with them.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fusion/group.h"
#include "fusion/partition.h"
#include "fusion/rules.h"

namespace ubfuse::fusion {

bool is_reduction(const Node* n);
bool is_matmul(const Node* n);
// The domain a node iterates over: its input for a row reduction, else its output.
Shape node_domain(const Node* n);

struct Group {
  std::vector<const Node*> nodes;  // in topo order
  Shape domain;
  bool alive = true;
  bool attention = false;  // an attention chain (AttentionFusion): closed to other nodes
};

template <typename F>
bool has(const Group& g, F pred) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), pred);
}

// Domain of the merged group, or nullopt when the two iterate differently.
std::optional<Shape> merged_domain(const Group& a, const Group& b);

// The graph, the options and the groups formed so far: what the checks read.
struct State {
  State(const Graph& g, const FusionConfig& c, const FusionRules& r) : g(g), config(c), rules(r) {}
  const Graph& g;
  const FusionConfig& config;
  const FusionRules& rules;
  std::vector<Node*> order;  // topological
  std::unordered_map<const Node*, int> topo_index;
  std::unordered_map<const Value*, std::vector<Node*>> users;
  std::unordered_map<const Node*, int> group_of;
  std::vector<Group> groups;
  // Edges inside groups the cost model refused in an earlier round, with their decisions.
  const std::map<std::pair<const Node*, const Node*>, FusionDecision>* refused = nullptr;

  const std::vector<Node*>& users_of(const Value* v) const;
  // The members of a and b in topological order.
  std::vector<const Node*> merged_nodes(const Group& a, const Group& b) const;
  // The group these nodes form: its inputs, outputs, kind and name.
  FusedGroup describe(const std::vector<const Node*>& nodes, const Shape& domain,
                      bool attention = false) const;
};

// Asks fusion_checks() in order whether the groups of p and n may merge: the first objection, or
// a Fused decision. *objected_by gets the name of the check that objected.
FusionDecision ask_checks(const State& st, const Node* p, const Node* n,
                          std::string_view* objected_by);

}  // namespace ubfuse::fusion
