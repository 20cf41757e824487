#include "compiler/views.h"

namespace ubfuse {

void elide_view_kernels(CompiledModelImpl& m) {
  std::vector<std::unique_ptr<Kernel>> kept;
  for (auto& k : m.kernels) {
    const Value* out = k->outputs.size() == 1 ? k->outputs[0] : nullptr;
    const bool view = out && k->inputs.size() == 1 && k->info.node_names.size() == 1 &&
                      out->producer && out->producer->op == OpKind::Reshape &&
                      !m.graph.is_output(out);
    if (view) {
      m.view_of[out] = k->inputs[0];
    } else {
      kept.push_back(std::move(k));
    }
  }
  m.kernels = std::move(kept);
}

}  // namespace ubfuse
