// One pass interface (after XLA's HloPassInterface): a name and run(graph) -> changed.
#pragma once

#include <memory>
#include <string>

#include "compiler/options.h"
#include "ubfuse/graph.h"

namespace ubfuse {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // Rewrites g in place; returns whether anything changed.
  virtual bool run(Graph& g, const CompileConfig& config) = 0;
};

std::unique_ptr<Pass> make_verify_pass();
std::unique_ptr<Pass> make_infer_shapes_pass();
std::unique_ptr<Pass> make_dce_pass();

}  // namespace ubfuse
