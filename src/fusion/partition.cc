#include "fusion/partition.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "fusion/attention_match.h"
#include "fusion/fusion_checks.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

using fusion::Group;
using fusion::has;
using fusion::heads_epilogue;
using fusion::merged_domain;
using fusion::State;

class Partitioner {
 public:
  Partitioner(const Graph& g, const FusionConfig& c, const FusionRules& r) : st_(g, c, r) {}

  Partition run() {
    st_.order = st_.g.topo_order();
    for (size_t i = 0; i < st_.order.size(); i++) st_.topo_index[st_.order[i]] = int(i);
    for (Node* n : st_.order) {
      for (auto* v : n->inputs) st_.users[v].push_back(n);
    }
    for (Node* n : st_.order) {
      if (is_source(n)) continue;
      st_.group_of[n] = int(st_.groups.size());
      st_.groups.push_back({{n}, fusion::node_domain(n), true});
    }
    if (st_.rules.rule_enabled("AttentionFusion")) form_attention_groups();
    for (Node* n : st_.order) {
      if (is_source(n)) continue;
      for (auto* v : n->inputs) {
        Node* p = v->producer;
        if (!p || is_source(p)) continue;
        if (!seen_edges_.insert({p, n}).second) continue;
        if (st_.group_of[p] == st_.group_of[n]) {
          fused(p, n);
          continue;
        }
        std::string_view by;
        FusionDecision d = fusion::ask_checks(st_, p, n, &by);
        if (d.reason == FusionReason::Fused) merge(st_.group_of[p], st_.group_of[n]);
        decisions_.push_back(d);
        objected_by_.push_back(by);
      }
    }
    return finish();
  }

 private:
  // Nodes whose outputs are data before any kernel runs: constants and what the plan computes.
  bool is_source(const Node* n) const {
    return n->op == OpKind::Constant || (st_.config.planned && st_.config.planned(*n));
  }

  // Each attention chain becomes one group before the edges are visited; the AttentionKernel
  // check then keeps other nodes out of it.
  void form_attention_groups() {
    auto only_reader = [&](const Value* v, const Node* reader) {
      const auto& us = st_.users_of(v);
      return !st_.g.is_output(v) && us.size() == 1 && us[0] == reader;
    };
    for (Node* n : st_.order) {
      if (n->op != OpKind::MatMul || is_source(n)) continue;
      auto m = fusion::match_attention(n, only_reader);
      if (!m) continue;
      if (n->out()->dtype == DType::bf16 && st_.config.bf16_matmul_faster) {
        // bench_fusion_bench --attention measures both forms.
        decisions_.push_back(
            {FusionReason::NotProfitable, m->scores->name, n->name,
             "the attention chain '" + m->scores->name + "' .. '" + n->name +
                 "' is bf16 and this CPU has bf16 dot products (AVX512_BF16): oneDNN's bf16 "
                 "matmuls run it about 2x faster than the flash-style kernel, which computes in "
                 "f32; it stays a MatMul with its softmax epilogue and a MatMul",
             ""});
        objected_by_.push_back({});
        continue;
      }
      const std::vector<const Node*> nodes = m->nodes();
      bool free = true;
      for (const Node* x : nodes) {
        free = free && !is_source(x) && !st_.groups[size_t(st_.group_of[x])].attention;
      }
      if (!free) continue;
      const int gi = st_.group_of[n];
      for (const Node* x : nodes) {
        const int gx = st_.group_of[x];
        if (gx == gi) continue;
        st_.groups[size_t(gx)].nodes.clear();
        st_.groups[size_t(gx)].alive = false;
        st_.group_of[x] = gi;
      }
      Group& g = st_.groups[size_t(gi)];
      g.nodes = nodes;  // a chain: already in topological order
      g.domain = n->out()->shape;
      g.attention = true;
    }
  }

  void fused(const Node* p, const Node* n) {
    const bool att = st_.groups[size_t(st_.group_of[n])].attention;
    decisions_.push_back({FusionReason::Fused, p->name, n->name,
                          "'" + p->name + "' and '" + n->name + "' run in one kernel" +
                              (att ? " (AttentionFusion: one flash-style attention kernel)" : ""),
                          ""});
    objected_by_.push_back({});
  }

  void merge(int gp, int gn) {
    Group& a = st_.groups[size_t(gp)];
    Group& b = st_.groups[size_t(gn)];
    auto dom = merged_domain(a, b);
    UBF_CHECK(dom.has_value() || has(a, heads_epilogue), "merging groups of different domains");
    if (has(a, heads_epilogue)) dom = a.domain;
    b.nodes = st_.merged_nodes(a, b);
    b.domain = *dom;
    for (auto* n : a.nodes) st_.group_of[n] = gn;
    a.nodes.clear();
    a.alive = false;
  }

  Partition finish() {
    // Order groups topologically (Kahn), ties by their first member's topo index.
    std::vector<int> live;
    for (int i = 0; i < int(st_.groups.size()); i++) {
      if (st_.groups[size_t(i)].alive) live.push_back(i);
    }
    std::map<int, std::set<int>> succ;
    std::map<int, int> indeg;
    for (int gi : live) indeg[gi] = 0;
    for (int gi : live) {
      for (auto* n : st_.groups[size_t(gi)].nodes) {
        for (auto* v : n->inputs) {
          Node* p = v->producer;
          if (!p || is_source(p)) continue;
          int gp = st_.group_of[p];
          if (gp != gi && succ[gp].insert(gi).second) indeg[gi]++;
        }
      }
    }
    auto first = [&](int gi) { return st_.topo_index[st_.groups[size_t(gi)].nodes.front()]; };
    auto cmp = [&](int x, int y) { return first(x) > first(y); };
    std::priority_queue<int, std::vector<int>, decltype(cmp)> ready(cmp);
    for (int gi : live) {
      if (indeg[gi] == 0) ready.push(gi);
    }
    Partition out;
    while (!ready.empty()) {
      int gi = ready.top();
      ready.pop();
      const Group& g = st_.groups[size_t(gi)];
      FusedGroup fg = st_.describe(g.nodes, g.domain, g.attention);
      mark_reread(fg, out.decisions);
      out.groups.push_back(std::move(fg));
      for (int s : succ[gi]) {
        if (--indeg[s] == 0) ready.push(s);
      }
    }
    UBF_CHECK(out.groups.size() == live.size(), "fused groups form a cycle");
    // out.decisions holds the group notes so far; the edge decisions go before them.
    out.objected_by = objected_by_;
    out.objected_by.resize(objected_by_.size() + out.decisions.size());
    out.decisions.insert(out.decisions.begin(), decisions_.begin(), decisions_.end());
    return out;
  }

  void mark_reread(FusedGroup& fg, std::vector<FusionDecision>& decisions) {
    if (fg.kind != GroupKind::RowReduction || fg.domain.empty()) return;
    const Dim& cols = fg.domain.back();
    if (!cols.is_static()) {
      decisions.push_back({FusionReason::Fused, fg.nodes.front()->name, fg.nodes.back()->name,
                           fg.name + " has a symbolic row length '" + cols.str() +
                               "': it keeps the row in the UB when it fits at run time and "
                               "re-reads its inputs when not",
                           ""});
      return;
    }
    int64_t need = st_.config.ub_bytes_per_row(fg, cols.value());
    const int64_t ub = st_.config.ub_bytes;
    if (need > ub) {
      fg.reread = true;
      decisions.push_back(
          {FusionReason::BufferCapacity, fg.nodes.front()->name, fg.nodes.back()->name,
           fg.name + " needs " + std::to_string(need) +
               " bytes of unified buffer per row, ub_bytes is " + std::to_string(ub) +
               ": it runs as a two-pass kernel that re-reads "
               "its inputs",
           "raise ub_bytes to at least " + std::to_string(need)});
    }
  }

  State st_;
  std::vector<FusionDecision> decisions_;
  std::vector<std::string_view> objected_by_;
  std::set<std::pair<const Node*, const Node*>> seen_edges_;
};

}  // namespace

std::string group_name(const std::vector<const Node*>& nodes, const FusionRules& rules) {
  for (auto& pat : rules.patterns) {
    if (pat.forbid || pat.ops.size() != nodes.size()) continue;
    bool all = true;
    for (size_t i = 0; i < nodes.size() && all; i++) all = op_name(nodes[i]->op) == pat.ops[i];
    if (all) return pat.name;
  }
  if (nodes.size() == 1) return std::string(op_name(nodes[0]->op));
  std::string name = "Fused";
  for (auto* n : nodes) name += op_name(n->op);
  return name;
}

Partition partition_graph(const Graph& g, const FusionConfig& config, const FusionRules& rules) {
  UBF_CHECK(bool(config.ub_bytes_per_row), "FusionConfig::ub_bytes_per_row is not set");
  return Partitioner(g, config, rules).run();
}

}  // namespace ubfuse
