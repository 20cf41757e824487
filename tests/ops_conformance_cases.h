// The op conformance cases of ops_conformance_test.cc: each builds a small graph around an op.
// op_spec_test.cc checks that every op of ops.def appears in one.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ubfuse/ubfuse.h"

namespace ubfuse::testing {

struct OpCase {
  std::string name;
  // Builds the op on inputs of dtype t; returns output. Inputs are declared inside.
  std::function<GraphBuilder::V(GraphBuilder&, DType, const Sizes&)> build;
  double lo = -2, hi = 2;  // input range
  bool float_only = true;
};

std::vector<OpCase> op_conformance_cases();

}  // namespace ubfuse::testing
