// The seed block silu(layer_norm(x + residual, w, b)) that several benchmarks time (batch and
// seq symbolic), and its inputs.
#pragma once

#include <map>
#include <string>

#include "ubfuse/ubfuse.h"

namespace ubfuse::bench {

inline Graph seed_block(DType t, int64_t hidden) {
  GraphBuilder b;
  auto x = b.input("x", t, {"batch", "seq", hidden});
  auto r = b.input("residual", t, {"batch", "seq", hidden});
  auto w = b.input("w", t, {hidden});
  auto bias = b.input("b", t, {hidden});
  auto sum = b.add(x, r);
  auto ln = b.layer_norm(sum, w, bias, 1e-5);
  b.output("y", b.silu(ln));
  return b.build();
}

// Random inputs for seed_block at sizes s (the last one is hidden).
inline std::map<std::string, Tensor> seed_inputs(DType t, const Sizes& s) {
  return {{"x", Tensor::random(t, s, 1)},
          {"residual", Tensor::random(t, s, 2)},
          {"w", Tensor::random(t, {s.back()}, 3, 0.5, 1.5)},
          {"b", Tensor::random(t, {s.back()}, 4)}};
}

}  // namespace ubfuse::bench
