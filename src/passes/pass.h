// One pass interface (after XLA's HloPassInterface): a name and run(graph) -> changed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ubfuse/decision.h"
#include "ubfuse/graph.h"

namespace ubfuse {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // Rewrites g in place; returns whether anything changed.
  virtual bool run(Graph& g) = 0;
};

std::unique_ptr<Pass> make_verify_pass();
std::unique_ptr<Pass> make_infer_shapes_pass();
std::unique_ptr<Pass> make_dce_pass();
// Constant folding, algebraic identities, no-op casts/reshapes/transposes (simplify.cc).
std::unique_ptr<Pass> make_simplify_pass();
// Recovers Silu, Gelu, LayerNorm, RMSNorm and Softmax from decomposed forms (canonicalize.cc).
std::unique_ptr<Pass> make_canonicalize_pass();
// Graph mode: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scales) as DynamicQuantMatMul,
// each chain taken or left reported in `notes` (quant_matmul.cc).
std::unique_ptr<Pass> make_quant_matmul_pass(std::vector<FusionDecision>* notes);
// Graph mode, after the pattern passes: nodes computing the same thing merged (cse.cc).
std::unique_ptr<Pass> make_cse_pass();

}  // namespace ubfuse
