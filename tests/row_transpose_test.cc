// A Transpose that keeps the last axis ([b, s, h, d] -> [b, h, s, d], the attention heads') joins
// the fused group that reads it as a strided read of its input: no kernel and no copy of its
// own. Checked in every engine and dtype, with symbolic dims, against the reference; and where
// it must stay apart (its input computed in the group, read untransposed too, a MatMul epilogue,
// its rule off), with the reason.
#include <gtest/gtest.h>

#include <fstream>

#include "codegen/ubk_abi.h"
#include "fused_kernel_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using namespace ubfuse::testing;

std::string decisions_str(const CompiledModel& m) {
  std::string s;
  for (auto& d : m.decisions()) s += d.message + "\n";
  return s;
}

bool has_decision(const CompiledModel& m, FusionReason r, const std::string& fragment) {
  for (auto& d : m.decisions()) {
    if (d.reason == r && d.message.find(fragment) != std::string::npos) return true;
  }
  return false;
}

// silu(transpose(x)) * c, the heads' transpose of a projection and a per-head scale.
Graph heads_block(DType t, std::vector<int64_t> perm = {0, 2, 1, 3}) {
  GraphBuilder b;
  auto x = b.input("x", t, {"batch", "seq", 3, 16});
  auto tx = b.transpose(x, perm);
  Shape cs(tx->shape.size(), Dim(int64_t(1)));
  cs[cs.size() - 3] = tx->shape[tx->shape.size() - 3];
  cs.back() = Dim(int64_t(16));
  auto c = b.input("c", t, cs);
  b.output("y", b.mul(b.silu(tx), c));
  return b.build();
}

TEST(RowTranspose, JoinsTheGroupThatReadsIt) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (auto perm : std::vector<std::vector<int64_t>>{{0, 2, 1, 3}, {2, 0, 1, 3}, {1, 2, 0, 3}}) {
      Graph g = heads_block(t, perm);
      const Sizes xs = {2, 5, 3, 16};
      Sizes cs(4, 1);
      cs[1] = xs[size_t(perm[1])];
      cs[3] = 16;
      std::map<std::string, Tensor> in = {{"x", Tensor::random(t, xs, 1)},
                                          {"c", Tensor::random(t, cs, 2)}};
      auto want = ref::run_graph(g, in);
      for (auto& e : kEngines) {
        CompiledModel m = compile(g, engine_opts(e));
        const bool graph = e != "eager";
        EXPECT_EQ(m.kernels().size(), graph ? 1u : 3u) << e << decisions_str(m);
        RunStats st;
        auto got = m.run(in, &st);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y")))
            << e << " " << dtype_name(t) << " perm " << sizes_str(perm);
        if (graph) {  // x and c read once, y written: no transposed copy
          const int64_t es = int64_t(dtype_size(t));
          EXPECT_EQ(st.bytes_read, es * (2 * 5 * 3 * 16 + numel(cs))) << e;
          EXPECT_EQ(st.bytes_written, es * 2 * 5 * 3 * 16) << e;
        }
      }
    }
  }
}

// The transposed value is also returned: the group writes it beside y.
TEST(RowTranspose, TransposedValueAlsoReturned) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, "seq", 3, 8});
  auto tx = b.transpose(x, {0, 2, 1, 3});
  b.output("t", tx);
  b.output("y", b.exp(tx));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {2, 7, 3, 8}, 3)}};
  for (const char* e : {"cpp", "interpreter"}) {
    CompiledModel m = compile(g, engine_opts(e));
    EXPECT_EQ(m.kernels().size(), 1u) << e;
    EXPECT_TRUE(matches_reference(g, in, engine_opts(e))) << e;
  }
}

// Into a row reduction, with the row kept in the UB and re-read (no room in the UB).
TEST(RowTranspose, IntoARowReduction) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {4, "rows", 40});
  b.output("y", b.softmax(b.mul(b.transpose(x, {1, 0, 2}), 0.5)));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {4, 6, 40}, 4)}};
  for (const char* e : {"cpp", "interpreter"}) {
    Options o = engine_opts(e);
    EXPECT_EQ(compile(g, o).kernels().size(), 1u) << e;
    EXPECT_TRUE(matches_reference(g, in, o)) << e;
    o["ub_bytes"] = "64";
    EXPECT_TRUE(matches_reference(g, in, o)) << e << " re-read";
  }
}

// Where the Transpose stays a kernel of its own, and why.
TEST(RowTranspose, StaysApartWithAReason) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {4, 4, 8});
  auto w = b.input("w", DType::f32, {8, 8});
  auto e = b.exp(x);
  b.output("computed", b.neg(b.transpose(e, {1, 0, 2})));  // input computed in the group
  b.output("both", b.add(b.transpose(x, {1, 0, 2}), x));   // read both ways
  b.output("last", b.neg(b.transpose(x, {0, 2, 1})));      // moves the last axis
  auto tm = b.transpose(x, {1, 0, 2});        // before the MatMul: argument order is the compiler's
  b.output("mm", b.add(tm, b.matmul(x, w)));  // a MatMul epilogue
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {4, 4, 8}, 5)},
                                      {"w", Tensor::random(DType::f32, {8, 8}, 6)}};
  for (const char* eng : {"cpp", "interpreter"}) {
    CompiledModel m = compile(g, engine_opts(eng));
    EXPECT_TRUE(matches_reference(g, in, engine_opts(eng))) << eng;
    const std::string all = decisions_str(m);
    EXPECT_TRUE(has_decision(m, FusionReason::NotFusible,
                             "at other rows than it computes, so '" + e->producer->name +
                                 "' must write it to memory from another kernel"))
        << all;
    EXPECT_TRUE(has_decision(m, FusionReason::NotFusible, "'x' is read through the Transpose"))
        << all;
    EXPECT_TRUE(has_decision(m, FusionReason::NotFusible, "(Transpose) is Injective")) << all;
    EXPECT_TRUE(has_decision(m, FusionReason::NotFusible, "would join a MatMul epilogue")) << all;
  }
}

// A transposed input's rows are not contiguous: the generated loop prefetches whole rows a few
// rows ahead instead of 4 KiB ahead in the row (cpp_prefetch.h; 8.3 -> 2.7-4.3 ms for the RoPE
// block through the heads' transpose at [1, 32, 2048, 128] f32, docs/performance.md).
TEST(RowTranspose, GeneratedCodePrefetchesRowsAhead) {
  const std::string code = generated_code(heads_block(DType::f32));
  EXPECT_NE(code.find("cf0 = ubf_cursor_at(&a->in[0], r0 + 4)"), std::string::npos) << code;
  EXPECT_NE(code.find("(const char*)(in0 + cf0.off)"), std::string::npos) << code;
  EXPECT_EQ(code.find("__builtin_prefetch(p0 + i0"), std::string::npos) << code;
  EXPECT_NE(code.find("__builtin_prefetch(p1 + i0"), std::string::npos) << code;  // c
}

// Generated loops walk a row map with a cursor (ubf_cursor_at, then ubf_cursor_next per row); from
// any first row it gives ubf_row_offset's offset at every row, for strided, broadcast (stride 0)
// and size-1 dims and for a plain row stride.
TEST(RowTranspose, RowCursorsGiveTheRowMapsOffsets) {
  UbfTensorArg maps[3] = {};
  maps[0].mode = 1;
  maps[0].ndims = 4;
  const int64_t sizes[4] = {2, 1, 3, 5}, strides[4] = {1000, 77, 0, 36};
  for (int k = 0; k < 4; k++) {
    maps[0].sizes[k] = sizes[k];
    maps[0].strides[k] = strides[k];
  }
  maps[1] = maps[0];
  maps[1].ndims = 1;  // one dim: the offset wraps nowhere inside the domain
  maps[1].sizes[0] = 30;
  maps[1].strides[0] = 3;
  maps[2].mode = 0;
  maps[2].stride = 36;
  for (const UbfTensorArg& t : maps) {
    const int64_t rows = 30;
    for (int64_t r0 = 0; r0 < rows; r0++) {
      UbfRowCursor c = ubf_cursor_at(&t, r0);
      for (int64_t r = r0; r < rows; r++) {
        ASSERT_EQ(c.off, ubf_row_offset(&t, r)) << "mode " << t.mode << " from " << r0;
        ubf_cursor_next(&t, &c);
      }
    }
  }
}

// RowTransposeFusion off in a rules file: the Transpose runs its own kernel again.
TEST(RowTranspose, RuleSwitchesItOff) {
  const std::string path = ::testing::TempDir() + "row_transpose_rules.json";
  std::ofstream(path) << R"({"Switch": {"UBFusion": {"RowTransposeFusion": "off"}}})";
  Graph g = heads_block(DType::f32);
  Options o = engine_opts("interpreter");
  o["ge.fusionSwitchFile"] = path;
  CompiledModel m = compile(g, o);
  EXPECT_EQ(m.kernels().size(), 2u);
  EXPECT_TRUE(has_decision(m, FusionReason::DisabledByRule, "RowTransposeFusion is off"))
      << decisions_str(m);
}

}  // namespace
}  // namespace ubfuse
