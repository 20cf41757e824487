// Generated kernels whose columns are all bf16 hold each unrolled step's columns in even/odd lanes
// (cpp_render.cc, bf16_even_odd_lanes): which kernels do, and that the results keep column order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fused_kernel_util.h"
#include "test_util.h"
// The helpers on this binary's static Highway target: the portable store, not the AVX512_BF16 one
// that -march=native kernels on this machine take.
#include "codegen/ubk_vec-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

namespace ubfuse {
namespace {

using testing::generated_code;
using testing::seed_block;

bool uses_even_odd_lanes(const std::string& code) {
  return code.find("LoadEvenOddBf16") != std::string::npos &&
         code.find("StoreEvenOddBf16") != std::string::npos;
}

TEST(Bf16Lanes, OnlyKernelsWithEveryColumnInBf16UseThem) {
  EXPECT_TRUE(uses_even_odd_lanes(generated_code(seed_block({"rows", 4096}, DType::bf16))));
  EXPECT_FALSE(uses_even_odd_lanes(generated_code(seed_block({"rows", 4096}, DType::f32))));
  // bf16 inputs, an f32 output: column order (an f32 column would need a permute).
  GraphBuilder b;
  auto x = b.input("x", DType::bf16, {"rows", 64});
  auto r = b.input("r", DType::bf16, {"rows", 64});
  b.output("y", b.cast(b.silu(b.add(x, r)), DType::f32));
  const std::string mixed = generated_code(b.build());
  EXPECT_FALSE(uses_even_odd_lanes(mixed)) << mixed;
  EXPECT_EQ(mixed.find("even/odd"), std::string::npos);
}

// Their pipelined variant exists only where there are 32 vector registers: with 16 (AVX2) its two
// rows spill, and use_ub == 2 runs the one-row variant (cpp_render.cc). f32 kernels keep it.
TEST(Bf16Lanes, PipelinedVariantOnlyWithThirtyTwoRegisters) {
  const std::string guard = "#if !HWY_ARCH_X86 || HWY_TARGET <= HWY_AVX3\n";
  const std::string bf16 = generated_code(seed_block({"rows", 4096}, DType::bf16));
  const size_t dispatch = bf16.find("if (a->use_ub == 2)");
  ASSERT_NE(dispatch, std::string::npos) << bf16;
  EXPECT_EQ(bf16.rfind(guard, dispatch), dispatch - guard.size() - 2) << bf16;  // "  " indent
  const size_t pl = bf16.find("_pl(const UbfKernelArgs*");
  ASSERT_NE(pl, std::string::npos);
  EXPECT_NE(bf16.rfind(guard, pl), std::string::npos);
  const std::string f32 = generated_code(seed_block({"rows", 4096}, DType::f32));
  EXPECT_NE(f32.find("if (a->use_ub == 2)"), std::string::npos);
  EXPECT_EQ(f32.find(guard), std::string::npos) << f32;
}

// Widths around the 2-vector step (32 bf16 with AVX-512): steps in lanes, the last whole vector
// and the masked tail in column order; the UB variants (pipelined, one row at a time) and the
// re-read one, on 2 threads. A symbolic width: one compiled kernel serves them all.
TEST(Bf16Lanes, ResultsKeepColumnOrderAtEveryWidth) {
  const Graph g = seed_block({7, "cols"}, DType::bf16);
  for (int64_t cols : {1, 15, 31, 32, 33, 48, 64, 95, 4097}) {
    for (int64_t ub : {int64_t(0), int64_t(256)}) {
      std::map<std::string, Tensor> in{{"x", Tensor::random(DType::bf16, {7, cols}, 1)},
                                       {"residual", Tensor::random(DType::bf16, {7, cols}, 2)},
                                       {"w", Tensor::random(DType::bf16, {cols}, 3)},
                                       {"b", Tensor::random(DType::bf16, {cols}, 4)}};
      Options o = testing::graph_opts();
      o["codegen"] = "cpp";
      o["num_threads"] = "2";
      if (ub > 0) o["ub_bytes"] = std::to_string(ub);
      // 256 bytes hold no row of 64+ columns: those split into three kernels.
      if (ub == 0) {
        EXPECT_EQ(compile(g, o).kernels().size(), 1u) << "cols " << cols;
      }
      EXPECT_TRUE(testing::matches_reference(g, in, o)) << "cols " << cols << " ub " << ub;
    }
  }
}

// Even/odd loads then an even/odd store write what StoreF32 writes in column order, bit for bit:
// rounding to nearest even, NaN, infinities, and subnormals flushed to signed zero.
TEST(Bf16Lanes, PortableLoadsAndStoreMatchColumnOrder) {
  namespace hn = hwy::HWY_NAMESPACE;
  using namespace ubfuse::HWY_NAMESPACE;  // NOLINT: the helpers' namespace
  const hn::ScalableTag<float> d;
  const size_t n = 2 * hn::Lanes(d);
  std::vector<float> vals(n);
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(), -0.0f, 1e-40f, -3e-39f};
  for (size_t i = 0; i < n; i++) vals[i] = i < 5 ? special[i] : std::ldexp(float(i) - 7.3f, -3);
  std::vector<hwy::bfloat16_t> in(n), want(n);
  // Inputs: distinct bf16 values, so a swap shows.
  for (size_t i = 0; i < n; i++) {
    const uint16_t bits = uint16_t(0x3f00 + i * 3);
    std::memcpy(&in[i], &bits, 2);
  }
  hn::Vec<decltype(d)> even, odd;
  LoadEvenOddBf16(d, in.data(), even, odd);
  for (size_t k = 0; k < n / 2; k++) {
    EXPECT_EQ(hn::ExtractLane(even, k), hwy::F32FromBF16(in[2 * k])) << k;
    EXPECT_EQ(hn::ExtractLane(odd, k), hwy::F32FromBF16(in[2 * k + 1])) << k;
  }
  // The values to store, even columns then odd ones, scaled so that most need rounding.
  HWY_ALIGN float ev[hn::MaxLanes(d)], ov[hn::MaxLanes(d)];
  for (size_t k = 0; k < n / 2; k++) {
    ev[k] = vals[2 * k] * 1.0039f;
    ov[k] = vals[2 * k + 1] * 1.0039f;
  }
  for (bool nt : {false, true}) {
    HWY_ALIGN hwy::bfloat16_t out[2 * hn::MaxLanes(d)];
    StoreEvenOddBf16(hn::Load(d, ev), hn::Load(d, ov), d, out, nt);
    for (size_t k = 0; k < n / 2; k++) {
      StoreF32(hn::Set(d, ev[k]), d, &want[0]);
      EXPECT_EQ(std::memcmp(&out[2 * k], &want[0], 2), 0) << "even " << k << " nt " << nt;
      StoreF32(hn::Set(d, ov[k]), d, &want[0]);
      EXPECT_EQ(std::memcmp(&out[2 * k + 1], &want[0], 2), 0) << "odd " << k << " nt " << nt;
    }
  }
  hwy::FlushStream();
}

}  // namespace
}  // namespace ubfuse
