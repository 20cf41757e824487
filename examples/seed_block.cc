// The seed's block, silu(layer_norm(x + residual)), built with the C++ API and run in eager and
// graph mode. Built against the installed package by examples/consumer (a CTest test).
#include <ubfuse/ubfuse.h>

#include <cmath>
#include <cstdio>

int main() {
  using namespace ubfuse;
  const int64_t hidden = 256;
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", "seq", hidden});
  auto r = b.input("residual", f32, {"batch", "seq", hidden});
  auto w = b.constant(Tensor::random(f32, {hidden}, 1, 0.5, 1.5));
  auto bias = b.constant(Tensor::random(f32, {hidden}, 2));
  b.output("y", b.silu(b.layer_norm(b.add(x, r), w, bias, 1e-5)));
  Graph g = b.build();

  std::map<std::string, Tensor> in{{"x", Tensor::random(f32, {2, 64, hidden}, 3)},
                                   {"residual", Tensor::random(f32, {2, 64, hidden}, 4)}};
  auto eager = compile(g, {{"ge.exec.enableOperatorFusion", "0"}});
  auto graph = compile(g, {{"ge.exec.enableOperatorFusion", "1"}});
  Tensor ye = eager.run(in).at("y"), yg = graph.run(in).at("y");
  double diff = 0;
  for (int64_t i = 0; i < ye.numel(); i++) diff = std::fmax(diff, std::fabs(ye.get(i) - yg.get(i)));
  std::printf("eager: %zu kernels, graph: %zu kernel(s) (%s), max |eager - graph| = %g\n",
              eager.kernels().size(), graph.kernels().size(), graph.kernels()[0].name.c_str(),
              diff);
  return diff < 1e-4 ? 0 : 1;
}
