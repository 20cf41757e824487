// Helpers for fused-kernel tests: a whole graph as one FusedGroup, built by hand (so kernels are
// tested apart from the partitioner), and running a Kernel outside the executor.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpp_render.h"
#include "codegen/group_kernels.h"
#include "fusion/group.h"
#include "kernels/reference/reference.h"
#include "runtime/kernel.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse::testing {

// Every non-Constant node of g as one group: inputs are graph inputs and constants, outputs the
// graph outputs; the domain is the widest node domain.
inline FusedGroup whole_graph_group(const Graph& g) {
  FusedGroup fg;
  std::set<const Value*> produced, seen;
  bool row = false, mm = false;
  int64_t best_numel = -1;
  for (Node* n : g.topo_order()) {
    if (n->op == OpKind::Constant) continue;
    fg.nodes.push_back(n);
    for (auto* v : n->outputs) produced.insert(v);
    bool r = fusion_class(n->op) == FusionClass::RowReduction;
    row = row || r;
    mm = mm || n->op == OpKind::MatMul;
    const Shape& s = r ? n->inputs[0]->shape : n->out()->shape;
    int64_t ne = 1;
    for (auto& d : s) ne *= d.is_static() ? d.value() : 1000;
    if (s.size() > fg.domain.size() || (s.size() == fg.domain.size() && ne > best_numel)) {
      fg.domain = s;
      best_numel = ne;
    }
  }
  for (const Node* n : fg.nodes) {
    for (auto* v : n->inputs) {
      if (!produced.count(v) && seen.insert(v).second) fg.inputs.push_back(v);
    }
  }
  for (auto& [name, v] : g.outputs()) {
    if (std::find(fg.outputs.begin(), fg.outputs.end(), v) == fg.outputs.end()) {
      fg.outputs.push_back(v);
    }
  }
  fg.kind = mm ? GroupKind::MatMulEpilogue : row ? GroupKind::RowReduction : GroupKind::Elementwise;
  fg.name = "Fused";
  for (auto* n : fg.nodes) fg.name += op_name(n->op);
  return fg;
}

// Runs kernel k of graph g on named inputs, with one UB of ub_bytes per worker; returns the
// group outputs by graph output name (sizes from the reference).
inline std::map<std::string, Tensor> run_kernel(const Kernel& k, const Graph& g,
                                                const std::map<std::string, Tensor>& inputs,
                                                const std::map<std::string, ref::RefTensor>& want,
                                                int64_t ub_bytes, ExecContext* ctx_out = nullptr) {
  ExecContext ctx;
  ctx.pool = &ThreadPool::global();
  ctx.ub_bytes = ub_bytes;
  std::vector<Tensor> ubs;
  for (int i = 0; i < ctx.pool->size(); i++) {
    ubs.push_back(Tensor::zeros(DType::f32, {std::max<int64_t>(ub_bytes / 4, 1)}));
    ctx.ub.push_back(ubs.back().data_as<float>());
  }
  std::vector<Tensor> in, out;
  for (const Value* v : k.inputs) {
    if (v->producer && v->producer->op == OpKind::Constant) {
      in.push_back(v->producer->payload);
    } else {
      in.push_back(inputs.at(v->name));
    }
  }
  std::map<std::string, Tensor> named;
  for (const Value* v : k.outputs) {
    std::string name;
    for (auto& [n, gv] : g.outputs()) {
      if (gv == v && name.empty()) name = n;
    }
    out.push_back(Tensor(v->dtype, want.at(name).sizes));
    named[name] = out.back();
  }
  k.run(in, out, ctx);
  if (ctx_out) *ctx_out = ctx;
  return named;
}

// The C++ that the generated-code engine renders for g as one group (its UB and re-read
// schedules), or why lowering failed.
inline std::string generated_code(const Graph& g) {
  FusedGroup fg = whole_graph_group(g);
  std::string why;
  auto p = kir::lower_group(fg, &why);
  if (!p) return "lowering failed: " + why;
  return cpp::render_kernel(*p, kir::schedule(*p, true), kir::schedule(*p, false)).code;
}

}  // namespace ubfuse::testing
