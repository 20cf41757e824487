// Control flow: If. Both branches are imported as graphs of their own (values of the enclosing
// graph they read become their inputs) and held by one If node, whose condition is read when the
// plan for a run is built (compiler/if_kernel.h runs the taken branch).
#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

void convert_if(NodeCtx& c) {
  if (c.dtype(0) != DType::boolean) {
    c.invalid("the condition must be bool, got " + std::string(dtype_name(c.dtype(0))));
  }
  const onnx::GraphProto* then_g = c.attr_graph("then_branch");
  const onnx::GraphProto* else_g = c.attr_graph("else_branch");
  if (!then_g || !else_g) c.invalid("needs attributes then_branch and else_branch");
  std::vector<std::string> then_caps, else_caps;
  auto then_graph = import_branch(c.state(), *then_g, c.where() + " then_branch", then_caps);
  auto else_graph = import_branch(c.state(), *else_g, c.where() + " else_branch", else_caps);
  for (auto* g : {then_graph.get(), else_graph.get()}) {
    if (int(g->outputs().size()) != c.num_outputs()) {
      c.invalid("has " + std::to_string(c.num_outputs()) + " outputs but a branch has " +
                std::to_string(g->outputs().size()));
    }
  }
  // Inputs: the condition, then every captured value once, in order of first use.
  std::vector<Value*> ins{c.value(0)};
  std::map<std::string, int64_t> index;
  auto map_of = [&](const std::vector<std::string>& caps) {
    std::vector<int64_t> m;
    for (const std::string& name : caps) {
      auto [it, fresh] = index.emplace(name, int64_t(ins.size()));
      if (fresh) ins.push_back(c.value_by_name(name));
      m.push_back(it->second);
    }
    return m;
  };
  Attrs attrs{{"then_inputs", map_of(then_caps)}, {"else_inputs", map_of(else_caps)}};
  Graph& g = c.state().graph;
  std::string name = g.node_by_name(c.name()) ? g.unique_name(c.name() + "/if") : c.name();
  Node* n = g.add_node(OpKind::If, ins, attrs, name, c.num_outputs());
  n->branches = {then_graph, else_graph};
  try {
    infer_node(*n);
  } catch (...) {
    g.remove_node(n);
    throw;
  }
  for (int k = 0; k < c.num_outputs(); k++) {
    if (c.output_used(k)) c.set_output(k, n->outputs[size_t(k)]);
  }
}

}  // namespace

void add_control_ops(ConverterMap& m) { m["If"] = convert_if; }

}  // namespace ubfuse::onnx_import
