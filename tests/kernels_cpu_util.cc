// Shared helpers of the eager CPU kernel tests (kernels_cpu_util.h).
#include "kernels_cpu_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/cpu/op_kernel.h"
#include "kernels/reference/reference.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse::kernels_test {

using testing::close_to_ref;

ThreadPool& pool2() { return ThreadPool::with_threads(2); }

::testing::AssertionResult check_op(const std::vector<Tensor>& ins,
                                    const std::function<V(GraphBuilder&, std::vector<V>&)>& make,
                                    double scale, ThreadPool* pool) {
  GraphBuilder b;
  std::vector<V> vs;
  for (size_t i = 0; i < ins.size(); ++i) {
    vs.push_back(b.input("in" + std::to_string(i), ins[i].dtype(), to_shape(ins[i].sizes())));
  }
  V y = make(b, vs);
  b.output("y", y);
  Graph g = b.build();
  const Node& n = *y->producer;
  // Inputs made by Constant nodes inside `make` (e.g. prepacked weights) come from their payload.
  std::vector<Tensor> kin;
  std::vector<ref::RefTensor> rin;
  size_t next = 0;
  for (const Value* v : n.inputs) {
    if (v->producer && v->producer->op == OpKind::Constant) {
      kin.push_back(v->producer->payload);
    } else {
      kin.push_back(ins.at(next++));
    }
    rin.push_back(ref::from_tensor(kin.back()));
  }
  ref::RefTensor want = ref::eval_node(n, rin).at(0);
  Tensor got(n.out()->dtype, want.sizes);
  std::vector<Tensor> outs{got};
  auto k = cpu::make_op_kernel(n);
  k->run(kin, outs, pool ? *pool : pool2());
  auto r = close_to_ref(got, want, scale);
  if (!r)
    r << " [" << n.describe() << " on " << ins.size() << " input(s), first "
      << sizes_str(ins.empty() ? Sizes{} : ins[0].sizes()) << "]";
  return r;
}

const std::vector<DType> kFloats = {DType::f32, DType::bf16, DType::f16};
const std::vector<Sizes> kSizes = {{1}, {3}, {4097}, {2, 1, 3}, {7, 4097}};

Tensor run_eager_op(const std::function<V(GraphBuilder&, V)>& f, const Tensor& x) {
  GraphBuilder b;
  V y = f(b, b.input("x", x.dtype(), to_shape(x.sizes())));
  b.output("y", y);
  Graph g = b.build();
  Tensor out(y->dtype, x.sizes());
  std::vector<Tensor> outs{out};
  cpu::make_op_kernel(*y->producer)->run({x}, outs, pool2());
  return out;
}

double ulps_off(float got, double want) {
  const float wf = float(want);
  const double ulp = std::nextafter(std::fabs(wf), INFINITY) - std::fabs(wf);
  return std::fabs(double(got) - want) / ulp;
}

}  // namespace ubfuse::kernels_test
