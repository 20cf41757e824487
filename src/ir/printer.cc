// Text form, one node per line:
//   %ln0 = LayerNorm(%add0, %w, %b) {eps=1e-05} : f32[batch,2048,4096]
#include <sstream>

#include "ubfuse/graph.h"

namespace ubfuse {

namespace {
std::string attr_str(const AttrValue& a) {
  std::ostringstream os;
  if (auto* i = std::get_if<int64_t>(&a)) {
    os << *i;
  } else if (auto* d = std::get_if<double>(&a)) {
    os << *d;
  } else if (auto* s = std::get_if<std::string>(&a)) {
    os << '"' << *s << '"';
  } else if (auto* v = std::get_if<std::vector<int64_t>>(&a)) {
    os << sizes_str(*v);
  } else if (auto* vs = std::get_if<std::vector<std::string>>(&a)) {
    os << "[";
    for (size_t i = 0; i < vs->size(); i++) os << (i ? "," : "") << (*vs)[i];
    os << "]";
  }
  return os.str();
}

std::string type_str(const Value* v) {
  return std::string(dtype_name(v->dtype)) + shape_str(v->shape);
}
}  // namespace

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < g.inputs().size(); i++) {
    os << (i ? ", " : "") << "%" << g.inputs()[i]->name << ": " << type_str(g.inputs()[i]);
  }
  os << ") {\n";
  for (Node* n : g.topo_order()) {
    os << "  ";
    for (size_t i = 0; i < n->outputs.size(); i++)
      os << (i ? ", " : "") << "%" << n->outputs[i]->name;
    os << " = " << op_name(n->op) << "(";
    for (size_t i = 0; i < n->inputs.size(); i++)
      os << (i ? ", " : "") << "%" << n->inputs[i]->name;
    os << ")";
    if (n->op == OpKind::Constant && n->payload.numel() <= 4) {
      os << " {value=" << n->payload.str(4) << "}";
    } else if (!n->attrs.empty()) {
      os << " {";
      bool first = true;
      for (auto& [k, v] : n->attrs) {
        os << (first ? "" : ", ") << k << "=" << attr_str(v);
        first = false;
      }
      os << "}";
    }
    os << " : ";
    for (size_t i = 0; i < n->outputs.size(); i++) os << (i ? ", " : "") << type_str(n->outputs[i]);
    os << "\n";
  }
  os << "  return ";
  for (size_t i = 0; i < g.outputs().size(); i++) {
    os << (i ? ", " : "") << g.outputs()[i].first << "=%" << g.outputs()[i].second->name;
  }
  os << "\n}\n";
  return os.str();
}

}  // namespace ubfuse
