#include "compiler/views.h"

#include "ir/views.h"

namespace ubfuse {

void elide_view_kernels(Executable& exe) {
  std::vector<std::unique_ptr<Kernel>> kept;
  for (auto& k : exe.kernels) {
    const Value* out = k->outputs.size() == 1 ? k->outputs[0] : nullptr;
    // inputs[0] is the data; a second input is the target shape (a value the plan holds).
    const bool view = out && !k->inputs.empty() && k->info.node_names.size() == 1 &&
                      out->producer && runs_as_view(exe.graph, *out->producer);
    if (view) {
      exe.view_of[out] = k->inputs[0];
    } else {
      kept.push_back(std::move(k));
    }
  }
  exe.kernels = std::move(kept);
}

}  // namespace ubfuse
