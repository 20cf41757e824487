#include "ir/views.h"

namespace ubfuse {

bool runs_as_view(const Graph& g, const Node& n) {
  return n.op == OpKind::Reshape && n.outputs.size() == 1 && !g.is_output(n.out());
}

bool transpose_keeps_rows(const Node& n) {
  // A Transpose whose perm is a value operand ((x, perm)) has no attribute: not a row map.
  if (n.op != OpKind::Transpose || !n.has_attr("perm")) return false;
  const std::vector<int64_t> perm = n.attr_ints("perm");
  return perm.size() >= 2 && perm.back() == int64_t(perm.size()) - 1;
}

}  // namespace ubfuse
