// The checks the partitioner asks of an edge before merging its groups (checks(), in order),
// and the merge candidate they share, which works out the merged group on first need.
#include "fusion/fusion_checks.h"

#include <set>
#include <unordered_set>

#include "fusion/partition.h"
#include "ir/views.h"
#include "ubfuse/error.h"

namespace ubfuse::fusion {

bool is_reduction(const Node* n) { return fusion_class(n->op) == FusionClass::RowReduction; }
bool is_matmul(const Node* n) {
  return n->op == OpKind::MatMul || n->op == OpKind::DynamicQuantMatMul;
}
bool heads_epilogue(const Node* n) {
  return is_matmul(n) || n->op == OpKind::Conv || n->op == OpKind::DynamicQuantConv;
}
Shape node_domain(const Node* n) { return is_reduction(n) ? n->inputs[0]->shape : n->out()->shape; }

namespace {

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

// Per-row forms of a domain: last dim 1 (keepdims) or dropped.
bool is_row_form(const Shape& small, const Shape& dom) {
  if (dom.empty()) return false;
  Shape keep = dom;
  keep.back() = Dim(int64_t(1));
  Shape drop(dom.begin(), dom.end() - 1);
  return (small == keep || small == drop) && small != dom;
}

template <typename F>
const Node* first(const Group& g, F pred) {
  auto it = std::find_if(g.nodes.begin(), g.nodes.end(), pred);
  return it == g.nodes.end() ? nullptr : *it;
}

std::string names_of(const std::vector<const Node*>& ns) {
  std::string s;
  for (auto* n : ns) s += (s.empty() ? "'" : ", '") + n->name + "'";
  return s;
}

bool contains_sequence(const std::vector<const Node*>& nodes, const std::vector<std::string>& ops) {
  if (ops.size() > nodes.size()) return false;
  for (size_t i = 0; i + ops.size() <= nodes.size(); i++) {
    bool all = true;
    for (size_t j = 0; j < ops.size() && all; j++) all = op_name(nodes[i + j]->op) == ops[j];
    if (all) return true;
  }
  return false;
}

}  // namespace

// Domain of the merged group, or nullopt when the two iterate differently.
std::optional<Shape> merged_domain(const Group& a, const Group& b) {
  if (a.domain == b.domain) return a.domain;
  if (is_row_form(a.domain, b.domain) && !has(a, is_reduction)) return b.domain;
  if (is_row_form(b.domain, a.domain) && !has(b, is_reduction)) return a.domain;
  return std::nullopt;
}

const std::vector<Node*>& State::users_of(const Value* v) const {
  static const std::vector<Node*> kNone;
  auto it = users.find(v);
  return it == users.end() ? kNone : it->second;
}

std::vector<const Node*> State::merged_nodes(const Group& a, const Group& b) const {
  std::vector<const Node*> m = a.nodes;
  m.insert(m.end(), b.nodes.begin(), b.nodes.end());
  std::sort(m.begin(), m.end(),
            [&](const Node* x, const Node* y) { return topo_index.at(x) < topo_index.at(y); });
  return m;
}

FusedGroup State::describe(const std::vector<const Node*>& nodes, const Shape& domain,
                           bool attention) const {
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
      bool escapes = g.is_output(v);
      for (auto* u : users_of(v)) escapes |= !in.count(u);
      if (escapes) fg.outputs.push_back(v);
    }
  }
  bool red = std::any_of(nodes.begin(), nodes.end(), is_reduction);
  bool mm = std::any_of(nodes.begin(), nodes.end(), heads_epilogue);
  // A lone op runs its eager kernel, which is already one pass over memory.
  fg.kind = attention           ? GroupKind::Attention
            : nodes.size() == 1 ? GroupKind::Single
            : mm                ? GroupKind::MatMulEpilogue
            : red               ? GroupKind::RowReduction
                                : GroupKind::Elementwise;
  fg.name = group_name(nodes, rules);
  return fg;
}

namespace {

// One producer -> consumer edge whose two groups may merge, and what the checks work out about
// the merged group: each part on first need, so a check pays only for what it reads.
class Candidate {
 public:
  Candidate(const State& st, const Node* p, const Node* n)
      : st(st),
        p(p),
        n(n),
        gp(st.group_of.at(p)),
        gn(st.group_of.at(n)),
        a(st.groups[size_t(gp)]),
        b(st.groups[size_t(gn)]) {}

  const State& st;
  const Node* const p;  // the producer, in group a
  const Node* const n;  // the consumer, in group b
  const int gp, gn;
  const Group& a;
  const Group& b;

  FusionDecision no(FusionReason r, std::string msg, std::string hint) const {
    return {r, p->name, n->name, std::move(msg), std::move(hint)};
  }

  // The MatMul or Conv on p's side, whose epilogue n's group would join: p itself or one in p's
  // group.
  const Node* matmul() const { return heads_epilogue(p) ? p : first(a, heads_epilogue); }
  // Whether that op's output has rows to block (a MatMul of matrices; a Conv's [N, M, ...]), or
  // there is none.
  bool matmul_has_rows() const {
    const Node* mm = matmul();
    return !mm || (mm->inputs[0]->shape.size() >= 2 && mm->inputs[1]->shape.size() >= 2);
  }

  // The fusion rule that governs this kind of edge.
  const std::string& rule() {
    if (!rule_) rule_ = rule_for();
    return *rule_;
  }
  // The merged iteration domain; nullopt when the two groups iterate differently.
  const std::optional<Shape>& domain() {
    if (!domain_) {
      auto dom = merged_domain(a, b);
      if (heads_epilogue(p) && dom && !(p->out()->shape == *dom)) dom.reset();
      domain_ = std::move(dom);
    }
    return *domain_;
  }
  // The members of the merged group, in topological order.
  const std::vector<const Node*>& nodes() {
    if (!nodes_) nodes_ = st.merged_nodes(a, b);
    return *nodes_;
  }
  bool member(const Node* x) {
    return x && std::find(nodes().begin(), nodes().end(), x) != nodes().end();
  }
  // The merged group as it would be launched; asked only once the groups share a domain.
  const FusedGroup& group() {
    UBF_CHECK(domain().has_value(), "a check reads the merged group before its domain is known");
    if (!group_) group_ = st.describe(nodes(), *domain());
    return *group_;
  }

 private:
  std::string rule_for() const {
    if (is_matmul(p)) return "MatMulEpilogueFusion";
    if (heads_epilogue(p)) return "ConvEpilogueFusion";
    if (fusion_class(p->op) == FusionClass::RowPermute) return "RowPermuteFusion";
    if (is_row_transpose(p)) return "RowTransposeFusion";
    if (is_reduction(n)) return "ReductionPrologueFusion";
    for (auto* m : a.nodes) {
      if (is_reduction(m)) return "ReductionEpilogueFusion";
    }
    return "ElementwiseFusion";
  }

  std::optional<std::string> rule_;
  std::optional<std::optional<Shape>> domain_;
  std::optional<std::vector<const Node*>> nodes_;
  std::optional<FusedGroup> group_;
};

// A check's answer: nothing when it has no objection, else the edge's decision.
using Objection = std::optional<FusionDecision>;

// --- The checks, in the order fusion_checks() asks them. ---

// A Host node runs on the host between kernels: the value it reads or writes must be in memory.
Objection host_node(Candidate& c) {
  if (c.p->op != OpKind::Host && c.n->op != OpKind::Host) return {};
  const Node* h = c.p->op == OpKind::Host ? c.p : c.n;
  return c.no(FusionReason::HostSync,
              "the Host node '" + h->name + "' forces a sync between '" + c.p->name + "' and '" +
                  c.n->name + "'",
              "move '" + h->name + "' after the fused chain or remove it");
}

// The cost model refused, in an earlier round, a group this edge was inside of (partition.cc).
Objection profitable(Candidate& c) {
  if (!c.st.refused) return {};
  auto it = c.st.refused->find({c.p, c.n});
  if (it == c.st.refused->end()) return {};
  return it->second;
}

// An attention group runs as the flash-style kernel, which computes exactly its chain.
Objection attention_kernel(Candidate& c) {
  if (!c.a.attention && !c.b.attention) return {};
  const Group& g = c.a.attention ? c.a : c.b;
  const Node* other = c.a.attention ? c.n : c.p;
  return c.no(FusionReason::NotFusible,
              "'" + other->name + "' (" + std::string(op_name(other->op)) +
                  ") is outside the attention chain " + names_of(g.nodes) +
                  ", which runs as one flash-style kernel and takes no other op",
              "the rules file's AttentionFusion off makes the chain a MatMul epilogue and a "
              "MatMul, which other ops may join");
}

// The epilogue runs on blocks of whole output rows, so it takes row reductions too (a residual
// add and its norm right after a projection), when the MatMul's output is a matrix. A Conv's
// epilogue runs over its whole output.
bool takes_epilogue(const Candidate& c) {
  return heads_epilogue(c.p) && is_fusible(c.n) && !has(c.b, heads_epilogue) &&
         (c.matmul_has_rows() || !has(c.b, is_reduction));
}

// Only the op classes a fused kernel can compute element by element (or a MatMul's epilogue)
// fuse; data movement, gathers and opaque ops keep their own kernels.
Objection op_class(Candidate& c) {
  if ((is_fusible(c.p) && is_fusible(c.n)) || takes_epilogue(c)) return {};
  const Node* bad = !is_fusible(c.n) ? c.n : c.p;
  std::string cls(fusion_class_name(fusion_class(bad->op)));
  const bool view = runs_as_view(c.st.g, *bad);
  std::string why = heads_epilogue(bad) ? " (a " + std::string(op_name(bad->op)) +
                                              " takes an elementwise epilogue, no prologue)"
                    : view ? " (it runs as a view of its input: no kernel, no copy)"
                    : fusion_class(bad->op) == FusionClass::Injective
                        ? " (it moves data; its output is materialized)"
                        : "";
  return c.no(FusionReason::NotFusible,
              "'" + bad->name + "' (" + std::string(op_name(bad->op)) + ") is " + cls +
                  " and does not fuse with '" + (bad == c.n ? c.p : c.n)->name + "'" + why,
              "fusion joins Elementwise, Broadcast, RowReduction and RowPermute ops, Transposes "
              "that keep the last axis, and MatMul and Conv epilogues");
}

// Fused kernels compute in f32 and load and store float and bool values only: an op that reads or
// writes an 8-bit integer (a quantized tensor: a Cast from or to one, a Where or row Transpose of
// one, integer arithmetic or a comparison on one) keeps a kernel of its own rather than making its
// group fail to lower.
Objection int8_value(Candidate& c) {
  for (const Node* m : {c.p, c.n}) {
    if (heads_epilogue(m)) continue;  // its own kernel reads its operands (DynamicQuantMatMul)
    const Value* bad = nullptr;
    for (const Value* v : m->inputs) {
      if (!bad && is_int8(v->dtype)) bad = v;
    }
    for (const Value* v : m->outputs) {
      if (!bad && is_int8(v->dtype)) bad = v;
    }
    if (!bad) continue;
    const bool reads = bad->producer != m;
    return c.no(FusionReason::NotFusible,
                "'" + m->name + "' (" + std::string(op_name(m->op)) + ") " +
                    (reads ? "reads" : "writes") + " the " + std::string(dtype_name(bad->dtype)) +
                    " value '" + bad->name +
                    "'; fused kernels compute in f32 and load and store no 8-bit integers",
                "quantized values run op by op; the elementwise ops after a DequantizeLinear (f32) "
                "fuse");
  }
  return {};
}

// A MatMul (Conv) epilogue starts at the MatMul: what is computed before it is its input.
Objection matmul_prologue(Candidate& c) {
  if (!is_fusible(c.p) || !is_fusible(c.n) || !has(c.b, heads_epilogue)) return {};
  const std::string head(op_name(first(c.b, heads_epilogue)->op));
  return c.no(FusionReason::NotFusible,
              "'" + c.n->name + "' is in a " + head + " epilogue; '" + c.p->name +
                  "' is computed before it as its own kernel",
              "a " + head + " epilogue takes elementwise ops and row reductions on the " + head +
                  "'s output only");
}

// The epilogue sees blocks of whole rows; a MatMul with a vector operand has none to reduce.
Objection vector_matmul_rows(Candidate& c) {
  if (!is_fusible(c.p) || !is_fusible(c.n) || c.matmul_has_rows() || !has(c.b, is_reduction)) {
    return {};
  }
  return c.no(FusionReason::NotFusible,
              "'" + c.n->name + "' is a row reduction and the MatMul '" + c.matmul()->name +
                  "' before it has a vector operand, so its output has no rows to block",
              "a MatMul epilogue takes row reductions only over matrix outputs");
}

// A RowPermute reader of a value p passes to n, or null.
const Node* permuted_reader(const Candidate& c) {
  for (const Value* v : c.n->inputs) {
    if (v->producer != c.p) continue;
    for (const Node* u : c.st.users_of(v)) {
      if (fusion_class(u->op) == FusionClass::RowPermute) return u;
    }
  }
  return nullptr;
}

// A value a RowPermute op reads is written to memory anyway (the permuted read needs it there),
// so n reads it from there too and may join the permutation's group (RoPE: q * cos beside
// rotate_half(q) * sin) instead of p's.
Objection permuted_input(Candidate& c) {
  // A row Transpose's output is itself a read of memory, which the permutation can compose.
  if (!c.st.rules.rule_enabled("RowPermuteFusion") || is_row_transpose(c.p)) return {};
  const Node* perm = permuted_reader(c);
  if (!perm) return {};
  return c.no(FusionReason::NotFusible,
              "'" + perm->name + "' (" + std::string(op_name(perm->op)) + ") reads '" +
                  perm->inputs[0]->name + "' at other columns of the row, so '" + c.p->name +
                  "' writes it to memory and '" + c.n->name + "' reads it from there",
              "a RowPermute op fuses with the ops that read it; its input comes from memory");
}

// Users switch kinds of fusion off by name (rules file, options).
Objection rule_off(Candidate& c) {
  const std::string& rule = c.rule();
  if (c.st.rules.rule_enabled(rule)) return {};
  const FusionRules& r = c.st.rules;
  return c.no(FusionReason::DisabledByRule,
              "rule " + rule + " is off" + (r.source.empty() ? "" : " in " + r.source),
              "switch " + rule + " on in the UBFusion section of the rules file");
}

// A fused kernel has one loop nest over rows x columns; a MatMul's epilogue runs over its output.
Objection domain(Candidate& c) {
  if (c.domain()) return {};
  return c.no(FusionReason::ShapeMismatch,
              "'" + c.p->name + "' iterates over " + shape_str(c.a.domain) + " but '" + c.n->name +
                  "' over " + shape_str(c.b.domain),
              "only ops over the same rows x columns fuse; the smaller value is read as a "
              "broadcast input instead");
}

// The epilogue reads its inputs by the MatMul's rows; a Transpose reads another row.
Objection transpose_into_matmul(Candidate& c, const Node* m) {
  const auto head = std::find_if(c.nodes().begin(), c.nodes().end(), heads_epilogue);
  if (!is_row_transpose(m) || head == c.nodes().end()) return {};
  const std::string op(op_name((*head)->op));
  return c.no(FusionReason::NotFusible,
              "'" + m->name + "' (Transpose) would join a " + op +
                  " epilogue, which reads its inputs by the " + op + "'s rows",
              "the Transpose stays a kernel of its own");
}

// A row permutation reads its input at other columns of the row than the one being computed, and
// a row Transpose at another row: a fused kernel can do that only where the input is in memory.
Objection input_from_memory(Candidate& c, const Node* m) {
  if (!reads_elsewhere(m)) return {};
  const Value* v = m->inputs[0];
  const std::string what =
      is_row_transpose(m) ? "at other rows than it computes" : "at other columns of the row";
  // A rotation of a transposed input reads both ways at once: through the input's row map.
  const bool composes = !is_row_transpose(m) && v->producer && is_row_transpose(v->producer);
  if (!c.member(v->producer) || composes) return {};
  return c.no(FusionReason::NotFusible,
              "'" + m->name + "' (" + std::string(op_name(m->op)) + ") reads '" + v->name + "' " +
                  what + ", so '" + v->producer->name +
                  "' must write it to memory from another kernel",
              "a " + std::string(is_row_transpose(m) ? "Transpose" : "RowPermute op") +
                  " fuses with the ops that read it; its input comes from memory");
}

// A kernel reads each input through one row map: a transposed input is not also read
// untransposed (or transposed otherwise) in the same group.
Objection one_row_map(Candidate& c, const Node* m) {
  if (!is_row_transpose(m)) return {};
  const Value* v = m->inputs[0];
  for (const Node* u : c.st.users_of(v)) {
    const bool same_map = is_row_transpose(u) && u->attr_ints("perm") == m->attr_ints("perm");
    if (u == m || !c.member(u) || same_map) continue;
    return c.no(FusionReason::NotFusible,
                "'" + v->name + "' is read through the Transpose '" + m->name + "' and also by '" +
                    u->name + "' in the same group",
                "a fused kernel reads each input with one row map; the two stay apart");
  }
  return {};
}

// A fused kernel fixes when it is compiled how it reads each input: whole, per row or per column.
// An input dim that meets a different domain dim is a broadcast only if it is 1 at run time
// (symbol `rows` against 44), which the compiled reads cannot follow; eager can.
Objection run_time_broadcast(Candidate& c) {
  const FusedGroup& fg = c.group();
  const auto in_group = [&](const Node* u) {
    return std::count(fg.nodes.begin(), fg.nodes.end(), u) > 0;
  };
  for (const Value* v : fg.inputs) {
    bool elementwise_use = false;
    for (auto* u : c.st.users_of(v)) elementwise_use |= !heads_epilogue(u) && in_group(u);
    if (!elementwise_use) continue;  // a MatMul or Conv operand: not read over the domain
    // Read through a row Transpose (the group's only reader then): its dims in that order.
    const Node* t = nullptr;
    for (auto* u : c.st.users_of(v)) {
      if (is_row_transpose(u) && in_group(u)) t = u;
    }
    const Shape& s = t ? t->out()->shape : v->shape;
    const size_t k = std::min(s.size(), fg.domain.size());
    for (size_t i = 1; i <= k; i++) {
      const Dim& d = s[s.size() - i];
      const Dim& want = fg.domain[fg.domain.size() - i];
      if (d == want || (d.is_static() && d.value() == 1)) continue;
      std::string name = v->producer ? v->producer->name : v->name;
      return c.no(FusionReason::DynamicShape,
                  "'" + name + "' " + shape_str(s) + " meets the domain " + shape_str(fg.domain) +
                      " with " + d.str() + " against " + want.str() +
                      ": they agree only by broadcasting a 1 at run time, which a fused kernel's "
                      "compiled reads cannot follow",
                  "give the dim a fixed size, or the same symbol as the dim it meets, so the "
                  "fused kernel knows how to read the input");
    }
  }
  return {};
}

// Bounds on one kernel's size: its registers, arguments and the UB rows it keeps.
Objection group_limit(Candidate& c) {
  const FusedGroup& fg = c.group();
  const auto& nodes = c.nodes();
  int reductions = int(std::count_if(nodes.begin(), nodes.end(), is_reduction));
  if (int(nodes.size()) <= kMaxGroupOps && int(fg.inputs.size()) <= kMaxGroupInputs &&
      int(fg.outputs.size()) <= kMaxGroupOutputs && reductions <= kMaxGroupReductions) {
    return {};
  }
  return c.no(FusionReason::GroupLimit,
              "merging would give " + std::to_string(nodes.size()) + " ops, " +
                  std::to_string(fg.inputs.size()) + " inputs, " +
                  std::to_string(fg.outputs.size()) + " outputs, " + std::to_string(reductions) +
                  " reductions (limits " + std::to_string(kMaxGroupOps) + ", " +
                  std::to_string(kMaxGroupInputs) + ", " + std::to_string(kMaxGroupOutputs) + ", " +
                  std::to_string(kMaxGroupReductions) + ")",
              "the group limits are kMaxGroup* in src/fusion/partition.h");
}

// Users forbid op sequences by name in the rules file.
Objection forbidden_pattern(Candidate& c) {
  const FusionRules& r = c.st.rules;
  for (auto& pat : r.patterns) {
    if (pat.forbid && contains_sequence(c.nodes(), pat.ops)) {
      return c.no(
          FusionReason::DisabledByRule,
          "pattern '" + pat.name + "' in " + r.source + " forbids fusing " + names_of(c.nodes()),
          "remove the pattern or its \"action\": \"forbid\"");
    }
  }
  return {};
}

// An inner value also needed outside the group becomes an extra output, which users can forbid.
Objection multi_output(Candidate& c) {
  const FusedGroup& fg = c.group();
  const bool escapes =
      fg.outputs.size() > 1 || (fg.outputs.size() == 1 && fg.outputs[0] != c.nodes().back()->out());
  const FusionRules& r = c.st.rules;
  if (!escapes || r.rule_enabled("MultiOutputFusion")) return {};
  return c.no(FusionReason::DisabledByRule,
              "'" + c.p->name +
                  "' is also needed outside the group and rule MultiOutputFusion "
                  "is off" +
                  (r.source.empty() ? "" : " in " + r.source),
              "switch MultiOutputFusion on");
}

// True when some path leaves {a, b} and re-enters it. Paths run between groups, not nodes: a
// group is one kernel, so once a path reaches any member of another group, every output of that
// group waits for it (two groups can depend on each other with no node-level path back).
bool creates_cycle(const State& st, int ga, int gb) {
  std::vector<int> stack;
  std::unordered_set<int> visited;
  auto reach_users_of = [&](int gi) {
    for (auto* n : st.groups[size_t(gi)].nodes) {
      for (auto* v : n->outputs) {
        for (auto* u : st.users_of(v)) {
          auto g = st.group_of.find(u);
          if (g == st.group_of.end()) continue;  // the plan computes u (a Shape) before any kernel
          int gu = g->second;
          if (gu == ga || gu == gb) {
            if (gi != ga && gi != gb) return true;
            continue;
          }
          if (visited.insert(gu).second) stack.push_back(gu);
        }
      }
    }
    return false;
  };
  if (reach_users_of(ga) || reach_users_of(gb)) return true;
  while (!stack.empty()) {
    int g = stack.back();
    stack.pop_back();
    if (reach_users_of(g)) return true;
  }
  return false;
}

// Kernels run one after another: a group cannot wait for a kernel that reads its own output.
Objection cycle(Candidate& c) {
  if (!creates_cycle(c.st, c.gp, c.gn)) return {};
  return c.no(FusionReason::Cycle,
              "fusing '" + c.p->name + "' into '" + c.n->name +
                  "' would need a value computed outside the group from inside it",
              "the two ops are linked through another kernel; they stay apart");
}

// A prologue makes the reduction keep computed rows in the UB; when they don't fit, split here
// (the prologue writes its result, the reduction re-reads it). Epilogues add nothing the UB must
// hold, so they always fuse.
Objection ub_capacity(Candidate& c) {
  const bool prologue = has(c.b, is_reduction) && !has(c.a, is_reduction);
  const Shape& dom = *c.domain();
  if (!prologue || dom.empty() || !dom.back().is_static()) return {};
  const int64_t need = c.st.config.ub_bytes_per_row(c.group(), dom.back().value());
  const int64_t ub = c.st.config.ub_bytes;
  if (need <= ub) return {};
  return c.no(FusionReason::BufferCapacity,
              "the fused row of '" + names_of(c.nodes()) + "' needs " + std::to_string(need) +
                  " bytes of unified buffer per thread, ub_bytes is " + std::to_string(ub),
              "raise ub_bytes to at least " + std::to_string(need));
}

// A check and what it runs: `edge` for a check of the edge, `member` for one of each member.
struct Check {
  FusionCheck info;
  Objection (*edge)(Candidate&) = nullptr;
  Objection (*member)(Candidate&, const Node*) = nullptr;
};

Check edge_check(std::string_view name, FusionReason r, std::string_view when,
                 Objection (*f)(Candidate&)) {
  return {{name, r, false, when}, f, nullptr};
}
Check member_check(std::string_view name, FusionReason r, std::string_view when,
                   Objection (*f)(Candidate&, const Node*)) {
  return {{name, r, true, when}, nullptr, f};
}

// The order is part of the behaviour: the first objection is the decision users see.
const std::vector<Check>& checks() {
  using R = FusionReason;
  static const std::vector<Check> kChecks = {
      edge_check("HostNode", R::HostSync, "neither side is a Host node", host_node),
      edge_check("AttentionKernel", R::NotFusible,
                 "neither group is an attention chain (AttentionFusion), which runs as its own "
                 "flash-style kernel",
                 attention_kernel),
      edge_check("Profitable", R::NotProfitable,
                 "the edge is not inside a group the cost model refused: one predicted slower "
                 "than its parts (fusion/cost.h), after which the partition runs again",
                 profitable),
      edge_check("OpClass", R::NotFusible,
                 "both ops are Elementwise, Broadcast, RowReduction, RowPermute or a row "
                 "Transpose, or p is a MatMul or Conv that takes n's group as its epilogue",
                 op_class),
      edge_check("Int8Value", R::NotFusible,
                 "neither op reads or writes an i8 or u8 value (fused kernels load and store "
                 "float and bool values) but a DynamicQuantMatMul's own int8 weights",
                 int8_value),
      edge_check("MatMulPrologue", R::NotFusible,
                 "n's group holds no MatMul or Conv: an epilogue takes nothing computed before "
                 "its MatMul or Conv",
                 matmul_prologue),
      edge_check("VectorMatMulRows", R::NotFusible,
                 "the MatMul of p's group, if any, has matrix operands, or n's group holds no "
                 "row reduction",
                 vector_matmul_rows),
      edge_check("PermutedInput", R::NotFusible,
                 "no RowPermute op reads a value p passes to n (while RowPermuteFusion is on; n "
                 "then reads it from memory)",
                 permuted_input),
      edge_check("RuleOff", R::DisabledByRule,
                 "the rule for this kind of edge is on (rules file, options)", rule_off),
      edge_check("Domain", R::ShapeMismatch,
                 "both groups iterate over the same rows x columns (one may hold only per-row "
                 "values of the other's); a MatMul or Conv p's output is that domain",
                 domain),
      member_check("TransposeIntoMatMul", R::NotFusible,
                   "no row Transpose joins a group with a MatMul or Conv (the epilogue reads by "
                   "its output's rows)",
                   transpose_into_matmul),
      member_check("InputFromMemory", R::NotFusible,
                   "what a RowPermute op or row Transpose reads is not computed in the group (a "
                   "rotation of a row Transpose's output may be)",
                   input_from_memory),
      member_check("OneRowMap", R::NotFusible,
                   "a value read through a row Transpose is read by no other member but through "
                   "the same permutation",
                   one_row_map),
      edge_check("RunTimeBroadcast", R::DynamicShape,
                 "each input's dims equal the domain's or are a fixed 1, none agreeing only by a "
                 "1 at run time",
                 run_time_broadcast),
      edge_check("GroupLimit", R::GroupLimit,
                 "the merged group stays within kMaxGroupOps, kMaxGroupInputs, "
                 "kMaxGroupOutputs and kMaxGroupReductions",
                 group_limit),
      edge_check("ForbiddenPattern", R::DisabledByRule,
                 "no forbidden pattern of the rules file occurs in the merged group's ops",
                 forbidden_pattern),
      edge_check("MultiOutput", R::DisabledByRule,
                 "MultiOutputFusion is on, or only the last member's value leaves the merged "
                 "group",
                 multi_output),
      edge_check("Cycle", R::Cycle, "no path leaves the merged group and comes back into it",
                 cycle),
      edge_check("UbCapacity", R::BufferCapacity,
                 "a reduction prologue's fused row fits ub_bytes (checked when the row length is "
                 "fixed)",
                 ub_capacity),
  };
  return kChecks;
}

}  // namespace

FusionDecision ask_checks(const State& st, const Node* p, const Node* n, std::string_view* by) {
  Candidate c(st, p, n);
  const std::vector<Check>& all = checks();
  auto objects = [&](const Check& k, const Objection& o) {
    if (!o) return false;
    UBF_CHECK(o->reason == k.info.reason, "the check " + std::string(k.info.name) +
                                              " objected with another reason than its own");
    *by = k.info.name;
    return true;
  };
  for (size_t i = 0; i < all.size();) {
    if (all[i].edge) {
      Objection o = all[i].edge(c);
      if (objects(all[i], o)) return *o;
      i++;
      continue;
    }
    // A run of member checks: each member in turn, its checks in order.
    size_t end = i;
    while (end < all.size() && all[end].member) end++;
    for (const Node* m : c.nodes()) {
      for (size_t k = i; k < end; k++) {
        Objection o = all[k].member(c, m);
        if (objects(all[k], o)) return *o;
      }
    }
    i = end;
  }
  return {FusionReason::Fused, p->name, n->name,
          "'" + p->name + "' fused into '" + n->name + "' (" + c.rule() + ")", ""};
}

}  // namespace ubfuse::fusion

namespace ubfuse {

const std::vector<FusionCheck>& fusion_checks() {
  static const std::vector<FusionCheck> kInfo = [] {
    std::vector<FusionCheck> out;
    for (const fusion::Check& c : fusion::checks()) out.push_back(c.info);
    return out;
  }();
  return kInfo;
}

}  // namespace ubfuse
