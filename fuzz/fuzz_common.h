// Shared by the graph and ONNX fuzz targets: run a graph in eager and graph mode (tile
// interpreter, so no g++ per input) and compare each output with the double reference.
//
// A mismatch only counts where the reference itself is stable: the reference is re-run on inputs
// perturbed by a fraction of the dtype's tolerance (two sign patterns), and elements that move by
// more than the tolerance there (ill-conditioned chains such as x - x*(1+tiny), exp(exp(x)), a
// cast at an integer boundary, rsqrt of a bf16 value near 0) are skipped. Graph mode may also match the reference that rounds only at
// casts (ref::Rounding::CastsOnly): a fused kernel keeps intermediates in f32, so a bf16/f16
// intermediate that would underflow or overflow (log(x^3) with x^3 below f16's range) need not.
// Anything else that differs aborts with the element and values.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "kernels/reference/reference.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse::fuzz {

using Inputs = std::map<std::string, Tensor>;
using RefOutputs = std::map<std::string, ref::RefTensor>;

[[noreturn]] inline void finding(const std::string& what, const Graph& g) {
  std::fprintf(stderr, "FUZZ FINDING: %s\ngraph:\n%s\n", what.c_str(), print_graph(g).c_str());
  std::abort();
}

inline bool same(double a, double w, double tol) {
  if (std::isnan(a) && std::isnan(w)) return true;
  if (std::isinf(w) || std::isinf(a)) return a == w;
  return std::fabs(a - w) <= tol * (1 + std::fabs(w));
}

// Inputs with every float element scaled by (1 + eps * (+-1)), the signs alternating by element;
// `flip` swaps them. Both patterns are tried: in bf16 a nudge of one direction may round back to
// the same value, so one pattern alone can miss the element an output hinges on.
inline Inputs perturbed(const Inputs& in, bool flip) {
  Inputs out;
  for (auto& [name, t] : in) {
    Tensor c = t.clone();
    if (is_float(t.dtype())) {
      double eps = ref::tolerance(t.dtype()) / 8;
      for (int64_t i = 0; i < c.numel(); i++) {
        c.set(i, c.get(i) * (1 + ((i % 2 == 1) != flip ? eps : -eps)));
      }
    }
    out[name] = c;
  }
  return out;
}

// Checks `got` (from `mode`, "eager" or "graph") against `want`; the perturbed and the
// unrounded references are computed on first need.
inline void compare(const Graph& g, const Inputs& in, const RefOutputs& want,
                    const std::map<std::string, Tensor>& got, const char* mode) {
  std::optional<RefOutputs> shaken[2], unrounded;
  const bool fused = std::string(mode) == "graph";
  for (auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) finding(std::string(mode) + ": output '" + name + "' missing", g);
    const Tensor& t = it->second;
    if (t.sizes() != w.sizes) {
      finding(std::string(mode) + ": output '" + name + "' has sizes " + sizes_str(t.sizes()) +
                  ", reference " + sizes_str(w.sizes),
              g);
    }
    double tol = ref::tolerance(t.dtype());
    for (int64_t i = 0; i < t.numel(); i++) {
      double a = t.get(i), b = w.data[size_t(i)];
      if (same(a, b, tol)) continue;
      bool unstable = false;
      for (int k = 0; k < 2 && !unstable; k++) {
        if (!shaken[k]) {
          try {
            shaken[k] = ref::run_graph(g, perturbed(in, k == 1));
          } catch (const Error&) {
            return;  // the perturbed inputs are invalid (e.g. an index): nothing to judge by
          }
        }
        unstable = !same(shaken[k]->at(name).data[size_t(i)], b, tol / 2);
      }
      if (unstable) continue;  // ill-conditioned here
      if (fused) {
        if (!unrounded) unrounded = ref::run_graph(g, in, ref::Rounding::CastsOnly);
        if (same(a, unrounded->at(name).data[size_t(i)], tol)) continue;
      }
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s: output '%s' element %lld: got %.9g, reference %.9g", mode,
                    name.c_str(), static_cast<long long>(i), a, b);
      finding(buf, g);
    }
  }
}

}  // namespace ubfuse::fuzz
