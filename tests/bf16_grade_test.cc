// bf16 numerics. The bf16-grade activations (vecmath.h: Exp, Sigmoid, Silu, tanh-GELU for values
// that reach only bf16 storage) against the bound the fuzz oracle assumes for them,
// ref::kBf16GradeRelError: over every bf16 input in a range, each result must be the bf16
// rounding of exact * (1 + d) for some |d| <= that bound. Checked for eager kernels, the tile
// interpreter and generated kernels, on each Highway target this CPU has (the hardware
// reciprocal differs: 14 bits with AVX-512, 12 with AVX2). And the flush rule (dtype.h): a
// subnormal f32 stored as bf16 becomes a zero of its sign, on every path and target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/reference/reference.h"
#include "test_util.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse {
namespace {

using V = GraphBuilder::V;

// Every bf16 value in [lo, hi], in order.
std::vector<float> every_bf16(float lo, float hi) {
  std::vector<float> xs;
  for (uint32_t bits = 0; bits < 0x10000; bits++) {
    const uint32_t f32_bits = bits << 16;
    float x;
    std::memcpy(&x, &f32_bits, sizeof x);
    if (x >= lo && x <= hi) xs.push_back(x);
  }
  std::sort(xs.begin(), xs.end());
  return xs;
}

// Runs f(target) with Highway dispatching to the best target this CPU has (0), then to AVX2 where
// the CPU has it: the hardware reciprocal and the bf16 narrowing differ between them.
void for_each_target(const std::function<void(int64_t)>& f) {
  for (int64_t target : {int64_t(0), int64_t(HWY_AVX2)}) {
    if (target && (hwy::SupportedTargets() & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(target ? hwy::TargetName(target) : "best target");
    f(target);
    hwy::SetSupportedTargetsForTest(0);
  }
}

float to_bf16(double v) { return float(Tensor::from_floats(DType::bf16, {1}, {float(v)}).get(0)); }

// The first input whose result is not the bf16 rounding of exact * (1 + d) for any |d| <= bound,
// as "x = .., exact .., got ..", or "" when there is none.
std::string first_beyond_bound(const std::function<V(GraphBuilder&, V)>& op,
                               const std::function<double(double)>& exact, float lo, float hi,
                               const Options& options, double bound) {
  const std::vector<float> xs = every_bf16(lo, hi);
  const int64_t n = int64_t(xs.size());
  GraphBuilder b;
  // Times an input of ones (exact, not folded away): graph mode fuses the op into a kernel
  // instead of running it alone.
  b.output("y", b.mul(op(b, b.input("x", DType::bf16, {n})), b.input("one", DType::bf16, {n})));
  const std::vector<float> ones(xs.size(), 1.0f);
  const Tensor y = compile(b.build(), options)
                       .run({{"x", Tensor::from_floats(DType::bf16, {n}, xs)},
                             {"one", Tensor::from_floats(DType::bf16, {n}, ones)}})
                       .at("y");
  for (int64_t i = 0; i < n; i++) {
    const double e = exact(xs[size_t(i)]), got = y.get(i);
    const double a = to_bf16(e * (1 - bound)), z = to_bf16(e * (1 + bound));
    if (got >= std::min(a, z) && got <= std::max(a, z)) continue;
    char buf[128];
    std::snprintf(buf, sizeof buf, "x = %.9g, exact %.9g, got %.9g", double(xs[size_t(i)]), e, got);
    return buf;
  }
  return "";
}

TEST(Bf16Grade, ResultsStayWithinTheFuzzOraclesBound) {
  using B = GraphBuilder;
  struct Case {
    const char* name;
    std::function<V(B&, V)> op;
    std::function<double(double)> exact;
    float lo, hi;
  };
  const double k = std::sqrt(2 / M_PI);  // tanh-GELU as x sigmoid(2u): 1 + tanh(u) cancels
  const std::vector<Case> cases = {
      {"exp", [](B& b, V x) { return b.exp(x); }, [](double v) { return std::exp(v); }, -80, 80},
      {"sigmoid", [](B& b, V x) { return b.sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }, -80, 80},
      {"silu", [](B& b, V x) { return b.silu(x); }, [](double v) { return v / (1 + std::exp(-v)); },
       -80, 80},
      {"gelu tanh", [](B& b, V x) { return b.gelu(x, "tanh"); },
       [k](double v) { return v / (1 + std::exp(-2 * k * (v + 0.044715 * v * v * v))); }, -8, 8},
  };
  for_each_target([&](int64_t target) {
    for (const auto& c : cases) {
      for (const char* engine : {"eager", "interpreter", "cpp"}) {
        // Generated code is built for this CPU (-march=native), not dispatched.
        if (target && std::string(engine) == "cpp") continue;
        EXPECT_EQ(first_beyond_bound(c.op, c.exact, c.lo, c.hi, testing::engine_opts(engine),
                                     ref::kBf16GradeRelError),
                  "")
            << c.name << ", " << engine;
      }
    }
  });
}

// The bf16-grade exp keeps e^0 = 1 exactly (its polynomial's constant term is 1): a fused
// exp(x) - 1 computes in f32 and would show any error at 0 instead of rounding it away.
TEST(Bf16Grade, ExpOfZeroIsExactlyOne) {
  GraphBuilder b;
  auto x = b.input("x", DType::bf16, {3});
  b.output("y", b.sub(b.exp(x), b.input("one", DType::bf16, {3})));
  const Graph g = b.build();
  const std::map<std::string, Tensor> in = {
      {"x", Tensor::from_floats(DType::bf16, {3}, {0.0f, -0.0f, 0.0f})},
      {"one", Tensor::from_floats(DType::bf16, {3}, {1.0f, 1.0f, 1.0f})}};
  for_each_target([&](int64_t target) {
    for (const char* engine : {"eager", "interpreter", "cpp"}) {
      if (target && std::string(engine) == "cpp") continue;  // built for this CPU, not dispatched
      const Tensor y = compile(g, testing::engine_opts(engine)).run(in).at("y");
      for (int64_t i = 0; i < 3; i++) EXPECT_EQ(y.get(i), 0.0) << engine << " element " << i;
    }
  });
}

TEST(Bf16Grade, SubnormalsFlushToSignedZeroOnEveryPath) {
  const float tiny = 1e-39f, smallest_normal = std::numeric_limits<float>::min();
  const std::vector<float> xs = {tiny, -tiny, smallest_normal, -smallest_normal, 1.0f};
  const std::vector<float> want = {0.0f, -0.0f, smallest_normal, -smallest_normal, 1.0f};
  auto expect_flushed = [&](const Tensor& t, const std::string& what) {
    for (size_t i = 0; i < xs.size(); i++) {
      const float got = float(t.get(int64_t(i)));
      EXPECT_TRUE(got == want[i] && std::signbit(got) == std::signbit(want[i]))
          << what << ": " << xs[i] << " stored as " << got;
    }
  };
  const int64_t n = int64_t(xs.size());
  expect_flushed(Tensor::from_floats(DType::bf16, {n}, xs), "Tensor::from_floats");
  // x * 1 cast to bf16: an eager Mul and Cast, or one fused kernel storing bf16.
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {n});
  b.output("c", b.cast(b.mul(x, b.input("one", DType::f32, {n})), DType::bf16));
  const Graph g = b.build();
  const std::map<std::string, Tensor> in = {
      {"x", Tensor::from_floats(DType::f32, {n}, xs)},
      {"one", Tensor::from_floats(DType::f32, {n}, std::vector<float>(xs.size(), 1.0f))}};
  for_each_target([&](int64_t target) {
    for (const char* engine : {"eager", "interpreter", "cpp"}) {
      if (target && std::string(engine) == "cpp") continue;  // built for this CPU, not dispatched
      expect_flushed(compile(g, testing::engine_opts(engine)).run(in).at("c"), engine);
    }
  });
  // The reference rounds the same way.
  EXPECT_EQ(ref::run_graph(g, in).at("c").data[0], 0.0);
}

}  // namespace
}  // namespace ubfuse
