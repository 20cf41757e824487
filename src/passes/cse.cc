// cse (graph mode): of nodes with the same op, attributes and input values, every later one's
// reads go to the first. Importers lower each ONNX node on its own, so what several nodes derive
// from one input (each Attention node of a BERT its mask from mask_index, with its own scalar
// constants) is built once per node; merged, it runs once. It runs after the pattern passes
// (canonicalize, quant_matmul), whose chains must keep their intermediates to themselves: two
// projections' identical scale products, merged first, would be one value neither chain owns.
#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "passes/pass.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

// Constants merge when they hold the same few values (the scalars each lowering makes for
// itself); larger ones (weights) are not compared.
constexpr int64_t kMaxMergedConstant = 64;

bool same_constant(const Node* a, const Node* b) {
  const Tensor &x = a->payload, &y = b->payload;
  return x.dtype() == y.dtype() && x.sizes() == y.sizes() &&
         std::memcmp(x.data(), y.data(), x.nbytes()) == 0;
}

// Every op merges but a Host callback (a side effect per node) and an If (its branches are
// graphs); a Constant only when small.
bool mergeable(const Node* n) {
  if (n->op == OpKind::Constant) return n->payload.numel() <= kMaxMergedConstant;
  return n->op != OpKind::Host && n->op != OpKind::If && !n->payload.defined() &&
         n->branches.empty();
}

class CsePass : public Pass {
 public:
  std::string name() const override { return "cse"; }
  bool run(Graph& g) override {
    std::map<std::pair<OpKind, std::vector<Value*>>, std::vector<Node*>> seen;
    bool changed = false;
    // In topological order a merged node's readers come later and are then compared with their
    // inputs already redirected: chains of duplicates merge in one sweep.
    for (Node* n : g.topo_order()) {
      if (!mergeable(n)) continue;
      std::vector<Node*>& same = seen[{n->op, n->inputs}];
      const auto it = std::find_if(same.begin(), same.end(), [&](const Node* m) {
        return m->attrs == n->attrs && m->outputs.size() == n->outputs.size() &&
               (n->op != OpKind::Constant || same_constant(m, n));
      });
      // A graph output keeps its own value.
      const bool output = std::any_of(n->outputs.begin(), n->outputs.end(),
                                      [&](const Value* o) { return g.is_output(o); });
      if (it == same.end() || output) {
        same.push_back(n);
        continue;
      }
      const Node* first = *it;
      for (size_t i = 0; i < n->outputs.size(); i++) {
        UBF_CHECK(n->outputs[i]->dtype == first->outputs[i]->dtype &&
                      n->outputs[i]->shape == first->outputs[i]->shape,
                  "cse: '" + first->name + "' and '" + n->name + "' infer different types");
        g.replace_uses(n->outputs[i], first->outputs[i]);
      }
      changed = true;
    }
    if (changed) g.remove_dead_nodes();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse_pass() { return std::make_unique<CsePass>(); }

}  // namespace ubfuse
