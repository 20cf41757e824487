// The reference's jitter: which nodes it nudges and how (reference.h, ref::Jitter).
#include "kernels/reference/jitter.h"

#include <algorithm>
#include <cmath>

namespace ubfuse::ref {

bool jitterable(const Node& n) {
  const FusionClass fc = fusion_class(n.op);
  const bool computes = fc == FusionClass::Elementwise || fc == FusionClass::Broadcast ||
                        fc == FusionClass::RowReduction || n.op == OpKind::MatMul ||
                        n.op == OpKind::Conv || n.op == OpKind::GroupNorm;
  return computes && n.op != OpKind::Cast;
}

namespace {

// Whether v reaches only bf16 storage through elementwise arithmetic (codegen/schedule.cc's rule
// for bf16-grade math, seen from the graph; it may say yes where the kernel still uses the exact
// form, which only widens the jitter).
bool reaches_only_bf16(const Graph& g, const Value* v) {
  if (v->dtype == DType::bf16) return true;
  if (!is_float(v->dtype) || g.is_output(v)) return false;
  for (const Node* u : g.users(v)) {
    const FusionClass fc = fusion_class(u->op);
    if (fc != FusionClass::Elementwise && fc != FusionClass::Broadcast) return false;
    if (!reaches_only_bf16(g, u->out())) return false;
  }
  return true;
}

// Whether a kernel may compute n with a bf16-grade form (eager bf16 Sigmoid, Silu and tanh-GELU;
// fused Exp, Sigmoid, Silu and tanh-GELU whose values reach only bf16 storage).
bool may_be_bf16_grade(const Graph& g, const Node& n) {
  const bool has_form = n.op == OpKind::Exp || n.op == OpKind::Sigmoid || n.op == OpKind::Silu ||
                        (n.op == OpKind::Gelu && n.attr_str("approximate", "none") == "tanh");
  return has_form && reaches_only_bf16(g, n.out());
}

// A relative nudge of `rel` is rel * 2^24 f32 ulps for a normal value; below f32's normal range
// an ulp is the fixed 2^-149, which a relative nudge of a subnormal falls short of (a kernel's
// exp or divide landing there is off by ulps, i.e. by percents). Nonzero values move at least
// that many of them.
double subnormal_nudge(double v, double rel) { return v == 0 ? 0.0 : rel * 0x1p24 * 0x1p-149; }
}  // namespace

uint32_t count_jitterable(const Graph& g) {
  uint32_t count = 0;
  for (const Node* n : g.topo_order()) count += jitterable(*n) ? 1 : 0;
  return count;
}

void nudge_results(const Graph& g, const Node& n, const Jitter& jitter, uint64_t node_index,
                   const std::vector<double>* input0, std::vector<double>& d) {
  const double rel =
      may_be_bf16_grade(g, n) ? std::max(jitter.rel, kBf16GradeRelError) : jitter.rel;
  const double abs_per_x =
      n.op == OpKind::Gelu && n.attr_str("approximate", "none") != "tanh" && input0
          ? kGeluErfAbsErrorPerX
          : 0.0;
  for (size_t e = 0; e < d.size(); e++) {
    // splitmix64 of (pattern, node, element): independent signs across nodes and elements.
    // One node's pattern 3 negates pattern 2's signs, so both hash as pattern 2.
    const uint64_t sign_pattern = jitter.node != 0 && jitter.pattern == 3 ? 2 : jitter.pattern;
    uint64_t h = (sign_pattern << 56) ^ (node_index << 40) ^ uint64_t(e);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    bool up = h & 1;
    if (jitter.node != 0) {  // one node: all up, all down, random signs, their negation
      up = jitter.pattern == 0 ? true : jitter.pattern == 1 ? false : up != (jitter.pattern == 3);
    }
    // GELU (erf form) moves by at least abs_per_x |x| (its output has its input's shape);
    // nudged down by more than |d|, a value crosses zero. The kernel may also return exactly 0
    // there (1 + erf rounds to 0), which a division by the value tells apart: in one node's
    // random-sign patterns (2 and 3, each other's negation, so every element is nudged down in
    // one of them) such an element lands on zero instead.
    const double abs_nudge = abs_per_x != 0 ? abs_per_x * std::fabs((*input0)[e]) : 0.0;
    if (!up && jitter.node != 0 && jitter.pattern >= 2 && abs_nudge > 0 &&
        abs_nudge >= std::fabs(d[e])) {
      d[e] = std::copysign(0.0, d[e]);
    } else if (const double at_least = std::max(abs_nudge, subnormal_nudge(d[e], rel));
               at_least > std::fabs(d[e]) * rel) {
      d[e] += std::signbit(d[e]) == up ? -at_least : at_least;
    } else {
      // A zero has no magnitude to nudge, but its sign depends on the order of operations
      // (x - mean over a row of +-0): nudged down, it flips.
      d[e] = d[e] == 0 ? (up ? d[e] : -d[e]) : d[e] * (1 + (up ? rel : -rel));
    }
  }
}

}  // namespace ubfuse::ref
