// The rewrite passes never change what a graph computes: seeded random graphs made of the
// decomposed patterns, scalar identities and reshapes, randomly perturbed (a pattern constant
// nudged, an intermediate also made a graph output, a second consumer), must give the double
// reference's numbers of the original after simplify + canonicalize, whether or not a pattern
// still matches. Special values (NaN, Inf, 0) are mixed into the inputs.
#include <cmath>
#include <random>

#include "passes_test_util.h"

namespace ubfuse {
namespace {

using testing::optimized;
using testing::same_as_original;
using V = GraphBuilder::V;

class RandomPatternGraph {
 public:
  explicit RandomPatternGraph(uint64_t seed) : rng_(seed) {}

  Graph build() {
    DType t = coin(0.3) ? bf16 : f32;
    x_ = b_.input("x", t, {3, 16});
    w_ = b_.input("w", t, {16});
    V v = x_;
    int steps = 1 + int(rng_() % 4);
    for (int i = 0; i < steps; i++) v = step(v);
    b_.output("y", v);
    perturb();
    return b_.build();
  }

 private:
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  V step(V v) {
    switch (rng_() % 10) {
      case 0:
        return b_.mul(v, b_.sigmoid(v));
      case 1:  // gelu, erf form
        return b_.mul(b_.mul(v, 0.5), b_.add(b_.erf(b_.div(v, std::sqrt(2.0))), 1.0));
      case 2: {  // gelu, tanh form
        V inner = b_.mul(b_.add(v, b_.mul(b_.pow(v, 3.0), 0.044715)), std::sqrt(2 / M_PI));
        return b_.mul(b_.mul(v, 0.5), b_.add(b_.tanh(inner), 1.0));
      }
      case 3: {  // layer norm
        V d = b_.sub(v, b_.reduce_mean(v));
        return b_.mul(b_.div(d, b_.sqrt(b_.add(b_.reduce_mean(b_.pow(d, 2)), 1e-5))), w_);
      }
      case 4:  // rms norm
        return b_.mul(w_, b_.mul(v, b_.rsqrt(b_.add(b_.reduce_mean(b_.mul(v, v)), 1e-6))));
      case 5: {  // softmax
        V e = b_.exp(b_.sub(v, b_.reduce_max(v)));
        return b_.div(e, b_.reduce_sum(e));
      }
      case 6:
        return b_.sub(b_.add(b_.mul(v, 1.0), 0.0), 0.0);
      case 7:
        return b_.reshape(b_.reshape(v, {-1}), {3, 16});
      case 8:  // rotate_half as exported (the slice ends as PyTorch writes them)
        return b_.concat({b_.neg(b_.slice(v, {8}, {INT64_MAX}, {-1})), b_.slice(v, {0}, {8}, {-1})},
                         -1);
      default:
        return b_.add(v, x_);  // a residual: x gains readers
    }
  }

  void perturb() {
    std::vector<Node*> nodes = b_.graph().topo_order();
    std::vector<Node*> consts, values;
    for (Node* n : nodes) {
      if (n->op == OpKind::Constant && n->payload.numel() == 1) consts.push_back(n);
      if (n->op != OpKind::Constant) values.push_back(n);
    }
    if (!consts.empty() && coin(0.3)) {  // nudge a pattern constant
      Node* c = consts[rng_() % consts.size()];
      c->payload.set(0, c->payload.get(0) * (coin(0.5) ? 1.001 : 0.9));
    }
    if (!values.empty() && coin(0.3)) {  // an intermediate is also an output
      Node* n = values[rng_() % values.size()];
      if (!b_.graph().is_output(n->out())) b_.output("extra", n->out());
    }
    if (!values.empty() && coin(0.3)) {  // a second consumer of an intermediate
      Node* n = values[rng_() % values.size()];
      if (n->out()->shape == x_->shape) b_.output("second", b_.add(n->out(), x_));
    }
  }

  std::mt19937_64 rng_;
  GraphBuilder b_;
  V x_ = nullptr, w_ = nullptr;
};

TEST(PassesRandom, RewritesNeverChangeResults) {
  int rewritten = 0;
  for (uint64_t seed = 0; seed < 300; seed++) {
    Graph g = RandomPatternGraph(seed).build();
    Graph o = optimized(g);  // verifies after each pass
    rewritten += o.num_nodes() < g.num_nodes();
    auto in = testing::random_inputs(g, seed);
    Tensor& x = in.at("x");
    if (seed % 3 == 0) {
      x.set(0, NAN);
      x.set(17, INFINITY);
      x.set(33, -INFINITY);
      x.set(40, 0.0);
    }
    // Rounding differs (one rounding instead of several) but stays in the dtype's tolerance; the
    // stacked patterns amplify bf16 noise a little, hence the scale.
    ASSERT_TRUE(same_as_original(g, o, in, 4.0)) << "seed " << seed << "\n"
                                                 << print_graph(g) << "\n"
                                                 << print_graph(o);
  }
  EXPECT_GT(rewritten, 150);
}

}  // namespace
}  // namespace ubfuse
