// The test oracle: obvious, slow kernels in double precision. Inputs of any dtype are widened to
// double; each op computes in double and its result is rounded to its dtype as eager mode stores
// it (see Rounding for the variant fused kernels approach).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse::ref {

struct RefTensor {
  Sizes sizes;
  std::vector<double> data;
  DType dtype = DType::f32;  // the dtype the graph gives this value
};

// Where elementwise results are rounded to their float dtype. EveryOp is eager mode's contract
// (every op materializes its output); CastsOnly keeps intermediates exact except where a Cast
// to another dtype asks for rounding: what a fused kernel, computing in f32, approaches (a Cast
// to the dtype its input has is dropped by simplify). In run_graph a MatMul's result is rounded
// in both (graph mode stores it in its dtype before any epilogue); eval_node leaves it exact in
// CastsOnly. Integer and bool results are always rounded.
// KernelBoundaries is graph mode's contract for one compiled model: as CastsOnly, but a float
// value is rounded to its dtype where a node of another kernel reads it (a fused kernel keeps what
// it computes in f32 and stores in their dtypes only the values other kernels read), by the
// node-to-kernel map given to run_graph. A node missing from the map (a pass replaced it) reads
// and is read exactly.
enum class Rounding { EveryOp, CastsOnly, KernelBoundaries };
// Node name -> the index of the kernel that runs it (CompiledModel::kernels()).
using KernelOfNode = std::map<std::string, int>;

RefTensor from_tensor(const Tensor& t);
// Evaluates one node on double inputs.
std::vector<RefTensor> eval_node(const Node& n, const std::vector<RefTensor>& inputs,
                                 Rounding rounding = Rounding::EveryOp);
// Evaluates the whole graph (symbols bound from the inputs' sizes); returns named outputs.
// A nonzero jitter scales each computed float element (not casts or data movement) by 1 +- rel
// (a nonzero element by at least rel * 2^24 of f32's subnormal ulps, 2^-149: below f32's normal
// range a kernel's error is whole ulps there)
// (at least kBf16GradeRelError where a kernel may use a bf16-grade form; a zero nudged down
// changes sign, which the order of operations decides in a kernel),
// the sign a hash of (pattern, node, element), before EveryOp rounds it to its dtype (a kernel's
// f32 result near a bf16 rounding boundary may round either way): how far f32 rounding inside a
// kernel (eager or fused) may move an output.
// With `node` > 0 only the node-th computing node in topological order is nudged (pattern 0: every
// element up, 1: down, 2: random signs, 3: those negated): the sensitivity of the outputs to that
// one node's rounding, which random signs over all nodes can hide when two nudges cancel
// (rms_norm(x) + softmax(x) over one element, both nudged up).
// A value a kernel may compute with a bf16-grade form (Exp, Sigmoid, Silu, tanh-GELU reaching only
// bf16 storage, vecmath.h) is nudged by at least this much: those forms' relative error bound
// before bf16 rounding (tests/bf16_grade_test.cc checks it on each Highway target).
inline constexpr double kBf16GradeRelError = 5e-4;
// GELU's erf form computes 1 + erf(x / sqrt(2)) in f32 (vecmath.h GeluErfF, as PyTorch does): for
// x < -3 only its absolute error is small, at most half an ulp of 1 times |x| / 2 (and erf's own
// error). A jittered GELU (erf form) element moves by at least this times |x|, so a value that
// tiny may come out as 0 (in a one-node jitter's patterns 2 and 3) or change sign.
inline constexpr double kGeluErfAbsErrorPerX = 1e-7;
struct Jitter {
  double rel = 0;
  uint32_t pattern = 0;
  uint32_t node = 0;
};
// Whether a Jitter nudges n's outputs (it computes: not a cast, not data movement).
bool jitterable(const Node& n);
// How many nodes of g a Jitter can nudge: the range of Jitter::node.
uint32_t count_jitterable(const Graph& g);
// `kernel_of` is read with Rounding::KernelBoundaries only (required there).
std::map<std::string, RefTensor> run_graph(const Graph& g,
                                           const std::map<std::string, Tensor>& inputs,
                                           Rounding rounding = Rounding::EveryOp,
                                           Jitter jitter = {},
                                           const KernelOfNode* kernel_of = nullptr);

// Tolerances used when comparing a dtype's result with the double reference.
double tolerance(DType t);
// Max |a - b| over elements; throws if sizes differ.
double max_abs_diff(const Tensor& got, const RefTensor& want);

}  // namespace ubfuse::ref
