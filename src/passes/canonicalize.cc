// canonicalize: recovers the ops that fusion and the kernels know (Silu, Gelu, LayerNorm,
// RMSNorm, Softmax, RotateHalf in its halves, pairs and partial forms) from the decomposed
// arithmetic that exporters write, so that an imported model fuses like one built with the native
// ops.
//
// Each sweep visits the nodes in topological order and offers each one to every pattern family
// (canonicalize.h); nodes a rewrite made dead are skipped for the rest of the sweep, and the
// reader table is rebuilt after each rewrite. Sweeps repeat until nothing matches, since one
// rewrite can expose another (a Silu over a recovered LayerNorm). Dead nodes are dropped
// between sweeps.
#include "passes/canonicalize.h"

#include <unordered_set>

#include "passes/pass.h"

namespace ubfuse {

namespace {

constexpr int kMaxCanonicalizeSweeps = 16;

class CanonicalizePass : public Pass {
 public:
  std::string name() const override { return "canonicalize"; }
  bool run(Graph& g) override {
    using Matcher = std::vector<Node*> (*)(Graph&, Node*, const passes::UseInfo&);
    static constexpr Matcher kMatchers[] = {
        passes::match_softmax,     passes::match_norm,         passes::match_activation,
        passes::match_rotate_half, passes::match_rotate_pairs, passes::match_partial_rotary};
    bool changed = false;
    for (int sweep = 0; sweep < kMaxCanonicalizeSweeps; sweep++) {
      passes::UseInfo uses(g);
      std::unordered_set<const Node*> dead;
      bool any = false;
      for (Node* n : g.topo_order()) {
        if (dead.count(n)) continue;
        for (Matcher m : kMatchers) {
          std::vector<Node*> gone = m(g, n, uses);
          if (gone.empty()) continue;
          dead.insert(gone.begin(), gone.end());
          uses.rebuild(g);
          any = true;
          break;
        }
      }
      g.remove_dead_nodes();
      changed |= any;
      if (!any) break;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_canonicalize_pass() { return std::make_unique<CanonicalizePass>(); }

}  // namespace ubfuse
