// Which nodes compute shape values (plan/plan.h): the values that value operands read (a
// Reshape's target, Slice bounds, a Range's limit, an If's condition), and everything those
// values are computed from, back to constants, sizes (a Shape node reads no data) and graph
// inputs, whose contents then join the plan's key (value inputs). These nodes run while a plan is
// built, not as kernels.
#pragma once

#include <unordered_set>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse {

struct ShapeValues {
  std::vector<const Node*> nodes;  // in graph order
  std::unordered_set<const Node*> set;
  std::vector<const Value*> value_inputs;  // graph inputs in the graph's order
};

// Throws Error naming the node and the value when a shape would depend on a value no plan can
// know: the data of a large graph input.
ShapeValues find_shape_values(const Graph& g);

}  // namespace ubfuse
