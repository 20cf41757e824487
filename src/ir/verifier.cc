// Structural checks of a whole graph: every value read is produced (by a node or a graph input),
// arity and inferred types hold, names are unique, outputs exist. Throws ubfuse::Error.
#include <set>
#include <unordered_set>

#include "ubfuse/error.h"
#include "ubfuse/graph.h"

namespace ubfuse {

void verify(const Graph& g) {
  std::unordered_set<const Value*> available(g.inputs().begin(), g.inputs().end());
  std::set<std::string> names;
  for (Node* n : g.topo_order()) {
    if (!names.insert(n->name).second) throw Error("node name '" + n->name + "' is used twice");
    for (size_t i = 0; i < n->inputs.size(); i++) {
      if (!available.count(n->inputs[i])) {
        throw Error(n->describe() + ": input " + std::to_string(i) +
                    " is not produced by any node or graph input");
      }
    }
    // Re-infer and compare: a pass that rewrote a node must keep its output type.
    Node copy;
    copy.id = n->id;  // run-time dims are named after it
    copy.op = n->op;
    copy.name = n->name;
    copy.inputs = n->inputs;
    copy.attrs = n->attrs;
    copy.payload = n->payload;
    copy.host = n->host;
    copy.branches = n->branches;
    std::vector<Value> outs(n->outputs.size());
    for (auto& o : outs) copy.outputs.push_back(&o);
    infer_node(copy);
    for (size_t i = 0; i < n->outputs.size(); i++) {
      if (outs[i].dtype != n->outputs[i]->dtype || outs[i].shape != n->outputs[i]->shape) {
        throw Error(n->describe() + ": output type " + shape_str(n->outputs[i]->shape) + " " +
                    std::string(dtype_name(n->outputs[i]->dtype)) + " differs from inferred " +
                    shape_str(outs[i].shape) + " " + std::string(dtype_name(outs[i].dtype)));
      }
      available.insert(n->outputs[i]);
    }
  }
  if (g.outputs().empty()) throw Error("graph has no outputs; hint: call output(name, value)");
  for (auto& [name, v] : g.outputs()) {
    if (!available.count(v)) throw Error("graph output '" + name + "' is not produced");
  }
}

}  // namespace ubfuse
