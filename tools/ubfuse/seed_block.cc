#include "seed_block.h"

#include <cstdio>

namespace ubfuse::cli {

Graph seed_block(const SeedBlockOptions& o) {
  GraphBuilder b;
  Shape s = to_shape(o.shape);
  if (o.symbolic && s.size() == 3) {
    s[0] = Dim("batch");
    s[1] = Dim("seq");
  }
  const int64_t h = o.shape.back();
  auto x = b.input("x", o.dtype, s);
  auto r = b.input("residual", o.dtype, s);
  auto w = b.constant(Tensor::random(o.dtype, {h}, 7, 0.5, 1.5), "ln_weight");
  auto bias = b.constant(Tensor::random(o.dtype, {h}, 8, -0.1, 0.1), "ln_bias");
  auto sum = b.add(x, r);
  b.name_last("add");
  auto ln = b.layer_norm(sum, w, bias, 1e-5);
  b.name_last("layer_norm");
  if (o.print_mid) {
    ln = b.host(
        ln,
        [](Tensor& t) { std::fprintf(stderr, "[print] layer_norm output %s\n", t.str(4).c_str()); },
        "print");
  }
  auto y = b.silu(ln);
  b.name_last("silu");
  b.output("y", y);
  return b.build();
}

std::map<std::string, Tensor> seed_inputs(const SeedBlockOptions& o, uint64_t seed) {
  return {{"x", Tensor::random(o.dtype, o.shape, seed)},
          {"residual", Tensor::random(o.dtype, o.shape, seed + 1)}};
}

}  // namespace ubfuse::cli
