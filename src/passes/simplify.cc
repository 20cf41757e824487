// simplify: constant folding, algebraic identities and no-op data movement, swept to a fixed
// point. Each sweep visits the graph in topological order, so a fold's users see the folded
// constant in the same sweep; dead nodes are dropped between sweeps. The rules are in
// simplify_rules.h.
#include "passes/pass.h"
#include "passes/simplify_rules.h"

namespace ubfuse {

namespace {

constexpr int kMaxSimplifySweeps = 64;  // a safety net: each sweep must shrink or rewrite the graph

class SimplifyPass : public Pass {
 public:
  std::string name() const override { return "simplify"; }
  bool run(Graph& g) override {
    bool changed = false;
    for (int sweep = 0; sweep < kMaxSimplifySweeps; sweep++) {
      bool any = false;
      for (Node* n : g.topo_order()) {
        any |= passes::fold_constant_node(g, n) || passes::simplify_identity(g, n) ||
               passes::simplify_data_movement(g, n);
      }
      g.remove_dead_nodes();
      changed |= any;
      if (!any) break;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_simplify_pass() { return std::make_unique<SimplifyPass>(); }

}  // namespace ubfuse
