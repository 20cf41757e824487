// Helpers for the rewrite-pass tests: run the graph-optimizer passes on a copy, count ops, and
// check a rewritten graph against the double reference of the original.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "passes/pass.h"
#include "test_util.h"

namespace ubfuse::testing {

inline int count_op(const Graph& g, OpKind k) {
  int n = 0;
  for (Node* node : g.topo_order()) n += node->op == k;
  return n;
}

// Runs `passes` on a copy of g, verifying the graph after each (as XLA's invariant checker does).
inline Graph run_passes(const Graph& g, std::vector<std::unique_ptr<Pass>> passes) {
  Graph c = g.clone();
  for (auto& p : passes) {
    p->run(c);
    verify(c);
  }
  return c;
}

inline Graph simplified(const Graph& g) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_simplify_pass());
  return run_passes(g, std::move(p));
}

// The graph-optimizer stage of the pipeline: simplify, canonicalize, dce, simplify.
inline Graph optimized(const Graph& g) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_simplify_pass());
  p.push_back(make_canonicalize_pass());
  p.push_back(make_dce_pass());
  p.push_back(make_simplify_pass());
  return run_passes(g, std::move(p));
}

// Uniform random values for every (statically shaped) graph input, in the input's dtype.
inline std::map<std::string, Tensor> random_inputs(const Graph& g, uint64_t seed, double lo = -3,
                                                   double hi = 3) {
  std::map<std::string, Tensor> in;
  for (Value* v : g.inputs())
    in[v->name] = Tensor::random(v->dtype, static_sizes(v->shape), seed++, lo, hi);
  return in;
}

// The rewritten graph, evaluated by the double reference and stored in each output's dtype,
// matches the reference of the original graph within that dtype's tolerance.
inline ::testing::AssertionResult same_as_original(const Graph& original, const Graph& rewritten,
                                                   const std::map<std::string, Tensor>& inputs,
                                                   double scale = 1.0) {
  auto want = ref::run_graph(original, inputs);
  auto got = ref::run_graph(rewritten, inputs);
  for (auto& [name, w] : want) {
    const ref::RefTensor& r = got.at(name);
    Tensor t(r.dtype, r.sizes);
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, r.data[size_t(i)]);
    auto res = close_to_ref(t, w, scale);
    if (!res) return res << " (output '" << name << "')";
  }
  return ::testing::AssertionSuccess();
}

// The exported rotate_half: cat(-x[..., h:], x[..., :h], dim=-1), end as PyTorch writes it.
inline GraphBuilder::V exported_rotate_half(GraphBuilder& b, GraphBuilder::V x, int64_t d,
                                            int64_t end = INT64_MAX) {
  const int64_t h = d / 2;
  GraphBuilder::V upper = b.slice(x, {h}, {end}, {-1});
  GraphBuilder::V lower = b.slice(x, {0}, {h}, {-1});
  return b.concat({b.neg(upper), lower}, -1);
}

}  // namespace ubfuse::testing
