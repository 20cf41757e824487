// Shared by the eager CPU kernel tests (kernels_cpu_*_test.cc): the op-vs-reference check, the
// 2-thread pool, the dtypes and sizes every op runs at, and the suites OtherHighwayTargets reruns
// on the AVX2 and scalar targets.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "runtime/thread_pool.h"
#include "ubfuse/builder.h"
#include "ubfuse/tensor.h"

namespace ubfuse::kernels_test {

using V = GraphBuilder::V;

ThreadPool& pool2();

// One op built by `make` from fresh graph inputs of the given tensors' dtypes and sizes; checks
// the eager kernel against the reference. `scale` widens the dtype tolerance.
::testing::AssertionResult check_op(const std::vector<Tensor>& ins,
                                    const std::function<V(GraphBuilder&, std::vector<V>&)>& make,
                                    double scale = 1.0, ThreadPool* pool = nullptr);

// Runs the shape-keeping op f(x) through its eager kernel on x; its constants (weights made with
// b.constant) come from the node.
Tensor run_eager_op(const std::function<V(GraphBuilder&, V)>& f, const Tensor& x);

// |got - want| in ulps of want rounded to f32.
double ulps_off(float got, double want);

extern const std::vector<DType> kFloats;
extern const std::vector<Sizes> kSizes;

// Suites run on the best Highway target and again on the others (OtherHighwayTargets).
void unary_all_dtypes_and_sizes();
void binary_broadcast_float();
void compare_and_where();
void norms_softmax_reductions();
void cast_all_pairs();

}  // namespace ubfuse::kernels_test
