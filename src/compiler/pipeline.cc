#include "compiler/pipeline.h"

#include "ubfuse/error.h"

namespace ubfuse {

std::vector<std::unique_ptr<Pass>> make_pipeline(const CompileConfig& config) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_verify_pass());
  p.push_back(make_infer_shapes_pass());
  p.push_back(make_dce_pass());
  (void)config;
  p.push_back(make_verify_pass());
  return p;
}

void prepare_plans(CompiledModelImpl& impl) {
  bool all_static = true;
  for (auto* in : impl.graph.inputs()) all_static &= is_static(in->shape);
  if (all_static) {
    auto plan = impl.build_plan({});
    int64_t total = plan->arena_bytes;
    for (auto& [name, v] : impl.graph.outputs()) {
      total += numel(plan->sizes.at(v)) * int64_t(dtype_size(v->dtype));
    }
    if (impl.config.memory_limit > 0 && total > impl.config.memory_limit) {
      throw Error("planned memory " + std::to_string(total) + " bytes (intermediates " +
                  std::to_string(plan->arena_bytes) + " + outputs) exceeds memory_limit " +
                  std::to_string(impl.config.memory_limit) +
                  " bytes; hint: raise memory_limit or use smaller shapes");
    }
  }
}

}  // namespace ubfuse
