#include "fusion/partition.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/views.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

bool is_reduction(const Node* n) { return fusion_class(n->op) == FusionClass::RowReduction; }
// A Transpose that keeps the last axis in place: each output row is a whole input row, so a
// fused kernel reads it through a strided row map of its input (kir::Input::row_perm).
bool is_row_transpose(const Node* n) { return transpose_keeps_rows(*n); }
// Ops that read their input at other places than the element being computed (a permuted row,
// another row): the input must come from memory.
bool reads_elsewhere(const Node* n) {
  return fusion_class(n->op) == FusionClass::RowPermute || is_row_transpose(n);
}
bool is_fusible(const Node* n) {
  FusionClass c = fusion_class(n->op);
  return c == FusionClass::Elementwise || c == FusionClass::Broadcast ||
         c == FusionClass::RowReduction || c == FusionClass::RowPermute || is_row_transpose(n);
}
bool is_matmul(const Node* n) { return n->op == OpKind::MatMul; }

// The domain a node iterates over: its input for a row reduction, else its output.
Shape node_domain(const Node* n) { return is_reduction(n) ? n->inputs[0]->shape : n->out()->shape; }

// Per-row forms of a domain: last dim 1 (keepdims) or dropped.
bool is_row_form(const Shape& small, const Shape& dom) {
  if (dom.empty()) return false;
  Shape keep = dom;
  keep.back() = Dim(int64_t(1));
  Shape drop(dom.begin(), dom.end() - 1);
  return (small == keep || small == drop) && small != dom;
}

struct Group {
  std::vector<const Node*> nodes;  // in topo order
  Shape domain;
  bool alive = true;
};

std::string names_of(const std::vector<const Node*>& ns) {
  std::string s;
  for (auto* n : ns) s += (s.empty() ? "'" : ", '") + n->name + "'";
  return s;
}

class Partitioner {
 public:
  Partitioner(const Graph& g, const FusionConfig& c, const FusionRules& r)
      : g_(g), config_(c), rules_(r) {}

  Partition run() {
    order_ = g_.topo_order();
    for (size_t i = 0; i < order_.size(); i++) topo_index_[order_[i]] = int(i);
    for (Node* n : order_) {
      for (auto* v : n->inputs) users_[v].push_back(n);
    }
    for (Node* n : order_) {
      if (n->op == OpKind::Constant) continue;
      group_of_[n] = int(groups_.size());
      groups_.push_back({{n}, node_domain(n), true});
    }
    for (Node* n : order_) {
      if (n->op == OpKind::Constant) continue;
      for (auto* v : n->inputs) {
        Node* p = v->producer;
        if (!p || p->op == OpKind::Constant) continue;
        if (!seen_edges_.insert({p, n}).second) continue;
        if (group_of_[p] == group_of_[n]) {
          fused(p, n);
          continue;
        }
        FusionDecision d = try_merge(p, n);
        if (d.reason == FusionReason::Fused) merge(group_of_[p], group_of_[n]);
        decisions_.push_back(d);
      }
    }
    return finish();
  }

 private:
  void fused(const Node* p, const Node* n) {
    decisions_.push_back({FusionReason::Fused, p->name, n->name,
                          "'" + p->name + "' and '" + n->name + "' run in one kernel", ""});
  }

  FusionDecision no(FusionReason r, const Node* p, const Node* n, std::string msg,
                    std::string hint) {
    return {r, p->name, n->name, std::move(msg), std::move(hint)};
  }

  std::string rule_for(const Node* p, const Node* n, const Group& gp) {
    if (is_matmul(p)) return "MatMulEpilogueFusion";
    if (fusion_class(p->op) == FusionClass::RowPermute) return "RowPermuteFusion";
    if (is_row_transpose(p)) return "RowTransposeFusion";
    if (is_reduction(n)) return "ReductionPrologueFusion";
    for (auto* m : gp.nodes) {
      if (is_reduction(m)) return "ReductionEpilogueFusion";
    }
    return "ElementwiseFusion";
  }

  // Domain of the merged group, or nullopt when the two iterate differently.
  std::optional<Shape> merged_domain(const Group& a, const Group& b) {
    if (a.domain == b.domain) return a.domain;
    if (is_row_form(a.domain, b.domain) && !has(a, is_reduction)) return b.domain;
    if (is_row_form(b.domain, a.domain) && !has(b, is_reduction)) return a.domain;
    return std::nullopt;
  }

  template <typename F>
  static bool has(const Group& g, F pred) {
    return std::any_of(g.nodes.begin(), g.nodes.end(), pred);
  }
  template <typename F>
  static const Node* first(const Group& g, F pred) {
    auto it = std::find_if(g.nodes.begin(), g.nodes.end(), pred);
    return it == g.nodes.end() ? nullptr : *it;
  }

  FusedGroup describe(const std::vector<const Node*>& nodes, const Shape& domain) {
    FusedGroup fg;
    fg.nodes = nodes;
    fg.domain = domain;
    std::unordered_set<const Node*> in(nodes.begin(), nodes.end());
    std::set<const Value*> seen_in;
    for (auto* n : nodes) {
      for (auto* v : n->inputs) {
        if (v->producer && in.count(v->producer)) continue;
        if (seen_in.insert(v).second) fg.inputs.push_back(v);
      }
    }
    for (auto* n : nodes) {
      for (auto* v : n->outputs) {
        bool escapes = g_.is_output(v);
        for (auto* u : users_[v]) escapes |= !in.count(u);
        if (escapes) fg.outputs.push_back(v);
      }
    }
    bool red = std::any_of(nodes.begin(), nodes.end(), is_reduction);
    bool mm = std::any_of(nodes.begin(), nodes.end(), is_matmul);
    // A lone op runs its eager kernel, which is already one pass over memory.
    fg.kind = nodes.size() == 1 ? GroupKind::Single
              : mm              ? GroupKind::MatMulEpilogue
              : red             ? GroupKind::RowReduction
                                : GroupKind::Elementwise;
    fg.name = group_name(nodes, rules_);
    return fg;
  }

  // A fused kernel fixes when it is compiled how it reads each input: whole, per row or per
  // column. An input dim that meets a different domain dim is a broadcast only if it is 1 at
  // run time (symbol `rows` against 44), which the compiled reads cannot follow; eager can.
  std::optional<std::string> run_time_broadcast(const FusedGroup& fg) {
    for (const Value* v : fg.inputs) {
      bool elementwise_use = false;
      for (auto* u : users_[v]) {
        elementwise_use |= !is_matmul(u) && std::count(fg.nodes.begin(), fg.nodes.end(), u) > 0;
      }
      if (!elementwise_use) continue;  // a MatMul operand: not read over the domain
      // Read through a row Transpose (the group's only reader then): its dims in that order.
      const Node* t = nullptr;
      for (auto* u : users_[v]) {
        if (is_row_transpose(u) && std::count(fg.nodes.begin(), fg.nodes.end(), u) > 0) t = u;
      }
      const Shape& s = t ? t->out()->shape : v->shape;
      const size_t k = std::min(s.size(), fg.domain.size());
      for (size_t i = 1; i <= k; i++) {
        const Dim& d = s[s.size() - i];
        const Dim& want = fg.domain[fg.domain.size() - i];
        if (d == want || (d.is_static() && d.value() == 1)) continue;
        std::string name = v->producer ? v->producer->name : v->name;
        return "'" + name + "' " + shape_str(s) + " meets the domain " + shape_str(fg.domain) +
               " with " + d.str() + " against " + want.str() +
               ": they agree only by broadcasting a 1 at run time, which a fused kernel's "
               "compiled reads cannot follow";
      }
    }
    return std::nullopt;
  }

  std::vector<const Node*> merged_nodes(const Group& a, const Group& b) {
    std::vector<const Node*> m = a.nodes;
    m.insert(m.end(), b.nodes.begin(), b.nodes.end());
    std::sort(m.begin(), m.end(),
              [&](const Node* x, const Node* y) { return topo_index_[x] < topo_index_[y]; });
    return m;
  }

  // True when some path leaves {a, b} from a member and re-enters it through an outside node.
  bool creates_cycle(int ga, int gb) {
    std::unordered_set<const Node*> members;
    for (int gi : {ga, gb}) {
      for (auto* n : groups_[size_t(gi)].nodes) members.insert(n);
    }
    std::vector<const Node*> stack;
    std::unordered_set<const Node*> visited;
    for (auto* n : members) {
      for (auto* v : n->outputs) {
        for (auto* u : users_[v]) {
          if (!members.count(u) && visited.insert(u).second) stack.push_back(u);
        }
      }
    }
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      for (auto* v : x->outputs) {
        for (auto* u : users_[v]) {
          if (members.count(u)) return true;
          if (visited.insert(u).second) stack.push_back(u);
        }
      }
    }
    return false;
  }

  // A RowPermute reader of a value p passes to n: that value is written to memory anyway (the
  // permuted read needs it there), so n reads it from there too and may join the permutation's
  // group (RoPE: q * cos beside rotate_half(q) * sin) instead of p's. Not while the rule that
  // fuses permutations is off.
  const Node* permuted_reader(const Node* p, const Node* n) {
    // A row Transpose's output is itself a read of memory, which the permutation can compose.
    if (!rules_.rule_enabled("RowPermuteFusion") || is_row_transpose(p)) return nullptr;
    for (const Value* v : n->inputs) {
      if (v->producer != p) continue;
      for (const Node* u : users_[v]) {
        if (fusion_class(u->op) == FusionClass::RowPermute) return u;
      }
    }
    return nullptr;
  }

  // A row permutation reads its input at other columns of the row than the one being computed,
  // and a row Transpose at another row: a fused kernel can do that only where the input comes
  // from memory. And a kernel reads each input through one row map: a transposed input is not
  // also read untransposed (or transposed otherwise) in the same group.
  std::optional<FusionDecision> elsewhere_read_conflict(const std::vector<const Node*>& nodes,
                                                        const Node* p, const Node* n) {
    auto member = [&](const Node* x) {
      return x && std::find(nodes.begin(), nodes.end(), x) != nodes.end();
    };
    const bool matmul = std::any_of(nodes.begin(), nodes.end(), is_matmul);
    for (const Node* m : nodes) {
      if (!reads_elsewhere(m)) continue;
      if (matmul && is_row_transpose(m)) {
        return no(FusionReason::NotFusible, p, n,
                  "'" + m->name +
                      "' (Transpose) would join a MatMul epilogue, which reads its "
                      "inputs by the MatMul's rows",
                  "the Transpose stays a kernel of its own");
      }
      const Value* v = m->inputs[0];
      const std::string what =
          is_row_transpose(m) ? "at other rows than it computes" : "at other columns of the row";
      // A rotation of a transposed input reads both ways at once: through the input's row map.
      const bool composes = !is_row_transpose(m) && v->producer && is_row_transpose(v->producer);
      if (member(v->producer) && !composes) {
        return no(FusionReason::NotFusible, p, n,
                  "'" + m->name + "' (" + std::string(op_name(m->op)) + ") reads '" + v->name +
                      "' " + what + ", so '" + v->producer->name +
                      "' must write it to memory from another kernel",
                  "a " + std::string(is_row_transpose(m) ? "Transpose" : "RowPermute op") +
                      " fuses with the ops that read it; its input comes from memory");
      }
      if (!is_row_transpose(m)) continue;
      for (const Node* u : users_[v]) {
        const bool same_map = is_row_transpose(u) && u->attr_ints("perm") == m->attr_ints("perm");
        if (u == m || !member(u) || same_map) continue;
        return no(FusionReason::NotFusible, p, n,
                  "'" + v->name + "' is read through the Transpose '" + m->name +
                      "' and also by '" + u->name + "' in the same group",
                  "a fused kernel reads each input with one row map; the two stay apart");
      }
    }
    return std::nullopt;
  }

  FusionDecision try_merge(const Node* p, const Node* n) {
    int gp = group_of_[p], gn = group_of_[n];
    const Group& a = groups_[size_t(gp)];
    const Group& b = groups_[size_t(gn)];
    if (p->op == OpKind::Host || n->op == OpKind::Host) {
      const Node* h = p->op == OpKind::Host ? p : n;
      return no(FusionReason::HostSync, p, n,
                "the Host node '" + h->name + "' forces a sync between '" + p->name + "' and '" +
                    n->name + "'",
                "move '" + h->name + "' after the fused chain or remove it");
    }
    // The epilogue runs on blocks of whole output rows, so it takes row reductions too (a
    // residual add and its norm right after a projection), when the MatMul's output is a
    // matrix (rank-1 operands have no rows to block).
    const Node* mm = is_matmul(p) ? p : first(a, is_matmul);
    bool rows_ok = !mm || (mm->inputs[0]->shape.size() >= 2 && mm->inputs[1]->shape.size() >= 2);
    bool epilogue =
        is_matmul(p) && is_fusible(n) && !has(b, is_matmul) && (rows_ok || !has(b, is_reduction));
    if (!epilogue && (!is_fusible(p) || !is_fusible(n) || has(b, is_matmul) ||
                      (!rows_ok && has(b, is_reduction)))) {
      if (is_fusible(p) && is_fusible(n) && has(b, is_matmul)) {
        return no(FusionReason::NotFusible, p, n,
                  "'" + n->name + "' is in a MatMul epilogue; '" + p->name +
                      "' is computed before it as its own kernel",
                  "a MatMul epilogue takes elementwise ops and row reductions on the MatMul's "
                  "output only");
      }
      if (is_fusible(p) && is_fusible(n)) {
        return no(FusionReason::NotFusible, p, n,
                  "'" + n->name + "' is a row reduction and the MatMul '" + mm->name +
                      "' before it has a vector operand, so its output has no rows to block",
                  "a MatMul epilogue takes row reductions only over matrix outputs");
      }
      const Node* bad = !is_fusible(n) ? n : p;
      std::string cls(fusion_class_name(fusion_class(bad->op)));
      const bool view = runs_as_view(g_, *bad);
      std::string why = is_matmul(bad) ? " (a MatMul takes an elementwise epilogue, no prologue)"
                        : view         ? " (it runs as a view of its input: no kernel, no copy)"
                        : fusion_class(bad->op) == FusionClass::Injective
                            ? " (it moves data; its output is materialized)"
                            : "";
      return no(FusionReason::NotFusible, p, n,
                "'" + bad->name + "' (" + std::string(op_name(bad->op)) + ") is " + cls +
                    " and does not fuse with '" + (bad == n ? p : n)->name + "'" + why,
                "fusion joins Elementwise, Broadcast, RowReduction and RowPermute ops, Transposes "
                "that keep the last axis, and MatMul epilogues");
    }
    if (const Node* perm = permuted_reader(p, n)) {
      return no(FusionReason::NotFusible, p, n,
                "'" + perm->name + "' (" + std::string(op_name(perm->op)) + ") reads '" +
                    perm->inputs[0]->name + "' at other columns of the row, so '" + p->name +
                    "' writes it to memory and '" + n->name + "' reads it from there",
                "a RowPermute op fuses with the ops that read it; its input comes from memory");
    }
    std::string rule = rule_for(p, n, a);
    if (!rules_.rule_enabled(rule)) {
      return no(FusionReason::DisabledByRule, p, n,
                "rule " + rule + " is off" + (rules_.source.empty() ? "" : " in " + rules_.source),
                "switch " + rule + " on in the UBFusion section of the rules file");
    }
    auto dom = merged_domain(a, b);
    if (is_matmul(p) && dom && !(p->out()->shape == *dom)) dom.reset();
    if (!dom) {
      return no(FusionReason::ShapeMismatch, p, n,
                "'" + p->name + "' iterates over " + shape_str(a.domain) + " but '" + n->name +
                    "' over " + shape_str(b.domain),
                "only ops over the same rows x columns fuse; the smaller value is read as a "
                "broadcast input instead");
    }
    auto nodes = merged_nodes(a, b);
    if (auto why = elsewhere_read_conflict(nodes, p, n)) return *why;
    FusedGroup fg = describe(nodes, *dom);
    if (auto why = run_time_broadcast(fg)) {
      return no(FusionReason::DynamicShape, p, n, *why,
                "give the dim a fixed size, or the same symbol as the dim it meets, so the fused "
                "kernel knows how to read the input");
    }
    int reductions = int(std::count_if(nodes.begin(), nodes.end(), is_reduction));
    if (int(nodes.size()) > kMaxGroupOps || int(fg.inputs.size()) > kMaxGroupInputs ||
        int(fg.outputs.size()) > kMaxGroupOutputs || reductions > kMaxGroupReductions) {
      return no(FusionReason::GroupLimit, p, n,
                "merging would give " + std::to_string(nodes.size()) + " ops, " +
                    std::to_string(fg.inputs.size()) + " inputs, " +
                    std::to_string(fg.outputs.size()) + " outputs, " + std::to_string(reductions) +
                    " reductions (limits " + std::to_string(kMaxGroupOps) + ", " +
                    std::to_string(kMaxGroupInputs) + ", " + std::to_string(kMaxGroupOutputs) +
                    ", " + std::to_string(kMaxGroupReductions) + ")",
                "the group limits are kMaxGroup* in src/fusion/partition.h");
    }
    for (auto& pat : rules_.patterns) {
      if (pat.forbid && contains_sequence(nodes, pat.ops)) {
        return no(
            FusionReason::DisabledByRule, p, n,
            "pattern '" + pat.name + "' in " + rules_.source + " forbids fusing " + names_of(nodes),
            "remove the pattern or its \"action\": \"forbid\"");
      }
    }
    // Values of the merged group that are also needed outside it.
    if (fg.outputs.size() > 1 || (fg.outputs.size() == 1 && fg.outputs[0] != nodes.back()->out())) {
      if (!rules_.rule_enabled("MultiOutputFusion")) {
        return no(FusionReason::DisabledByRule, p, n,
                  "'" + p->name +
                      "' is also needed outside the group and rule MultiOutputFusion "
                      "is off" +
                      (rules_.source.empty() ? "" : " in " + rules_.source),
                  "switch MultiOutputFusion on");
      }
    }
    if (creates_cycle(gp, gn)) {
      return no(FusionReason::Cycle, p, n,
                "fusing '" + p->name + "' into '" + n->name +
                    "' would need a value computed outside the group from inside it",
                "the two ops are linked through another kernel; they stay apart");
    }
    // A prologue makes the reduction keep computed rows in the UB; when they don't fit, split
    // here (the prologue writes its result, the reduction re-reads it). Epilogues add nothing
    // the UB must hold, so they always fuse.
    bool prologue = has(b, is_reduction) && !has(a, is_reduction);
    if (prologue && !dom->empty() && dom->back().is_static()) {
      int64_t need = config_.ub_bytes_per_row(fg, dom->back().value());
      if (need > config_.ub_bytes) {
        return no(FusionReason::BufferCapacity, p, n,
                  "the fused row of '" + names_of(nodes) + "' needs " + std::to_string(need) +
                      " bytes of unified buffer per thread, ub_bytes is " +
                      std::to_string(config_.ub_bytes),
                  "raise ub_bytes to at least " + std::to_string(need));
      }
    }
    return {FusionReason::Fused, p->name, n->name,
            "'" + p->name + "' fused into '" + n->name + "' (" + rule + ")", ""};
  }

  static bool contains_sequence(const std::vector<const Node*>& nodes,
                                const std::vector<std::string>& ops) {
    if (ops.size() > nodes.size()) return false;
    for (size_t i = 0; i + ops.size() <= nodes.size(); i++) {
      bool all = true;
      for (size_t j = 0; j < ops.size() && all; j++) all = op_name(nodes[i + j]->op) == ops[j];
      if (all) return true;
    }
    return false;
  }

  void merge(int gp, int gn) {
    Group& a = groups_[size_t(gp)];
    Group& b = groups_[size_t(gn)];
    auto dom = merged_domain(a, b);
    UBF_CHECK(dom.has_value() || has(a, is_matmul), "merging groups of different domains");
    if (has(a, is_matmul)) dom = a.domain;
    b.nodes = merged_nodes(a, b);
    b.domain = *dom;
    for (auto* n : a.nodes) group_of_[n] = gn;
    a.nodes.clear();
    a.alive = false;
  }

  Partition finish() {
    // Order groups topologically (Kahn), ties by their first member's topo index.
    std::vector<int> live;
    for (int i = 0; i < int(groups_.size()); i++) {
      if (groups_[size_t(i)].alive) live.push_back(i);
    }
    std::map<int, std::set<int>> succ;
    std::map<int, int> indeg;
    for (int gi : live) indeg[gi] = 0;
    for (int gi : live) {
      for (auto* n : groups_[size_t(gi)].nodes) {
        for (auto* v : n->inputs) {
          Node* p = v->producer;
          if (!p || p->op == OpKind::Constant) continue;
          int gp = group_of_[p];
          if (gp != gi && succ[gp].insert(gi).second) indeg[gi]++;
        }
      }
    }
    auto first = [&](int gi) { return topo_index_[groups_[size_t(gi)].nodes.front()]; };
    auto cmp = [&](int x, int y) { return first(x) > first(y); };
    std::priority_queue<int, std::vector<int>, decltype(cmp)> ready(cmp);
    for (int gi : live) {
      if (indeg[gi] == 0) ready.push(gi);
    }
    Partition out;
    while (!ready.empty()) {
      int gi = ready.top();
      ready.pop();
      const Group& g = groups_[size_t(gi)];
      FusedGroup fg = describe(g.nodes, g.domain);
      mark_reread(fg, out.decisions);
      out.groups.push_back(std::move(fg));
      for (int s : succ[gi]) {
        if (--indeg[s] == 0) ready.push(s);
      }
    }
    UBF_CHECK(out.groups.size() == live.size(), "fused groups form a cycle");
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
    int64_t need = config_.ub_bytes_per_row(fg, cols.value());
    if (need > config_.ub_bytes) {
      fg.reread = true;
      decisions.push_back(
          {FusionReason::BufferCapacity, fg.nodes.front()->name, fg.nodes.back()->name,
           fg.name + " needs " + std::to_string(need) +
               " bytes of unified buffer per row, ub_bytes is " + std::to_string(config_.ub_bytes) +
               ": it runs as a two-pass kernel that re-reads its inputs",
           "raise ub_bytes to at least " + std::to_string(need)});
    }
  }

  const Graph& g_;
  const FusionConfig& config_;
  const FusionRules& rules_;
  std::vector<Node*> order_;
  std::unordered_map<const Node*, int> topo_index_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_map<const Node*, int> group_of_;
  std::vector<Group> groups_;
  std::vector<FusionDecision> decisions_;
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
