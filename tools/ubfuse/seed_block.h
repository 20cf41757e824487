// The seed's block, silu(layer_norm(x + residual)), as a graph, with its random inputs.
#pragma once

#include <map>
#include <string>

#include "ubfuse/ubfuse.h"

namespace ubfuse::cli {

struct SeedBlockOptions {
  Sizes shape = {2, 2048, 4096};
  DType dtype = DType::f32;
  bool print_mid = false;  // a Host print between LayerNorm and Silu
  bool symbolic = false;   // batch and seq as symbols
};

Graph seed_block(const SeedBlockOptions& o);
std::map<std::string, Tensor> seed_inputs(const SeedBlockOptions& o, uint64_t seed = 42);

}  // namespace ubfuse::cli
