// The exact int8 product on pair panels (kernels/cpu/int_gemm_pairs.h), which int_gemm runs where
// oneDNN's int8 product is not exact (no VNNI), against an int64 product taken modulo 2^32.
#include "kernels/cpu/int_gemm_pairs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "runtime/thread_pool.h"

namespace ubfuse {
namespace {

struct Operand {
  DType t = DType::u8;
  std::vector<uint8_t> bytes;  // the values' bit patterns
  int32_t at(size_t i) const {
    return t == DType::i8 ? int32_t(int8_t(bytes[i])) : int32_t(bytes[i]);
  }
};

Operand random_operand(DType t, int64_t count, std::mt19937& rng) {
  Operand o{t, std::vector<uint8_t>(size_t(count))};
  for (auto& v : o.bytes) v = uint8_t(rng() & 0xff);
  return o;
}

std::vector<int32_t> random_zero_points(DType t, int64_t count, std::mt19937& rng) {
  std::vector<int32_t> z(static_cast<size_t>(count));
  for (auto& v : z) v = t == DType::i8 ? int32_t(int8_t(rng() & 0xff)) : int32_t(rng() & 0xff);
  return z;
}

// (A - za)(B - zb) in int64, then to the i32 bits of a wrapping sum.
std::vector<int32_t> exact_product(const Operand& a, const Operand& b,
                                   const std::vector<int32_t>& za, const std::vector<int32_t>& zb,
                                   int64_t M, int64_t K, int64_t N) {
  std::vector<int32_t> c(size_t(M * N));
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; k++) {
        s += int64_t(a.at(size_t(i * K + k)) - za[size_t(i)]) *
             (b.at(size_t(k * N + j)) - zb[size_t(j)]);
      }
      c[size_t(i * N + j)] = int32_t(uint32_t(uint64_t(s)));
    }
  }
  return c;
}

// Every dtype pair, full-range values and zero points (per row of A and per column of B), K odd and
// even, past and off the 256-row slices, N off the 32-column panels and the groups of four, every
// row count of one to three blocks and larger ones, on 1-3 threads: on Highway's AVX2 and AVX3
// targets (those this CPU has and the build generated), each element against the exact product.
TEST(IntGemmPairs, MatchTheExactProductOnEachTarget) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  std::mt19937 rng(1290);
  struct Case {
    int64_t K, N;
  };
  const DType types[] = {DType::u8, DType::i8};
  int ran = 0;
  for (int64_t target : {int64_t(HWY_AVX2), int64_t(HWY_AVX3), int64_t(0)}) {
    if (target != 0 && (hwy::SupportedTargets() & HWY_TARGETS & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(target ? hwy::TargetName(target) : "best target");
    if (!cpu::pair_panels_available()) continue;
    int which = 0;
    for (Case c : {Case{1, 1}, Case{2, 31}, Case{3, 33}, Case{255, 32}, Case{257, 130},
                   Case{300, 100}, Case{513, 1}}) {
      const DType ta = types[which % 2], tb = types[(which / 2) % 2];
      which++;
      const Operand a = random_operand(ta, 70 * c.K, rng);
      const Operand b = random_operand(tb, c.K * c.N, rng);
      const std::vector<int32_t> za = random_zero_points(ta, 70, rng);
      const std::vector<int32_t> zb = random_zero_points(tb, c.N, rng);
      const std::vector<int16_t> panels = cpu::pack_pair_panels(b.bytes.data(), tb, c.K, c.N);
      ASSERT_EQ(int64_t(panels.size()), cpu::pair_panels_elems(c.K, c.N));
      for (int64_t m : {1, 2, 3, 5, 6, 7, 13, 70}) {
        const std::vector<int32_t> want = exact_product(a, b, za, zb, m, c.K, c.N);
        for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
          std::vector<int32_t> got(size_t(m * c.N), 0x7eadbeef);
          cpu::pair_panel_gemm(a.bytes.data(), ta, za.data(), zb.data(), panels.data(), got.data(),
                               m, c.K, c.N, *pool);
          int bad = 0;
          for (size_t i = 0; i < got.size(); i++) bad += got[i] != want[i];
          EXPECT_EQ(bad, 0) << dtype_name(ta) << " x " << dtype_name(tb) << ", K " << c.K << ", N "
                            << c.N << ", " << m << " rows, " << pool->size() << " threads";
          ran++;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  if (ran == 0) GTEST_SKIP() << "no Highway target with pair panels on this CPU";
}

// Sums past i32's range wrap as the plain loop's uint32 arithmetic does: 40000 products of 255 x
// 255 (2.6e9), and the same with B's zero point taken off afterwards.
TEST(IntGemmPairs, SumsPastI32Wrap) {
  if (!cpu::pair_panels_available()) GTEST_SKIP() << "no pair panels on this CPU";
  ThreadPool pool(2);
  const int64_t M = 3, K = 40000, N = 5;
  Operand a{DType::u8, std::vector<uint8_t>(size_t(M * K), 255)};
  Operand b{DType::u8, std::vector<uint8_t>(size_t(K * N), 255)};
  a.bytes[7] = 0;
  b.bytes[11] = 3;
  for (int32_t zpb : {0, 200}) {
    const std::vector<int32_t> za(size_t(M), 0), zb(size_t(N), zpb);
    const std::vector<int32_t> want = exact_product(a, b, za, zb, M, K, N);
    std::vector<int32_t> got(size_t(M * N));
    const std::vector<int16_t> panels = cpu::pack_pair_panels(b.bytes.data(), b.t, K, N);
    cpu::pair_panel_gemm(a.bytes.data(), a.t, za.data(), zb.data(), panels.data(), got.data(), M, K,
                         N, pool);
    EXPECT_EQ(got, want) << "zero point of B " << zpb;
    if (zpb == 0) {
      EXPECT_LT(int64_t(want[1]), 0) << "the case must wrap";
    }
  }
}

}  // namespace
}  // namespace ubfuse
