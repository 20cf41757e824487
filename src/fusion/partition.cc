#include "fusion/partition.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
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

std::string fmt_us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", seconds * 1e6);
  return buf;
}

using EdgeDecisions = std::map<std::pair<const Node*, const Node*>, FusionDecision>;

class Partitioner {
 public:
  Partitioner(const Graph& g, const FusionConfig& c, const FusionRules& r,
              const EdgeDecisions* refused)
      : st_(g, c, r) {
    st_.refused = refused;
  }

  // The partition, or nullopt after adding the edges of groups the cost model refuses to
  // *refuse (the caller runs it again).
  std::optional<Partition> run(EdgeDecisions* refuse) {
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
    if (refuse_unprofitable(refuse)) return std::nullopt;
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
      const auto& readers = st_.users_of(n->out());
      if (readers.size() == 1 && !is_source(readers[0]))
        fusion::match_output_heads(*m, readers[0], only_reader);
      const std::vector<const Node*> nodes = m->nodes();
      bool free = true;
      for (const Node* x : nodes) {
        free = free && !is_source(x) && !st_.groups[size_t(st_.group_of[x])].attention;
      }
      if (!free) continue;
      if (st_.config.costs) {
        const CostParams& cp = st_.config.costs();
        const CostEstimate flash = estimate_attention(m->scores, m->context, true, cp);
        const CostEstimate split = estimate_attention(m->scores, m->context, false, cp);
        bool slower = flash.seconds > split.seconds * kProfitMargin;
        std::string timed;
        const double ratio = std::max(flash.seconds, split.seconds) /
                             std::max(1e-12, std::min(flash.seconds, split.seconds));
        if (ratio < kUnsureRatio && st_.config.time_attention) {
          const AttentionProbe probe = attention_probe(m->scores, m->context);
          if (auto t = st_.config.time_attention(probe)) {
            slower = t->flash_s > t->split_s * kProfitMargin;
            timed = "; timed at " + probe.key() + " (" + t->source + "): " + fmt_us(t->flash_s) +
                    " as one kernel, " + fmt_us(t->split_s) + " as MatMuls";
          }
        }
        if (slower) {
          decisions_.push_back(
              {FusionReason::NotProfitable, m->scores->name, n->name,
               "the attention chain '" + m->scores->name + "' .. '" + n->name + "' (" +
                   std::string(dtype_name(n->out()->dtype)) +
                   ") is predicted slower as the flash-style kernel, " + flash.str() +
                   ", than as a MatMul with its softmax epilogue and a MatMul, " + split.str() +
                   timed + "; it stays apart (cost model: " + cp.summary() + ")",
               "nothing; cost_model=off fuses it anyway"});
          objected_by_.push_back({});
          continue;
        }
        if (!timed.empty()) {
          decisions_.push_back({FusionReason::Fused, m->scores->name, n->name,
                                "the attention chain '" + m->scores->name + "' .. '" + n->name +
                                    "' runs as the flash-style kernel" + timed,
                                ""});
          objected_by_.push_back({});
        }
      }
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

  // Each group of several nodes against its parts (fusion/cost.h); the edges inside one predicted
  // slower go to *refuse with their NotProfitable decisions. True when any did.
  bool refuse_unprofitable(EdgeDecisions* refuse) {
    if (!st_.config.costs) return false;
    bool any = false;
    const CostParams* params = nullptr;  // asked once, at the first group (it may calibrate)
    for (const Group& g : st_.groups) {
      if (!g.alive || g.attention || g.nodes.size() < 2) continue;
      const FusedGroup fg = st_.describe(g.nodes, g.domain, false);
      std::string why;
      const bool op_by_op = st_.config.lowers && !st_.config.lowers(fg, &why);
      if (!params) params = &st_.config.costs();
      const CostParams& cp = *params;
      FusedGroup sized = fg;
      if (!op_by_op) {
        std::vector<FusionDecision> notes;
        mark_reread(sized, notes);
      }
      const CostEstimate fused = estimate_fused(st_.g, sized, op_by_op, cp);
      const CostEstimate parts = estimate_parts(st_.g, fg.nodes, cp);
      // An op-by-op group is its parts plus overhead: refused whenever predicted slower at all.
      if (fused.seconds <= parts.seconds * (op_by_op ? 1.0 : kProfitMargin)) continue;
      const std::string text =
          fg.name + " is predicted slower as one kernel" +
          (op_by_op ? " (it would run op by op: " + why + ")" : std::string()) + ", " +
          fused.str() + ", than as its parts, " + parts.str() +
          "; they run apart (cost model: " + cp.summary() + ")";
      const std::set<const Node*> members(g.nodes.begin(), g.nodes.end());
      // Op by op, only the edges at members that read or write a dtype generated kernels do not
      // compute (the usual reason) are refused, so the rest may fuse in the next round.
      std::set<const Node*> culprits;
      if (op_by_op) {
        for (const Node* n : g.nodes) {
          if (touches_dtype_kernels_lack(n)) culprits.insert(n);
        }
      }
      if (culprits.empty()) culprits = members;
      for (const Node* n : g.nodes) {
        for (const Value* v : n->inputs) {
          if (v->producer && members.count(v->producer) &&
              (culprits.count(v->producer) || culprits.count(n))) {
            (*refuse)[{v->producer, n}] = {
                FusionReason::NotProfitable, v->producer->name, n->name,
                "'" + v->producer->name + "' -> '" + n->name + "': " + text,
                "nothing; cost_model=off fuses them anyway"};
          }
        }
      }
      any = true;
    }
    return any;
  }

  static bool touches_dtype_kernels_lack(const Node* n) {
    auto lacks = [](const Value* v) {
      return v->dtype != DType::f32 && v->dtype != DType::bf16 && v->dtype != DType::f16 &&
             v->dtype != DType::boolean;
    };
    return std::any_of(n->inputs.begin(), n->inputs.end(), lacks) ||
           std::any_of(n->outputs.begin(), n->outputs.end(), lacks);
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
  // Each round refuses at least one more edge, so there are at most as many rounds as edges.
  EdgeDecisions refused;
  for (;;) {
    const size_t before = refused.size();
    std::optional<Partition> out = Partitioner(g, config, rules, &refused).run(&refused);
    if (out) return std::move(*out);
    UBF_CHECK(refused.size() > before, "the cost model refused a group but no new edge");
  }
}

}  // namespace ubfuse
