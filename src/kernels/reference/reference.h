// The test oracle: obvious, slow kernels in double precision. Inputs of any dtype are widened to
// double; results are rounded to the output dtype only by the caller's comparison.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse::ref {

struct RefTensor {
  Sizes sizes;
  std::vector<double> data;
  DType dtype = DType::f32;  // the dtype the graph gives this value
};

RefTensor from_tensor(const Tensor& t);
// Evaluates one node on double inputs.
std::vector<RefTensor> eval_node(const Node& n, const std::vector<RefTensor>& inputs);
// Evaluates the whole graph (symbols bound from the inputs' sizes); returns named outputs.
std::map<std::string, RefTensor> run_graph(const Graph& g, const std::map<std::string, Tensor>& inputs);

// Tolerances used when comparing a dtype's result with the double reference.
double tolerance(DType t);
// Max |a - b| over elements; throws if sizes differ.
double max_abs_diff(const Tensor& got, const RefTensor& want);

}  // namespace ubfuse::ref
