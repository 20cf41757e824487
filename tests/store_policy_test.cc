// The per-core choice of stores in compute-bound loops (kernels/cpu/store_policy.h): the profile
// each CPU gets, the names and their errors, and that every profile's loops write the same bits
// as plain stores would, streamed or not, on every machine the tests run on.
#include "kernels/cpu/store_policy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "fused_kernel_util.h"
#include "kernels/cpu/kernel_util.h"
#include "test_util.h"
#include "ubfuse/builder.h"

namespace ubfuse {
namespace {

using cpu::ComputeLoop;
using cpu::store_profile_for;
using cpu::streams_compute_bound;

// Restores the default profile and streaming threshold when a test ends.
struct ProfileGuard {
  size_t saved = cpu::stream_min_bytes();
  ~ProfileGuard() {
    cpu::set_store_profile("");
    cpu::set_stream_min_bytes(saved);
  }
};

TEST(StorePolicy, CpusGetTheirMeasuredProfile) {
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 25, 1, false).name, "zen3");     // EPYC Milan
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 25, 0x21, false).name, "zen3");  // Vermeer
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 25, 17, true).name, "zen4");     // EPYC Genoa
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 25, 0x61, true).name, "zen4");   // Raphael
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 25, 0xa0, true).name, "zen4");   // Bergamo
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 26, 2, true).name, "zen5");      // Turin
  EXPECT_STREQ(store_profile_for("GenuineIntel", 6, 143, true).name, "avx512");   // SPR
  EXPECT_STREQ(store_profile_for("GenuineIntel", 6, 151, false).name, "avx2");    // Alder Lake
  EXPECT_STREQ(store_profile_for("AuthenticAMD", 23, 49, false).name, "avx2");    // Zen 2
  // The detected profile is one of the table's.
  const std::string names = cpu::store_profile_names();
  EXPECT_NE(names.find(cpu::detected_store_profile().name), std::string::npos) << names;
}

TEST(StorePolicy, ProfilesChooseByLoopAndDtype) {
  ProfileGuard guard;
  cpu::set_store_profile("zen4");
  EXPECT_TRUE(streams_compute_bound(ComputeLoop::kUnary, DType::f32));
  EXPECT_TRUE(streams_compute_bound(ComputeLoop::kUnary, DType::bf16));
  EXPECT_TRUE(streams_compute_bound(ComputeLoop::kSoftmax, DType::f32));
  EXPECT_FALSE(streams_compute_bound(ComputeLoop::kSoftmax, DType::bf16));
  EXPECT_TRUE(streams_compute_bound(ComputeLoop::kFused, DType::f32));
  EXPECT_FALSE(streams_compute_bound(ComputeLoop::kFused, DType::bf16));
  for (ComputeLoop l : {ComputeLoop::kUnary, ComputeLoop::kSoftmax, ComputeLoop::kFused}) {
    EXPECT_FALSE(streams_compute_bound(l, DType::f16));
    EXPECT_FALSE(streams_compute_bound(l, DType::boolean));
  }
  cpu::set_store_profile("zen3");
  EXPECT_TRUE(streams_compute_bound(ComputeLoop::kUnary, DType::f32));
  EXPECT_FALSE(streams_compute_bound(ComputeLoop::kSoftmax, DType::f32));
  cpu::set_store_profile("zen5");
  EXPECT_TRUE(streams_compute_bound(ComputeLoop::kFused, DType::bf16));
  EXPECT_STREQ(cpu::store_profile().name, "zen5");
  for (ComputeLoop l : {ComputeLoop::kUnary, ComputeLoop::kSoftmax, ComputeLoop::kFused}) {
    cpu::set_store_profile("plain");
    EXPECT_FALSE(streams_compute_bound(l, DType::f32));
    cpu::set_store_profile("stream");
    EXPECT_TRUE(streams_compute_bound(l, DType::bf16));
    EXPECT_FALSE(streams_compute_bound(l, DType::f16));
  }
}

TEST(StorePolicy, BadNamesListTheValidOnes) {
  ProfileGuard guard;
  EXPECT_TRUE(testing::throws_with(
      [] { cpu::set_store_profile("zen9"); },
      {"'zen9' is not a store profile", "zen3, zen4, zen5, avx2", "without one, this CPU gets '"}));
  cpu::set_store_profile("");
  {
    testing::ScopedEnv env("UBFUSE_STORE_PROFILE", "fast");
    EXPECT_TRUE(testing::throws_with([] { cpu::store_profile(); },
                                     {"UBFUSE_STORE_PROFILE: 'fast' is not a store profile"}));
  }
  testing::ScopedEnv env("UBFUSE_STORE_PROFILE", "zen3");
  EXPECT_STREQ(cpu::store_profile().name, "zen3");
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Runs `g` under every profile with the streaming threshold at 1 KiB, so each profile's
// streamed loops run; each must write what the all-plain profile writes, and that must match
// the reference.
void check_every_profile(const Graph& g, const std::map<std::string, Tensor>& in,
                         const Options& opts, size_t kernels, const std::string& what) {
  ProfileGuard guard;
  cpu::set_stream_min_bytes(1024);
  cpu::set_store_profile("plain");
  CompiledModel m = compile(g, opts);
  ASSERT_EQ(m.kernels().size(), kernels) << what;
  const auto plain = m.run(in);
  EXPECT_TRUE(testing::matches_reference(g, in, opts)) << what;
  for (const char* p : {"zen3", "zen4", "zen5", "avx2", "avx512", "generic", "stream"}) {
    cpu::set_store_profile(p);
    const auto got = m.run(in);
    for (const auto& [name, t] : plain) {
      EXPECT_TRUE(same_bits(got.at(name), t)) << what << ", profile " << p << ", output " << name;
    }
  }
}

using Make = std::function<GraphBuilder::V(GraphBuilder&, GraphBuilder::V)>;

TEST(StorePolicy, EagerLoopsWriteTheSameBitsUnderEveryProfile) {
  const std::pair<const char*, Make> ops[] = {
      {"silu", [](GraphBuilder& b, GraphBuilder::V x) { return b.silu(x); }},
      {"gelu", [](GraphBuilder& b, GraphBuilder::V x) { return b.gelu(x); }},
      {"exp", [](GraphBuilder& b, GraphBuilder::V x) { return b.exp(x); }},
      {"softmax", [](GraphBuilder& b, GraphBuilder::V x) { return b.softmax(x); }}};
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t cols : {1024, 1031, 48}) {  // rows aligned for a streamed pair, or not
      for (const auto& [name, make] : ops) {
        GraphBuilder b;
        auto x = b.input("x", t, {37, cols});
        b.output("y", make(b, x));
        const Graph g = b.build();
        check_every_profile(
            g, {{"x", Tensor::random(t, {37, cols}, 5, -4, 4)}}, testing::eager_opts(), 1,
            std::string(name) + " " + std::string(dtype_name(t)) + " cols " + std::to_string(cols));
      }
    }
  }
}

TEST(StorePolicy, FusedSeedBlockWritesTheSameBitsUnderEveryProfile) {
  for (const char* engine : {"cpp", "interpreter"}) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      for (int64_t cols : {1024, 1031}) {
        const Sizes s{2, 19, cols};
        std::map<std::string, Tensor> in{{"x", Tensor::random(t, s, 1)},
                                         {"residual", Tensor::random(t, s, 2)},
                                         {"w", Tensor::random(t, {cols}, 3, 0.5, 1.5)},
                                         {"b", Tensor::random(t, {cols}, 4)}};
        check_every_profile(testing::seed_block({2, 19, cols}, t), in, testing::engine_opts(engine),
                            1,
                            std::string(engine) + " " + std::string(dtype_name(t)) + " cols " +
                                std::to_string(cols));
      }
    }
  }
}

// Software prefetches ahead of streaming loops: non-temporal on AMD cores, into every cache level
// elsewhere (the Intel Xeon with AMX ran the seed block 3x slower with the non-temporal hint), and
// generated kernels carry the hint of the CPU they are compiled on.
TEST(StorePolicy, PrefetchHintPerVendor) {
  EXPECT_EQ(cpu::prefetch_locality_for("AuthenticAMD"), 0);
  EXPECT_EQ(cpu::prefetch_locality_for("GenuineIntel"), 3);
  EXPECT_EQ(cpu::prefetch_locality_for(""), 3);
  const int mine = cpu::prefetch_locality();
  EXPECT_TRUE(mine == 0 || mine == 3) << mine;
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {4, 4096});
  auto r = b.input("r", DType::f32, {4, 4096});
  b.output("y", b.silu(b.layer_norm(b.add(x, r), b.constant(Tensor::random(DType::f32, {4096}, 1)),
                                    b.constant(Tensor::random(DType::f32, {4096}, 2)))));
  const std::string code = testing::generated_code(b.build());
  const std::string want = ", 0, " + std::to_string(mine) + ");";
  const std::string other = ", 0, " + std::to_string(mine == 0 ? 3 : 0) + ");";
  EXPECT_NE(code.find("__builtin_prefetch(p0 + i0 + 1024" + want), std::string::npos) << code;
  EXPECT_EQ(code.find("__builtin_prefetch(p0 + i0 + 1024" + other), std::string::npos) << code;
}

}  // namespace
}  // namespace ubfuse
