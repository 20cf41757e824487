#include "compiler/views.h"

#include "runtime/compiled_model_impl.h"

namespace ubfuse {

bool runs_as_view(const Graph& g, const Node& n) {
  return n.op == OpKind::Reshape && n.outputs.size() == 1 && !g.is_output(n.out());
}

bool transpose_keeps_rows(const Node& n) {
  if (n.op != OpKind::Transpose || !n.has_attr("perm")) return false;
  const std::vector<int64_t> perm = n.attr_ints("perm");
  return perm.size() >= 2 && perm.back() == int64_t(perm.size()) - 1;
}

void elide_view_kernels(CompiledModelImpl& m) {
  std::vector<std::unique_ptr<Kernel>> kept;
  for (auto& k : m.kernels) {
    const Value* out = k->outputs.size() == 1 ? k->outputs[0] : nullptr;
    const bool view = out && k->inputs.size() == 1 && k->info.node_names.size() == 1 &&
                      out->producer && runs_as_view(m.graph, *out->producer);
    if (view) {
      m.view_of[out] = k->inputs[0];
    } else {
      kept.push_back(std::move(k));
    }
  }
  m.kernels = std::move(kept);
}

}  // namespace ubfuse
