// Shared by the graph and ONNX fuzz targets: run a graph in eager and graph mode (tile
// interpreter, so no g++ per input) and compare each output with the double reference.
//
// A mismatch only counts where the reference itself is stable: the reference is re-run on inputs
// perturbed by a fraction of the dtype's tolerance (two sign patterns), and elements that move by
// more than the tolerance there (ill-conditioned chains such as x - x*(1+tiny), exp(exp(x)), a
// cast at an integer boundary, rsqrt of a bf16 value near 0) are skipped, as are elements that
// move when computed values are nudged by a few f32 ulps, all nodes at once or one at a time
// (kernels compute in f32, so 1 - rms_norm(x) over one element may cancel to anything near 0).
// Graph mode may also match the reference that rounds only at casts (ref::Rounding::CastsOnly),
// or differ where that one is unstable: a fused kernel keeps intermediates in f32, so a bf16/f16
// intermediate that underflows, overflows or rounds to an exact cancellation in eager mode
// (log(x^3) with x^3 below f16's range; 1 + rms_norm(-x) over one element) need not. It may also
// match the reference that rounds where the compiled model's kernels store values for each other
// (ref::Rounding::KernelBoundaries), or differ where that one is unstable: such a value is f16 for
// the kernels that read it and f32 inside the kernel that made it (exp(exp(x)) - max(sum(...))
// cancels to a few ulps of either). A reduction or product that overflows to an infinity from
// operands without one, or comes within 2^8 of float's max (sum_overflows), leaves nothing to
// judge by. Anything else that differs aborts with the element and values.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

// The reference of one rounding mode on the inputs as given (`known` when the caller has it) and
// on the perturbed copies, each computed on first need.
class Oracle {
 public:
  Oracle(const Graph& g, const Inputs& in, ref::Rounding r, const RefOutputs* known = nullptr,
         const ref::KernelOfNode* kernel_of = nullptr)
      : g_(g), in_(in), rounding_(r), kernel_of_(kernel_of), exact_(known) {}
  // false when the perturbed inputs are invalid (e.g. an index moved out of range).
  bool ready() {
    try {
      if (!exact_) exact_ = &own_.emplace(ref::run_graph(g_, in_, rounding_, {}, kernel_of_));
      for (int k = 0; k < 2; k++) {
        if (!shaken_[k]) {
          shaken_[k] = ref::run_graph(g_, perturbed(in_, k == 1), rounding_, {}, kernel_of_);
        }
      }
      // Kernels compute in f32 whatever they store: also nudge computed values by a few f32 ulps
      // (f32 cancellation such as 1 - 0.9999998 inside an eager or a fused kernel is not a bug):
      // every node with independent random signs in each of a few patterns, then each node
      // alone, 4 ways (ref::Jitter).
      if (jittered_.empty()) {
        std::vector<RefOutputs> runs;
        for (uint32_t k = 0; k < kJitterPatterns; k++) {
          runs.push_back(ref::run_graph(g_, in_, rounding_, {kF32Jitter, k}, kernel_of_));
        }
        const uint32_t nodes = ref::count_jitterable(g_);
        for (uint32_t node = 1; node <= nodes; node++) {
          for (uint32_t k = 0; k < 4; k++) {
            runs.push_back(ref::run_graph(g_, in_, rounding_, {kF32Jitter, k, node}, kernel_of_));
          }
        }
        jittered_ = std::move(runs);
      }
    } catch (const Error&) {
      return false;
    }
    return true;
  }
  double value(const std::string& out, int64_t i) const { return exact_->at(out).data[size_t(i)]; }
  // Whether element i of `out` moves by more than tol/2 under any of the perturbations.
  bool unstable(const std::string& out, int64_t i, double tol) const {
    const double v = value(out, i);
    for (const auto& s : shaken_) {
      if (!same(s->at(out).data[size_t(i)], v, tol / 2)) return true;
    }
    for (const auto& s : jittered_) {
      if (!same(s.at(out).data[size_t(i)], v, tol / 2)) return true;
    }
    return false;
  }

 private:
  static constexpr double kF32Jitter = 4.0 / (1 << 24);  // 4 f32 ulps, relative
  static constexpr uint32_t kJitterPatterns = 4;
  const Graph& g_;
  const Inputs& in_;
  ref::Rounding rounding_;
  const ref::KernelOfNode* kernel_of_;
  const RefOutputs* exact_;
  std::optional<RefOutputs> own_, shaken_[2];
  std::vector<RefOutputs> jittered_;
};

// Which kernel of `m` runs each node.
inline ref::KernelOfNode kernel_of_node(const CompiledModel& m) {
  ref::KernelOfNode k;
  const auto& kernels = m.kernels();
  for (size_t i = 0; i < kernels.size(); i++) {
    for (const auto& n : kernels[i].node_names) k[n] = int(i);
  }
  return k;
}

// Whether a reduction or product of g (a MatMul, a Conv, a row reduction: an op that sums) gives
// an infinity from operands without one on these inputs, in the EveryOp reference, or a finite
// result within 2^8 of float's max, which f32 partial sums can pass on the way. Its sign, and
// what follows from it (inf - inf in a mask's Add, a softmax's NaN rows), then depends on the order
// the kernel sums in: an f32 partial sum overflows where the exact one need not, and an FMA adds an
// exact product to an infinite partial sum. No reference fixes that order.
inline bool sum_overflows(const Graph& g, const Inputs& in) {
  Graph c = g.clone();
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> sums;
  int k = 0;
  for (Node* n : c.topo_order()) {
    const FusionClass fc = fusion_class(n->op);
    if (fc != FusionClass::RowReduction && fc != FusionClass::Opaque) continue;
    std::vector<std::string> ins, outs;
    for (Value* v : n->inputs) {
      if (!is_float(v->dtype)) continue;
      ins.push_back("fuzz_sum_in_" + std::to_string(k++));
      c.add_output(ins.back(), v);
    }
    for (Value* v : n->outputs) {
      if (!is_float(v->dtype)) continue;
      outs.push_back("fuzz_sum_out_" + std::to_string(k++));
      c.add_output(outs.back(), v);
    }
    if (!outs.empty()) sums.emplace_back(ins, outs);
  }
  if (sums.empty()) return false;
  RefOutputs r;
  try {
    r = ref::run_graph(c, in);
  } catch (const Error&) {
    return false;
  }
  auto has_inf = [&](const std::string& name) {
    for (double x : r.at(name).data) {
      if (std::isinf(x)) return true;
    }
    return false;
  };
  // A finite result within 2^8 of float's max: f32 partial sums in another order than the
  // reference's can pass the max on the way (a 4-bit weight of scale 1e37 times 20 rows).
  auto near_max = [&](const std::string& name) {
    for (double x : r.at(name).data) {
      if (std::isfinite(x) && std::fabs(x) > double(std::numeric_limits<float>::max()) / 256) {
        return true;
      }
    }
    return false;
  };
  // An infinity out of operands that hold none is an overflow (a NaN operand makes NaNs only).
  for (const auto& [ins, outs] : sums) {
    bool inf_in = false;
    for (const auto& i : ins) inf_in = inf_in || has_inf(i);
    for (const auto& o : outs) {
      if ((!inf_in && has_inf(o)) || near_max(o)) return true;
    }
  }
  return false;
}

// Checks `got` (from `mode`, "eager" or "graph") against `want` (the EveryOp reference). An
// element that differs is judged only where that reference is stable; graph mode may instead
// match the CastsOnly reference or the KernelBoundaries one of its model (`kernel_of`), or
// differ where one of them is unstable.
inline void compare(const Graph& g, const Inputs& in, const RefOutputs& want,
                    const std::map<std::string, Tensor>& got, const char* mode,
                    const ref::KernelOfNode* kernel_of = nullptr) {
  Oracle every_op(g, in, ref::Rounding::EveryOp, &want);
  Oracle casts_only(g, in, ref::Rounding::CastsOnly);
  Oracle boundaries(g, in, ref::Rounding::KernelBoundaries, nullptr, kernel_of);
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
      if (!every_op.ready()) return;                  // nothing to judge by
      if (every_op.unstable(name, i, tol)) continue;  // ill-conditioned here
      if (fused) {
        if (!casts_only.ready()) return;
        if (same(a, casts_only.value(name, i), tol) || casts_only.unstable(name, i, tol)) continue;
        if (kernel_of) {
          if (!boundaries.ready()) return;
          if (same(a, boundaries.value(name, i), tol) || boundaries.unstable(name, i, tol))
            continue;
        }
      }
      if (sum_overflows(g, in)) return;  // the sum's order decides; nothing to judge by
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s: output '%s' element %lld: got %.9g, reference %.9g", mode,
                    name.c_str(), static_cast<long long>(i), a, b);
      finding(buf, g);
    }
  }
}

}  // namespace ubfuse::fuzz
