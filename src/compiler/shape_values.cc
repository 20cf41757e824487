#include "compiler/shape_values.h"

#include "ir/values.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

// A value input is keyed by its bytes (plan cache), so it must be a shape's worth of numbers.
constexpr int64_t kMaxValueInputElems = 4096;

}  // namespace

ShapeValues find_shape_values(const Graph& g) {
  ShapeValues sv;
  std::unordered_set<const Value*> inputs;
  std::vector<std::pair<const Value*, const Node*>> work;  // (value, the node that reads it)
  for (Node* n : g.topo_order()) {
    for (int i = 0; i < int(n->inputs.size()); i++) {
      if (is_value_operand(*n, i)) work.push_back({n->inputs[size_t(i)], n});
    }
  }
  while (!work.empty()) {
    auto [v, reader] = work.back();
    work.pop_back();
    const Node* p = v->producer;
    if (!p) {
      if (!inputs.insert(v).second) continue;
      bool small = is_static(v->shape) && numel(static_sizes(v->shape)) <= kMaxValueInputElems;
      if (is_static(v->shape) && !small) {
        throw Error("input '" + v->name + "' " + shape_str(v->shape) + " sets a shape through " +
                    reader->describe() + ", but a value that sets a shape may have at most " +
                    std::to_string(kMaxValueInputElems) +
                    " elements; hint: a shape computed from large data (NonZero-like) is not "
                    "supported");
      }
      continue;
    }
    if (p->op == OpKind::Constant || !sv.set.insert(p).second) continue;
    if (p->op == OpKind::Host) {
      throw Error(p->describe() + " computes '" + v->name + "', which sets a shape through " +
                  reader->describe() +
                  "; a user callback cannot run while a plan is built; hint: move the callback "
                  "off the shape computation");
    }
    if (p->op == OpKind::Shape) continue;  // reads only its input's sizes
    for (const Value* in : p->inputs) work.push_back({in, p});
  }
  for (Node* n : g.topo_order()) {
    if (sv.set.count(n)) sv.nodes.push_back(n);
  }
  for (const Value* in : g.inputs()) {
    if (inputs.count(in)) sv.value_inputs.push_back(in);
  }
  return sv;
}

}  // namespace ubfuse
