// The bookkeeping passes: verify, re-infer every node's type, dead-code elimination.
#include "passes/pass.h"

namespace ubfuse {

namespace {

class VerifyPass : public Pass {
 public:
  std::string name() const override { return "verify"; }
  bool run(Graph& g) override {
    verify(g);
    return false;
  }
};

class InferShapesPass : public Pass {
 public:
  std::string name() const override { return "infer_shapes"; }
  bool run(Graph& g) override {
    bool changed = false;
    for (Node* n : g.topo_order()) {
      std::vector<std::pair<DType, Shape>> before;
      for (auto* o : n->outputs) before.emplace_back(o->dtype, o->shape);
      infer_node(*n);
      for (size_t i = 0; i < n->outputs.size(); i++) {
        changed |= before[i] != std::make_pair(n->outputs[i]->dtype, n->outputs[i]->shape);
      }
    }
    return changed;
  }
};

class DcePass : public Pass {
 public:
  std::string name() const override { return "dce"; }
  bool run(Graph& g) override { return g.remove_dead_nodes() > 0; }
};

}  // namespace

std::unique_ptr<Pass> make_verify_pass() { return std::make_unique<VerifyPass>(); }
std::unique_ptr<Pass> make_infer_shapes_pass() { return std::make_unique<InferShapesPass>(); }
std::unique_ptr<Pass> make_dce_pass() { return std::make_unique<DcePass>(); }

}  // namespace ubfuse
