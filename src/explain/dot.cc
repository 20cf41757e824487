// Graphviz pictures of an explain report. before: the eager model, one node per op. after: the
// graph-mode model, each fused kernel a cluster named after it; edges inside a kernel stay in the
// unified buffer (dashed, no bytes), edges between kernels carry their bytes and, where fusion was
// refused, the reason in red (the message is the tooltip in the SVG).
#include <fmt/format.h>

#include <map>

#include "explain/traffic.h"
#include "profiler/summary.h"

namespace ubfuse {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

std::string nid(const Node* n) { return fmt::format("n{}", n->id); }

std::string bytes_of(const Value* v, const Plan& plan) {
  return prof::format_bytes(double(explain_detail::value_bytes(v, plan)));
}

std::string typed(const Value* v, const Plan& plan) {
  const Sizes* s = plan.find_sizes(v);
  return std::string(dtype_name(v->dtype)) + (s ? sizes_str(*s) : shape_str(v->shape));
}

std::string render(const ExplainReport& r, bool after) {
  const CompiledModel& m = after ? r.graph : r.eager;
  const Executor& ex = m.executor();
  const Executable& exe = ex.executable();
  const Graph& g = exe.graph;
  auto plan = ex.build_plan(r.dims);
  std::map<const Node*, size_t> kernel_of;
  for (size_t k = 0; k < exe.kernels.size(); k++) {
    for (auto& name : exe.kernels[k]->info.node_names) {
      if (const Node* n = g.node_by_name(name)) kernel_of[n] = k;
    }
  }
  std::map<std::pair<std::string, std::string>, const FusionDecision*> decision;
  for (auto& d : exe.decisions) decision[{d.producer, d.consumer}] = &d;

  const auto& ks = after ? r.graph_kernels : r.eager_kernels;
  int64_t bytes = after ? r.graph_bytes : r.eager_bytes;
  std::string title =
      after ? fmt::format("graph mode: {} kernel(s), {} per run (speedup bound {:.2f}x)", ks.size(),
                          prof::format_bytes(double(bytes)), r.speedup_bound)
            : fmt::format("eager: {} kernel(s), {} per run", ks.size(),
                          prof::format_bytes(double(bytes)));
  std::string o = fmt::format("digraph {} {{\n", after ? "after" : "before");
  o += fmt::format("  graph [label=\"{}\", labelloc=t, fontname=Helvetica, fontsize=12];\n",
                   esc(title));
  o += "  node [fontname=Helvetica, fontsize=10, shape=box, style=\"rounded,filled\", "
       "fillcolor=\"#dbe9f6\"];\n";
  o += "  edge [fontname=Helvetica, fontsize=9];\n";

  for (auto* v : g.inputs()) {
    o += fmt::format("  in{} [shape=ellipse, fillcolor=white, label=\"{}\\n{}\"];\n", v->id,
                     esc(v->name), esc(typed(v, *plan)));
  }
  // A Reshape that runs as a view (compiler/views.h): no kernel, no bytes.
  auto is_view = [&](const Node* n) { return !n->outputs.empty() && exe.view_of.count(n->out()); };
  auto op_node = [&](const Node* n) {
    const char* fill = n->op == OpKind::Host ? "#ffe0b2" : "#dbe9f6";
    if (is_view(n)) {
      return fmt::format(
          "n{} [label=\"{}\\n{} (view)\", style=\"rounded,dashed\", fillcolor=white];", n->id,
          esc(n->name), op_name(n->op));
    }
    return fmt::format("n{} [label=\"{}\\n{}\", fillcolor=\"{}\"];", n->id, esc(n->name),
                       op_name(n->op), fill);
  };
  std::vector<const Node*> ops;
  for (const Node* n : g.topo_order()) {
    if (n->op == OpKind::Constant) {
      o += fmt::format(
          "  {} [shape=note, style=filled, fillcolor=\"#f2f2f2\", label=\"{}\\n{}\"];\n", nid(n),
          esc(n->name), esc(typed(n->out(), *plan)));
    } else {
      ops.push_back(n);
    }
  }
  if (after) {
    // Kernels of several ops as clusters; single-op kernels stay plain nodes.
    for (size_t k = 0; k < exe.kernels.size(); k++) {
      const KernelInfo& info = exe.kernels[k]->info;
      if (info.node_names.size() < 2) continue;
      o += fmt::format(
          "  subgraph cluster_k{} {{\n    label=\"{}\"; style=\"rounded,filled\"; "
          "color=\"#2e7d32\"; fillcolor=\"#e8f5e9\"; fontname=Helvetica;\n",
          k, esc(info.name + (info.variant.empty() ? "" : " [" + info.variant + "]")));
      for (const Node* n : ops) {
        auto it = kernel_of.find(n);
        if (it != kernel_of.end() && it->second == k) o += "    " + op_node(n) + "\n";
      }
      o += "  }\n";
    }
  }
  for (const Node* n : ops) {
    auto it = kernel_of.find(n);
    bool clustered =
        after && it != kernel_of.end() && exe.kernels[it->second]->info.node_names.size() >= 2;
    if (!clustered) o += "  " + op_node(n) + "\n";
  }

  auto source = [&](const Value* v) {
    return v->producer ? nid(v->producer) : fmt::format("in{}", v->id);
  };
  for (const Node* c : ops) {
    for (const Value* v : c->inputs) {
      const Node* p = v->producer;
      bool internal = after && p && p->op != OpKind::Constant && kernel_of.count(p) &&
                      kernel_of.count(c) && kernel_of[p] == kernel_of[c];
      if (is_view(c)) {  // the view reads nothing: it renames v's bytes
        o += fmt::format(
            "  {} -> {} [style=dashed, color=gray50, fontcolor=gray40, label=\"view\"];\n",
            source(v), nid(c));
        continue;
      }
      if (internal) {
        o += fmt::format(
            "  {} -> {} [style=dashed, color=gray50, fontcolor=gray40, label=\"UB\"];\n", source(v),
            nid(c));
        continue;
      }
      std::string label = bytes_of(v, *plan);
      std::string attrs;
      if (after && p) {
        auto d = decision.find({p->name, c->name});
        if (d != decision.end() && d->second->reason != FusionReason::Fused) {
          label += fmt::format("\n{}", fusion_reason_name(d->second->reason));
          attrs = fmt::format(", color=red, fontcolor=red, penwidth=1.5, tooltip=\"{}\"",
                              esc(d->second->message));
        }
      }
      o += fmt::format("  {} -> {} [label=\"{}\"{}];\n", source(v), nid(c), esc(label), attrs);
    }
  }
  for (auto& [name, v] : g.outputs()) {
    o +=
        fmt::format("  out_{} [shape=ellipse, fillcolor=white, label=\"{}\"];\n", v->id, esc(name));
    o += fmt::format("  {} -> out_{} [label=\"{}\"];\n", source(v), v->id, esc(bytes_of(v, *plan)));
  }
  o += "}\n";
  return o;
}

}  // namespace

std::string before_dot(const ExplainReport& r) { return render(r, false); }
std::string after_dot(const ExplainReport& r) { return render(r, true); }

}  // namespace ubfuse
