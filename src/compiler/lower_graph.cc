#include "compiler/lower_graph.h"

#include "codegen/group_kernels.h"
#include "fusion/partition.h"
#include "fusion/rules.h"

namespace ubfuse {

std::vector<std::unique_ptr<Kernel>> build_fused_kernels(
    const Graph& g, const CompileConfig& c, std::vector<FusionDecision>* decisions,
    const std::function<bool(const Node&)>& planned, const OwnKernelFn& own) {
  static const FusionRules kDefaults;
  FusionConfig fc = fusion_config(c);
  fc.planned = planned;
  Partition part = partition_graph(g, fc, c.rules ? *c.rules : kDefaults);
  if (decisions) decisions->insert(decisions->end(), part.decisions.begin(), part.decisions.end());
  CodegenConfig cg = codegen_config(c);
  cg.own_kernel = own;
  return make_group_kernels(part.groups, cg);
}

}  // namespace ubfuse
