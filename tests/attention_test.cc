// Attention as one flash-style kernel (rule AttentionFusion): every chain form the exporters
// write (scale by Div or Mul, masks of every broadcast shape, mask before or after the scale, no
// mask), odd and size-1 lengths, head sizes that are not a vector multiple, f32/bf16/f16, batch
// dims that broadcast (grouped-query K/V), symbolic lengths from one compile, fully masked rows;
// each against the double-precision reference, as one kernel.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <tuple>

#include "hwy/targets.h"
#include "profiler_test_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using namespace ubfuse::testing;

enum class Mask { None, Padding, Causal, Full, RowOnly, WhereKeep, WhereFill };
enum class Scale { Div, Mul, MulFirstOperand, MaskFirst };

struct MaskForm {
  Mask mask = Mask::None;
  Scale scale = Scale::Div;
  float where_fill = -3.0e4f;  // the scalar of a Where mask
};

// softmax(q k^T / sqrt(d) + mask) v over q [B, H, Lq, D], kt [B, KH, D, Lk], v [B, KH, Lk, Dv].
Graph attention(DType t, const Shape& q, const Shape& kt, const Shape& v, MaskForm f) {
  GraphBuilder b;
  auto Q = b.input("q", t, q);
  auto K = b.input("kt", t, kt);
  auto V = b.input("v", t, v);
  const double d = double(q.back().value());
  auto s = b.matmul(Q, K);
  auto scale = [&](GraphBuilder::V x) {
    switch (f.scale) {
      case Scale::Div:
      case Scale::MaskFirst:
        return b.div(x, std::sqrt(d));
      case Scale::Mul:
        return b.mul(x, 1.0 / std::sqrt(d));
      case Scale::MulFirstOperand:
        return b.mul(b.constant(Tensor::from_floats(t, {1}, {float(1.0 / std::sqrt(d))})), x);
    }
    return x;
  };
  if (f.scale != Scale::MaskFirst) s = scale(s);
  if (f.mask != Mask::None) {
    Shape ms;
    const Dim& lq = q[q.size() - 2];
    const Dim& lk = kt.back();
    switch (f.mask) {
      case Mask::Padding:
        ms = {q[0], Dim(1), Dim(1), lk};  // [B, 1, 1, Lk]
        break;
      case Mask::Causal:
        ms = {lq, lk};  // [Lq, Lk]
        break;
      case Mask::Full:
        ms = {q[0], q[1], lq, lk};
        break;
      case Mask::RowOnly:
        ms = {lq, Dim(1)};  // one value per query row
        break;
      case Mask::WhereKeep:  // where(causal, scores, min): GPT-2's masked_fill form
      case Mask::WhereFill:  // where(~causal, min, scores)
        ms = {lq, lk};
        break;
      case Mask::None:
        break;
    }
    if (f.mask == Mask::WhereKeep || f.mask == Mask::WhereFill) {
      auto cond = b.input("mask", DType::boolean, ms);
      auto fill = b.constant(Tensor::from_floats(t, {}, {f.where_fill}));
      s = f.mask == Mask::WhereKeep ? b.where(cond, s, fill) : b.where(cond, fill, s);
    } else {
      s = b.add(s, b.input("mask", t, ms));
    }
  }
  if (f.scale == Scale::MaskFirst) s = scale(s);
  b.output("y", b.matmul(b.softmax(s), V));
  return b.build();
}

std::map<std::string, Tensor> inputs(DType t, const Sizes& q, const Sizes& kt, const Sizes& v,
                                     Mask mask) {
  std::map<std::string, Tensor> in = {{"q", Tensor::random(t, q, 1, -2, 2)},
                                      {"kt", Tensor::random(t, kt, 2, -2, 2)},
                                      {"v", Tensor::random(t, v, 3)}};
  const int64_t lq = q[q.size() - 2], lk = kt.back();
  const float ninf = -std::numeric_limits<float>::infinity();
  switch (mask) {
    case Mask::Padding: {  // the last third of each batch's keys masked
      Tensor m = Tensor::zeros(t, {q[0], 1, 1, lk});
      for (int64_t b = 0; b < q[0]; b++) {
        for (int64_t j = lk - lk / 3; j < lk; j++) m.set(b * lk + j, -1e9);
      }
      in["mask"] = m;
      break;
    }
    case Mask::Causal: {  // key j visible to query i when j <= i + (lk - lq)
      Tensor m = Tensor::zeros(t, {lq, lk});
      for (int64_t i = 0; i < lq; i++) {
        for (int64_t j = 0; j < lk; j++) {
          if (j > i + (lk - lq)) m.set(i * lk + j, ninf);
        }
      }
      in["mask"] = m;
      break;
    }
    case Mask::Full:
      in["mask"] = Tensor::random(t, {q[0], q[1], lq, lk}, 4, -3, 3);
      break;
    case Mask::RowOnly:
      in["mask"] = Tensor::random(t, {lq, 1}, 5, -3, 3);
      break;
    case Mask::WhereKeep:
    case Mask::WhereFill: {  // keep key j for query i when j <= i + (lk - lq)
      Tensor m = Tensor::zeros(DType::boolean, {lq, lk});
      for (int64_t i = 0; i < lq; i++) {
        for (int64_t j = 0; j < lk; j++) {
          const bool keep = j <= i + (lk - lq);
          m.set(i * lk + j, (mask == Mask::WhereKeep) == keep ? 1 : 0);
        }
      }
      in["mask"] = m;
      break;
    }
    case Mask::None:
      break;
  }
  return in;
}

// Compiles g in graph mode; checks one attention kernel and the reference's answer.
void check(const Graph& g, const std::map<std::string, Tensor>& in, const std::string& where,
           size_t kernels = 1) {
  CompiledModel m = compile(g, graph_opts());
  ASSERT_EQ(m.kernels().size(), kernels) << where;
  bool found = false;
  for (auto& k : m.kernels()) found |= k.variant == "flash attention";
  EXPECT_TRUE(found) << where;
  const double scale = in.at("q").dtype() == DType::f32 ? 1.0 : 2.0;
  auto want = ref::run_graph(g, in);
  EXPECT_TRUE(close_to_ref(m.run(in).at("y"), want.at("y"), scale)) << where;
}

TEST(Attention, EveryMaskAndScaleFormMatchesTheReference) {
  const Sizes q = {2, 3, 37, 36}, kt = {2, 3, 36, 150}, v = {2, 3, 150, 36};
  for (Mask mask : {Mask::None, Mask::Padding, Mask::Causal, Mask::Full, Mask::RowOnly,
                    Mask::WhereKeep, Mask::WhereFill}) {
    for (Scale scale : {Scale::Div, Scale::Mul, Scale::MulFirstOperand, Scale::MaskFirst}) {
      if (mask == Mask::None && scale == Scale::MaskFirst) continue;
      Graph g = attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {mask, scale});
      check(g, inputs(DType::f32, q, kt, v, mask),
            "mask " + std::to_string(int(mask)) + " scale " + std::to_string(int(scale)));
    }
  }
}

TEST(Attention, OddAndSizeOneLengthsAndHeadSizes) {
  struct Sz {
    int64_t lq, lk, d, dv;
  };
  for (Sz s : {Sz{1, 1, 8, 8}, Sz{4, 0, 8, 8}, Sz{3, 6, 0, 5}, Sz{0, 9, 4, 4}, Sz{1, 300, 64, 64},
               Sz{5, 1, 36, 20}, Sz{129, 129, 128, 128}, Sz{3, 257, 1, 3}, Sz{17, 130, 80, 100}}) {
    const Sizes q = {1, 2, s.lq, s.d}, kt = {1, 2, s.d, s.lk}, v = {1, 2, s.lk, s.dv};
    for (DType t : {DType::f32, DType::f16}) {
      Graph g = attention(t, to_shape(q), to_shape(kt), to_shape(v), {Mask::Causal, Scale::Div});
      check(g, inputs(t, q, kt, v, Mask::Causal),
            std::string(dtype_name(t)) + " lq " + std::to_string(s.lq) + " lk " +
                std::to_string(s.lk) + " d " + std::to_string(s.d) + " dv " + std::to_string(s.dv));
    }
  }
}

// The kernel on Highway's other targets: at AVX2's 8 lanes value tails of up to 4 columns (dv 36,
// 20, 3) are dot products over the keys, wider ones (6) a padded vector; at 1 lane there is none.
TEST(Attention, OtherHighwayTargets) {
  for (int64_t target : {int64_t(HWY_AVX2), int64_t(HWY_SCALAR)}) {
    if ((hwy::SupportedTargets() & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (int64_t dv : {36, 20, 3, 6, 24}) {
      for (Mask mask : {Mask::None, Mask::Causal}) {
        const Sizes q = {1, 2, 37, 20}, kt = {1, 2, 20, 150}, v = {1, 2, 150, dv};
        Graph g = attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {mask});
        check(g, inputs(DType::f32, q, kt, v, mask),
              "dv " + std::to_string(dv) + " mask " + std::to_string(int(mask)));
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// With no mask and only a scale, value columns that are no whole number of vectors (36, 20, 8,
// 100) run with the query rows across the lanes (attention.cc, ChunkLanes) where the rows fill
// whole tiles of 32 (16 on AVX2) to 7/8 or more: K^T given or K as rows (the exporters'
// Transpose), heads read in place (the projections' [B, L, H, D] and the output's Transpose),
// key blocks of every size left over, one key, scales by Div and Mul, on AVX-512 and AVX2.
// Inputs whose scores might not be finite (a NaN, an infinity, a product past float's max) take
// the row tiles, as does a decoder step's row.
TEST(Attention, RowsAcrossLanesMatchTheReference) {
  struct Sz {
    int64_t lq, lk, d, dv;
  };
  const std::vector<int64_t> targets = {int64_t(HWY_AVX3), int64_t(HWY_AVX2)};
  for (int64_t target : targets) {
    if ((hwy::SupportedTargets() & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (Sz s : {Sz{64, 150, 36, 36}, Sz{96, 257, 20, 36}, Sz{128, 100, 36, 8}, Sz{60, 64, 36, 100},
                 Sz{64, 1, 36, 36}, Sz{512, 300, 36, 36}}) {
      for (int form = 0; form < 3; form++) {
        // form 0: K^T given, scale by Div; 1: K as rows, scale by Mul; 2: Q, K and V as the
        // projections leave them ([1, L, H, D]) and the output transposed back.
        const int64_t H = 2;
        GraphBuilder b;
        GraphBuilder::V q, kt, v;
        if (form < 2) {
          q = b.input("q", f32, {1, H, s.lq, s.d});
          v = b.input("v", f32, {1, H, s.lk, s.dv});
          kt = form == 0 ? b.input("k", f32, {1, H, s.d, s.lk})
                         : b.transpose(b.input("k", f32, {1, H, s.lk, s.d}), {0, 1, 3, 2});
        } else {
          q = b.transpose(b.input("q", f32, {1, s.lq, H, s.d}), {0, 2, 1, 3});
          v = b.transpose(b.input("v", f32, {1, s.lk, H, s.dv}), {0, 2, 1, 3});
          kt = b.transpose(b.input("k", f32, {1, s.lk, H, s.d}), {0, 2, 3, 1});
        }
        auto sc = b.matmul(q, kt);
        sc =
            form == 1 ? b.mul(sc, 1.0 / std::sqrt(double(s.d))) : b.div(sc, std::sqrt(double(s.d)));
        auto y = b.matmul(b.softmax(sc), v);
        b.output("y", form == 2 ? b.transpose(y, {0, 2, 1, 3}) : y);
        Graph g = b.build();
        std::map<std::string, Tensor> in;
        for (Value* x : g.inputs())
          in[x->name] = Tensor::random(f32, static_sizes(x->shape), 7, -2, 2);
        const std::string where = "lq " + std::to_string(s.lq) + " lk " + std::to_string(s.lk) +
                                  " d " + std::to_string(s.d) + " dv " + std::to_string(s.dv) +
                                  " form " + std::to_string(form);
        check(g, in, where);
      }
    }
    // Scores that may not be finite: NaN and infinity in q, k or v, and products past float's
    // max that the scale brings back (the graph's are infinite).
    const Sizes q = {1, 2, 64, 36}, kt = {1, 2, 36, 80}, v = {1, 2, 80, 36};
    Graph g = attention(f32, to_shape(q), to_shape(kt), to_shape(v), {});
    for (int form = 0; form < 4; form++) {
      auto in = inputs(f32, q, kt, v, Mask::None);
      const float inf = std::numeric_limits<float>::infinity();
      if (form == 0) in["q"].set(5 * 36 + 3, std::nan(""));
      if (form == 1) in["kt"].set(7, inf);
      if (form == 2) in["v"].set(11 * 36 + 2, -inf);
      if (form == 3) {
        in["q"].set(0, 1e19);
        in["kt"].set(3, 6e19);
      }
      CompiledModel m = compile(g, graph_opts());
      const Tensor got = m.run(in).at("y");
      const Tensor eager = compile(g, eager_opts()).run(in).at("y");
      for (int64_t i = 0; i < got.numel(); i++) {
        ASSERT_EQ(std::isnan(got.get(i)), std::isnan(eager.get(i)))
            << "form " << form << " element " << i << ": " << got.get(i) << " against eager's "
            << eager.get(i);
      }
      EXPECT_TRUE(close_to_ref(got, ref::run_graph(g, in).at("y"))) << "form " << form;
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// Grouped-query attention with K/V heads broadcast by a size-1 dim: q [B, KH, G, Lq, D].
TEST(Attention, BatchDimsBroadcast) {
  const Sizes q = {2, 2, 3, 9, 16}, kt = {2, 2, 1, 16, 40}, v = {2, 2, 1, 40, 16};
  Graph g = attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {});
  check(g, inputs(DType::f32, q, kt, v, Mask::None), "gqa");
}

// K as the exporters keep it ([B, H, Lk, D]) with the Transpose to K^T in the graph: the kernel
// reads K's rows (one dot product per score for a decoder step, a transposed block otherwise),
// so the Transpose is no kernel of its own; one whose K^T is needed elsewhere stays one. A head
// size of 18 and 150 keys leave remainders to the packing's 4 x 4 register transposes.
TEST(Attention, TransposeOfKJoinsTheKernel) {
  for (int64_t lq : {1, 3, 37}) {
    for (DType t : {DType::f32, DType::f16}) {
      for (bool kt_out : {false, true}) {
        GraphBuilder b;
        auto q = b.input("q", t, {1, 2, lq, 18});
        auto k = b.input("k", t, {1, 2, 150, 18});
        auto v = b.input("v", t, {1, 2, 150, 24});
        auto kt = b.transpose(k, {0, 1, 3, 2});
        auto s = b.add(b.div(b.matmul(q, kt), 4.0), b.input("mask", t, {lq, 150}));
        b.output("y", b.matmul(b.softmax(s), v));
        if (kt_out) b.output("kt", kt);
        Graph g = b.build();
        std::map<std::string, Tensor> in = {{"q", Tensor::random(t, {1, 2, lq, 18}, 1, -2, 2)},
                                            {"k", Tensor::random(t, {1, 2, 150, 18}, 2, -2, 2)},
                                            {"v", Tensor::random(t, {1, 2, 150, 24}, 3)},
                                            {"mask", Tensor::random(t, {lq, 150}, 4, -3, 0)}};
        const std::string where = std::string(dtype_name(t)) + " lq " + std::to_string(lq) +
                                  (kt_out ? " with K^T an output" : "");
        CompiledModel m = compile(g, graph_opts());
        EXPECT_EQ(m.kernels().size(), kt_out ? 2u : 1u) << where;
        auto want = ref::run_graph(g, in);
        auto got = m.run(in);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y"), t == DType::f32 ? 1 : 2)) << where;
      }
    }
  }
}

// Q, K and V as the projections leave them ([B, L, H, D]) with the head Transposes in the graph,
// as BERT-style exports write them: [0, 2, 1, 3] for Q and V; for K either [0, 2, 3, 1] straight
// to K^T or [0, 2, 1, 3] then [0, 1, 3, 2]. The kernel reads the rows in place (H * D apart): one
// kernel, no Transpose. One head broadcast to all (H of 1); a Transpose whose result is needed
// elsewhere stays a kernel of its own.
TEST(Attention, HeadTransposesJoinTheKernel) {
  for (int64_t lq : {1, 5, 37}) {
    for (DType t : {DType::f32, DType::f16}) {
      for (int form = 0; form < 4; form++) {
        // form 0: K straight to K^T; 1: K in two Transposes; 2: Q's heads also an output; 3: V
        // with one head read by all.
        const int64_t lk = 150, heads = 3, d = 20, dv = 24, vh = form == 3 ? 1 : heads;
        GraphBuilder b;
        auto q = b.input("q", t, {2, lq, heads, d});
        auto k = b.input("k", t, {2, lk, heads, d});
        auto v = b.input("v", t, {2, lk, vh, dv});
        auto qh = b.transpose(q, {0, 2, 1, 3});
        auto kt = form == 1 ? b.transpose(b.transpose(k, {0, 2, 1, 3}), {0, 1, 3, 2})
                            : b.transpose(k, {0, 2, 3, 1});
        auto s = b.add(b.mul(b.matmul(qh, kt), 0.25), b.input("mask", t, {2, 1, 1, lk}));
        b.output("y", b.matmul(b.softmax(s), b.transpose(v, {0, 2, 1, 3})));
        if (form == 2) b.output("qh", qh);
        Graph g = b.build();
        std::map<std::string, Tensor> in = {{"q", Tensor::random(t, {2, lq, heads, d}, 1, -2, 2)},
                                            {"k", Tensor::random(t, {2, lk, heads, d}, 2, -2, 2)},
                                            {"v", Tensor::random(t, {2, lk, vh, dv}, 3)},
                                            {"mask", Tensor::random(t, {2, 1, 1, lk}, 4, -3, 0)}};
        const std::string where = std::string(dtype_name(t)) + " lq " + std::to_string(lq) +
                                  " form " + std::to_string(form);
        CompiledModel m = compile(g, graph_opts());
        EXPECT_EQ(m.kernels().size(), form == 2 ? 2u : 1u) << where;
        auto want = ref::run_graph(g, in);
        auto got = m.run(in);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y"), t == DType::f32 ? 1 : 2)) << where;
      }
    }
  }
}
// The heads layout with symbolic batch and lengths: one compile serves every size.
TEST(Attention, HeadTransposesWithSymbolicLengths) {
  GraphBuilder b;
  auto q = b.input("q", DType::f32, {Dim("b"), Dim("lq"), Dim(4), Dim(16)});
  auto k = b.input("k", DType::f32, {Dim("b"), Dim("lk"), Dim(4), Dim(16)});
  auto v = b.input("v", DType::f32, {Dim("b"), Dim("lk"), Dim(4), Dim(16)});
  auto s = b.div(b.matmul(b.transpose(q, {0, 2, 1, 3}), b.transpose(k, {0, 2, 3, 1})), 4.0);
  b.output("y", b.matmul(b.softmax(s), b.transpose(v, {0, 2, 1, 3})));
  Graph g = b.build();
  CompiledModel m = compile(g, graph_opts());
  ASSERT_EQ(m.kernels().size(), 1u);
  for (auto [batch, lq, lk] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {2, 7, 300}, {3, 130, 130}}) {
    std::map<std::string, Tensor> in = {
        {"q", Tensor::random(DType::f32, {batch, lq, 4, 16}, 1, -2, 2)},
        {"k", Tensor::random(DType::f32, {batch, lk, 4, 16}, 2, -2, 2)},
        {"v", Tensor::random(DType::f32, {batch, lk, 4, 16}, 3)}};
    EXPECT_TRUE(close_to_ref(m.run(in).at("y"), ref::run_graph(g, in).at("y")))
        << batch << " " << lq << " " << lk;
  }
}

// The context's head Transpose back to [B, L, H, Dv] (which a Reshape then merges, as a view)
// joins the kernel, which then writes each head's rows H * Dv apart: one kernel for the whole
// chain. When the context is also read elsewhere the Transpose stays a kernel of its own.
TEST(Attention, OutputHeadTransposeJoinsTheKernel) {
  for (DType t : {DType::f32, DType::f16}) {
    for (bool context_out : {false, true}) {
      for (int64_t lq : {1, 6, 70}) {
        const int64_t heads = 3, lk = 90, d = 16, dv = 20;
        GraphBuilder b;
        auto q = b.input("q", t, {"batch", heads, "lq", d});
        auto k = b.input("k", t, {"batch", heads, lk, d});
        auto v = b.input("v", t, {"batch", heads, lk, dv});
        auto s = b.mul(b.matmul(q, b.transpose(k, {0, 1, 3, 2})), 0.25);
        auto c = b.matmul(b.softmax(s), v);
        b.output("y", b.transpose(c, {0, 2, 1, 3}));
        if (context_out) b.output("c", c);
        Graph g = b.build();
        std::map<std::string, Tensor> in = {{"q", Tensor::random(t, {2, heads, lq, d}, 1, -2, 2)},
                                            {"k", Tensor::random(t, {2, heads, lk, d}, 2, -2, 2)},
                                            {"v", Tensor::random(t, {2, heads, lk, dv}, 3)}};
        const std::string where = std::string(dtype_name(t)) + " context_out " +
                                  std::to_string(context_out) + " lq " + std::to_string(lq);
        CompiledModel m = compile(g, graph_opts());
        std::string names;
        for (const KernelInfo& k : m.kernels()) names += " " + k.name;
        EXPECT_EQ(m.kernels().size(), context_out ? 2u : 1u) << where << names;
        auto want = ref::run_graph(g, in);
        auto got = m.run(in);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y"), t == DType::f32 ? 1 : 2)) << where;
        if (context_out) {
          EXPECT_TRUE(close_to_ref(got.at("c"), want.at("c"), t == DType::f32 ? 1 : 2)) << where;
        }
      }
    }
  }
}

// A fused QKV projection split as ViT and BERT exporters write it: [B, L, 3 * H * D] reshaped to
// [B, L, 3, H, D], transposed to [3, B, H, L, D] and gathered by a scalar index into q, k and v.
// Simplify moves the Gathers before the Transpose and the attention kernel reads the projection in
// place (part p at p * H * D, rows 3 * H * D apart): one kernel besides the projection's Add. A
// part also needed elsewhere is moved by its own kernel.
TEST(Attention, FusedProjectionPartsJoinTheKernel) {
  for (bool symbolic : {false, true}) {
    // 1: negative indices; 2: v also an output; 3: v's index out of range
    for (int form = 0; form < 4; form++) {
      for (int64_t lq : {1, 7, 130}) {
        const int64_t heads = 3, d = 20;
        GraphBuilder b;
        const Shape xs =
            symbolic ? Shape{"batch", "len", 3 * heads * d} : Shape{2, lq, 3 * heads * d};
        auto x = b.input("x", DType::f32, xs);
        auto bias = b.input("bias", DType::f32, {3 * heads * d});
        auto parts = b.transpose(b.reshape(b.add(x, bias), {0, 0, 3, heads, d}), {2, 0, 3, 1, 4});
        auto part = [&](int64_t i) {
          Tensor c(DType::i64, {});
          c.set(0, double(form == 1 ? i - 3 : i));
          return b.gather(parts, b.constant(c), 0);
        };
        auto q = part(0), k = part(1), v = part(form == 3 ? 3 : 2);
        auto s = b.div(b.matmul(q, b.transpose(k, {0, 1, 3, 2})), 4.0);
        // Back to [B, L, H, D] as ViT does (before its Reshape): the Transpose joins too.
        b.output("y", b.transpose(b.matmul(b.softmax(s), v), {0, 2, 1, 3}));
        if (form == 2) b.output("v", v);
        Graph g = b.build();
        std::map<std::string, Tensor> in = {
            {"x", Tensor::random(DType::f32, {2, lq, 3 * heads * d}, 1, -2, 2)},
            {"bias", Tensor::random(DType::f32, {3 * heads * d}, 2)}};
        const std::string where = "symbolic " + std::to_string(symbolic) + " form " +
                                  std::to_string(form) + " lq " + std::to_string(lq);
        CompiledModel m = compile(g, graph_opts());
        EXPECT_EQ(m.kernels().size(), form == 2 ? 4u : 2u) << where;
        if (form == 3) {
          EXPECT_TRUE(throws_with([&] { m.run(in); }, {"part index 3 out of range", "3 parts"}))
              << where;
          continue;
        }
        auto want = ref::run_graph(g, in);
        auto got = m.run(in);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y"))) << where;
        if (form == 2) {
          EXPECT_TRUE(close_to_ref(got.at("v"), want.at("v"))) << where;
        }
      }
    }
  }
}

// Grouped-query heads as exporters write repeat_kv (Reshape to [B, Hkv, 1, L, D], Expand to g,
// Reshape to [B, Hkv * g, L, D]) on K and on V join the kernel, which reads the Hkv heads: one
// kernel, no Expand, every query head against its own K/V head. A repeat whose result is needed
// elsewhere, or that does not keep each head's copies together, stays out.
TEST(Attention, GroupedQueryHeadRepeatsJoinTheKernel) {
  for (auto split : {std::pair<int64_t, int64_t>{2, 2}, {1, 4}, {3, 1}, {2, 3}}) {
    const int64_t hkv = split.first, g = split.second;  // plain locals: lambdas capture them
    for (int64_t lq : {1, 5}) {
      for (bool repeat_k_out : {false, true}) {
        const int64_t h = hkv * g, lk = 37, d = 12;
        GraphBuilder b;
        auto q = b.input("q", DType::f32, {"batch", h, lq, d});
        auto k = b.input("k", DType::f32, {"batch", hkv, lk, d});
        auto v = b.input("v", DType::f32, {"batch", hkv, lk, d});
        auto repeat = [&](GraphBuilder::V x) {
          auto u = b.reshape(x, {0, hkv, 1, lk, d});
          return b.reshape(b.expand(u, Shape{"batch", hkv, g, lk, d}), {0, h, lk, d});
        };
        auto kr = repeat(k);
        auto s = b.add(b.div(b.matmul(q, b.transpose(kr, {0, 1, 3, 2})), 4.0),
                       b.input("mask", DType::f32, {lq, lk}));
        b.output("y", b.matmul(b.softmax(s), repeat(v)));
        if (repeat_k_out) b.output("kr", kr);
        Graph gr = b.build();
        std::map<std::string, Tensor> in = {
            {"q", Tensor::random(DType::f32, {2, h, lq, d}, 1, -2, 2)},
            {"k", Tensor::random(DType::f32, {2, hkv, lk, d}, 2, -2, 2)},
            {"v", Tensor::random(DType::f32, {2, hkv, lk, d}, 3)},
            {"mask", Tensor::random(DType::f32, {lq, lk}, 4, -3, 0)}};
        const std::string where = "hkv " + std::to_string(hkv) + " g " + std::to_string(g) +
                                  " lq " + std::to_string(lq) + (repeat_k_out ? " K out" : "");
        CompiledModel m = compile(gr, graph_opts());
        int expands = 0;
        for (auto& kern : m.kernels()) {
          for (auto& op : kern.op_types)
            expands += op == "Expand" && kern.variant != "flash attention";
        }
        // K's repeat needed as an output keeps its own kernels (an Expand, unless g is 1 and
        // simplify drops it, and the copy into the output); V's still joins.
        if (repeat_k_out) {
          EXPECT_EQ(expands, g > 1 ? 1 : 0) << where;
          if (g > 1) {
            EXPECT_GT(m.kernels().size(), 1u) << where;
          }
        } else {
          EXPECT_EQ(expands, 0) << where;
          EXPECT_EQ(m.kernels().size(), 1u) << where;
        }
        auto want = ref::run_graph(gr, in);
        auto got = m.run(in);
        EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y"))) << where;
      }
    }
  }
  // Q with more batch dims than the repeated K and V: the repeats stay out (the kernel maps heads
  // by the output's dims), and the answer is still right.
  {
    GraphBuilder b;
    auto q = b.input("q", DType::f32, {1, 1, 4, 3, 8});
    auto k = b.input("k", DType::f32, {1, 2, 5, 8});
    auto rep = [&](GraphBuilder::V x) {
      return b.reshape(b.expand(b.reshape(x, {1, 2, 1, 5, 8}), Shape{1, 2, 2, 5, 8}), {1, 4, 5, 8});
    };
    b.output("y", b.matmul(b.softmax(b.matmul(q, b.transpose(rep(k), {0, 1, 3, 2}))), rep(k)));
    Graph gr = b.build();
    std::map<std::string, Tensor> in = {
        {"q", Tensor::random(DType::f32, {1, 1, 4, 3, 8}, 1, -2, 2)},
        {"k", Tensor::random(DType::f32, {1, 2, 5, 8}, 2, -2, 2)}};
    CompiledModel m = compile(gr, graph_opts());
    EXPECT_TRUE(close_to_ref(m.run(in).at("y"), ref::run_graph(gr, in).at("y")));
  }
  // Heads interleaved the other way (copies of all heads one after another: Expand before the
  // head axis) is no repeat_kv: the Expand stays, the answer is still right.
  GraphBuilder b;
  auto q = b.input("q", DType::f32, {1, 4, 3, 8});
  auto k = b.input("k", DType::f32, {1, 2, 9, 8});
  auto tiled =
      b.reshape(b.expand(b.reshape(k, {1, 1, 2, 9, 8}), Shape{1, 2, 2, 9, 8}), {1, 4, 9, 8});
  b.output("y", b.matmul(b.softmax(b.matmul(q, b.transpose(tiled, {0, 1, 3, 2}))), tiled));
  Graph gr = b.build();
  CompiledModel m = compile(gr, graph_opts());
  EXPECT_GT(m.kernels().size(), 1u);
  std::map<std::string, Tensor> in = {{"q", Tensor::random(DType::f32, {1, 4, 3, 8}, 1, -2, 2)},
                                      {"k", Tensor::random(DType::f32, {1, 2, 9, 8}, 2, -2, 2)}};
  EXPECT_TRUE(close_to_ref(m.run(in).at("y"), ref::run_graph(gr, in).at("y")));
}

// One compile, many lengths: the decoder's growing past and a prompt.
TEST(Attention, SymbolicLengthsFromOneCompile) {
  const Shape q = {Dim(1), Dim(4), Dim("seq"), Dim(32)};
  const Shape kt = {Dim(1), Dim(4), Dim(32), Dim("total")};
  const Shape v = {Dim(1), Dim(4), Dim("total"), Dim(32)};
  Graph g = attention(DType::f32, q, kt, v, {Mask::Causal, Scale::Div});
  CompiledModel m = compile(g, graph_opts());
  ASSERT_EQ(m.kernels().size(), 1u);
  for (auto [seq, total] : {std::pair<int64_t, int64_t>{1, 1}, {1, 77}, {16, 16}, {7, 300}}) {
    const Sizes qs = {1, 4, seq, 32}, ks = {1, 4, 32, total}, vs = {1, 4, total, 32};
    auto in = inputs(DType::f32, qs, ks, vs, Mask::Causal);
    auto want = ref::run_graph(g, in);
    EXPECT_TRUE(close_to_ref(m.run(in).at("y"), want.at("y"))) << seq << " " << total;
  }
}

// A row whose keys are all masked with -inf gives NaN, as Softmax and the reference do.
TEST(Attention, FullyMaskedRowIsNaNLikeSoftmax) {
  const Sizes q = {1, 1, 3, 8}, kt = {1, 1, 8, 200}, v = {1, 1, 200, 8};
  Graph g = attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {Mask::Full, Scale::Div});
  auto in = inputs(DType::f32, q, kt, v, Mask::Full);
  for (int64_t j = 0; j < 200; j++)
    in["mask"].set(200 + j, -std::numeric_limits<double>::infinity());
  auto got = compile(g, graph_opts()).run(in).at("y");
  auto want = ref::run_graph(g, in).at("y");
  EXPECT_TRUE(std::isnan(got.get(8))) << got.str();
  EXPECT_TRUE(close_to_ref(got, want));
}

// The scale the kernel applies to q before the product must not move an overflow: with 1/sqrt(d)
// (Div by 2 here), scores whose unscaled product is past float's max are infinite in the graph
// (and the rows NaN) though half of them is not; with a factor of 4 (a Mul, kept as a step), q
// times 4 overflows where the graph's product does not. fuzz_onnx found the first through
// com.microsoft Attention weights of 1e35. K packed (several tiles) and in place (one tile).
TEST(Attention, ScaleOnQKeepsTheGraphsOverflows) {
  for (int64_t lq : {int64_t(1), int64_t(9)}) {
    for (int form = 0; form < 2; form++) {
      const Sizes q = {1, 2, lq, 4}, kt = {1, 2, 4, 20}, v = {1, 2, 20, 4};
      GraphBuilder b;
      auto Q = b.input("q", f32, to_shape(q));
      auto K = b.input("kt", f32, to_shape(kt));
      auto V = b.input("v", f32, to_shape(v));
      auto s = b.matmul(Q, K);
      s = form == 0 ? b.div(s, 2.0) : b.mul(s, 4.0);
      b.output("y", b.matmul(b.softmax(s), V));
      Graph g = b.build();
      std::map<std::string, Tensor> in{{"q", Tensor::random(f32, q, 1)},
                                       {"kt", Tensor::random(f32, kt, 2)},
                                       {"v", Tensor::random(f32, v, 3)}};
      // form 0: q 1e19 and two keys' k 6e19: their unscaled products 6e38 (inf), halved 3e38;
      // form 1: q 1e38 and every key's k 1e-5 there: q times 4 overflows, the products (1e33)
      // times 4 do not.
      in["q"].set(0, form == 0 ? 1e19 : 1e38);
      if (form == 0) {
        for (int64_t j : {3, 11}) in["kt"].set(j, 6e19);
      } else {
        for (int64_t j = 0; j < 20; j++) in["kt"].set(j, 1e-5);
      }
      CompiledModel m = compile(g, graph_opts());
      bool flash = false;
      for (auto& k : m.kernels()) flash |= k.variant == "flash attention";
      EXPECT_TRUE(flash);
      const Tensor got = m.run(in).at("y");
      const Tensor eager = compile(g, eager_opts()).run(in).at("y");
      for (int64_t i = 0; i < got.numel(); i++) {
        ASSERT_EQ(std::isnan(got.get(i)), std::isnan(eager.get(i)))
            << "lq " << lq << " form " << form << " element " << i << ": " << got.get(i)
            << " against eager's " << eager.get(i);
      }
      EXPECT_EQ(std::isnan(got.get(0)), form == 0) << got.get(0);
      EXPECT_TRUE(close_to_ref(got, ref::run_graph(g, in).at("y")));
    }
  }
}

// A deep copy of the inputs (copies of a Tensor share its buffer).
std::map<std::string, Tensor> cloned(const std::map<std::string, Tensor>& in) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : in) out[name] = t.clone();
  return out;
}

// Key blocks masked out for a tile's rows are skipped only where that changes nothing: causal
// masks of -inf and of float's lowest value (as HF exports write them), and of -1e9 and -1e4,
// over 3 blocks of keys, added or as a Where's fill; a mask of -5, whose masked scores still count;
// rows masked out entirely by the lowest value (a softmax over the masked scores, so no block
// may be skipped); an infinite or NaN key or value in a masked-out block, and scores that
// overflow (the rows become NaN as the reference's do); a mask applied after the scale.
TEST(Attention, MaskedOutBlocksSkipOnlyWhereExact) {
  const Sizes q = {1, 2, 300, 16}, kt = {1, 2, 16, 300}, v = {1, 2, 300, 16};
  const float lowest = std::numeric_limits<float>::lowest();
  const float ninf = -std::numeric_limits<float>::infinity();
  for (float fill : {ninf, lowest}) {
    // Where(causal, scores, fill) and Where(~causal, fill, scores) over 3 blocks of keys.
    for (Mask where : {Mask::WhereKeep, Mask::WhereFill}) {
      Graph g =
          attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {where, Scale::Div, fill});
      check(g, inputs(DType::f32, q, kt, v, where), "where " + std::to_string(int(where)));
    }
  }
  for (Scale scale : {Scale::Div, Scale::MaskFirst}) {
    Graph g = attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {Mask::Causal, scale});
    // -1e4 and -1e9: masks of older exports, far enough below the scores to skip blocks too.
    for (float fill : {ninf, lowest, -1e9f, -1e4f}) {
      auto in = inputs(DType::f32, q, kt, v, Mask::Causal);
      for (int64_t i = 0; i < 300 * 300; i++) {
        if (in["mask"].get(i) != 0) in["mask"].set(i, fill);
      }
      const std::string where = std::string(fill == ninf ? "-inf" : std::to_string(fill)) +
                                " scale " + std::to_string(int(scale));
      check(g, in, where + " causal");
      // A mask of -5 with small queries: masked scores far below the row's max but not 0 after
      // the exp, so no block may be skipped.
      auto mild = cloned(in);
      for (int64_t i = 0; i < mild["q"].numel(); i++) mild["q"].set(i, mild["q"].get(i) * 0.01);
      for (int64_t i = 0; i < 300 * 300; i++) {
        if (mild["mask"].get(i) != 0) mild["mask"].set(i, -5.0);
      }
      check(g, mild, where + " mask of -5");
      // Keys masked before a window of 260 as well as past the diagonal, and a bias of -0.3 on
      // the keys from 150 on: rows 256-260 see all keys before theirs, the first 150 with a mask
      // of 0 and the next ones not, so the mask must still be added to their block of keys
      // 128-255, below the diagonal.
      auto window = cloned(in);
      for (int64_t i = 0; i < 300; i++) {
        for (int64_t j = 0; j < 300; j++)
          window["mask"].set(i * 300 + j, j > i || j < i - 260 ? fill : j < 150 ? 0.0 : -0.3);
      }
      check(g, window, where + " window with a bias");
      // Rows 0-9 masked out entirely with the lowest value: a softmax over masked scores.
      auto all = cloned(in);
      for (int64_t i = 0; i < 10 * 300; i++) all["mask"].set(i, lowest);
      check(g, all, where + " rows masked out");
      // An infinite key in the last block, masked out for the first rows: NaN where the
      // reference has it (-inf + inf), whatever the mask.
      for (double bad :
           {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
        auto inf_k = cloned(in);
        inf_k["kt"].set(3 * 300 + 290, bad);  // head 0, depth 3, key 290
        auto want = ref::run_graph(g, inf_k).at("y");
        auto got = compile(g, graph_opts()).run(inf_k).at("y");
        for (int64_t r = 0; r < 3; r++) {  // row 0 of head 0 sees key 0 only, unmasked
          EXPECT_EQ(std::isnan(got.get(r * 16)), std::isnan(want.data[size_t(r * 16)]))
              << where << " row " << r << " key " << bad;
        }
        EXPECT_TRUE(close_to_ref(got, want)) << where << " key " << bad;
        // The same in a value: a masked key adds 0 * v, NaN where v is not.
        auto bad_v = cloned(in);
        bad_v["v"].set(290 * 16 + 2, bad);  // head 0, key 290, column 2
        EXPECT_TRUE(close_to_ref(compile(g, graph_opts()).run(bad_v).at("y"),
                                 ref::run_graph(g, bad_v).at("y")))
            << where << " value " << bad;
      }
      // Queries and keys so large that their product overflows: the scores are infinite, and
      // the masked ones NaN in the reference (-inf + inf) or after the scale.
      auto huge = cloned(in);
      huge["q"].set(40 * 16 + 3, 1e19);     // head 0, row 40, depth 3
      huge["kt"].set(3 * 300 + 280, 1e19);  // head 0, depth 3, key 280
      EXPECT_TRUE(
          close_to_ref(compile(g, graph_opts()).run(huge).at("y"), ref::run_graph(g, huge).at("y")))
          << where << " overflowing scores";
    }
  }
}

// f32 value rows of whole vectors are read in place when they are aligned, and packed when they
// are not: values given as a view one float past an aligned buffer take the packed path, causal
// and not, with 299 query rows (a last tile of 3).
TEST(Attention, ValuesInPlaceOrPackedByAlignment) {
  const Sizes q = {1, 2, 299, 64}, kt = {1, 2, 64, 299}, v = {1, 2, 299, 64};
  for (Mask mask : {Mask::None, Mask::Causal}) {
    Graph g = attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {mask, Scale::Div});
    auto in = inputs(DType::f32, q, kt, v, mask);
    const std::string where = "mask " + std::to_string(int(mask));
    check(g, in, where + " aligned");
    const Tensor& vals = in.at("v");
    std::vector<float> shifted(size_t(vals.numel()) + 16);
    float* at = shifted.data() + 1;
    if (reinterpret_cast<uintptr_t>(at) % 64 == 0) at++;  // never on a vector boundary
    std::memcpy(at, vals.data(), size_t(vals.numel()) * sizeof(float));
    in["v"] = Tensor::view(DType::f32, v, at);
    check(g, in, where + " values not aligned");
  }
}

// Not the chain: the scores are also an output, or the softmax is read twice. Those stay a
// MatMul epilogue and a MatMul.
TEST(Attention, ScoresNeededElsewhereKeepTheEpilogue) {
  GraphBuilder b;
  auto q = b.input("q", DType::f32, {1, 2, 8, 16});
  auto kt = b.input("kt", DType::f32, {1, 2, 16, 8});
  auto v = b.input("v", DType::f32, {1, 2, 8, 16});
  auto p = b.softmax(b.div(b.matmul(q, kt), 4.0));
  b.output("y", b.matmul(p, v));
  b.output("p", p);
  Graph g = b.build();
  CompiledModel m = compile(g, graph_opts());
  for (auto& k : m.kernels()) EXPECT_NE(k.variant, "flash attention") << k.name;
  std::map<std::string, Tensor> in = {{"q", Tensor::random(DType::f32, {1, 2, 8, 16}, 1)},
                                      {"kt", Tensor::random(DType::f32, {1, 2, 16, 8}, 2)},
                                      {"v", Tensor::random(DType::f32, {1, 2, 8, 16}, 3)}};
  EXPECT_TRUE(matches_reference(g, in, graph_opts()));
}

// bf16 chains stay a MatMul epilogue and a MatMul where the CPU has bf16 dot products (oneDNN's
// bf16 matmuls are then faster: the cost model's fixed figures say so, at lengths where the
// flops outweigh a second kernel's launch), and say so with both estimates; elsewhere, and when
// the chain is small, they run as the flash kernel.
TEST(Attention, Bf16IsNotProfitableWithBf16DotProducts) {
  const bool dots = cpu::has_bf16_dot_products();
  struct Case {
    Sizes q, kt, v;
    bool split;
  };
  for (const Case& c : {Case{{1, 4, 128, 64}, {1, 4, 64, 256}, {1, 4, 256, 64}, dots},
                        Case{{1, 2, 33, 16}, {1, 2, 16, 70}, {1, 2, 70, 16}, false}}) {
    Graph g = attention(DType::bf16, to_shape(c.q), to_shape(c.kt), to_shape(c.v),
                        {Mask::Causal, Scale::Div});
    CompiledModel m = compile(g, graph_opts());
    EXPECT_EQ(m.kernels().size(), c.split ? 2u : 1u);
    int notes = 0;
    for (auto& d : m.decisions()) {
      if (d.reason != FusionReason::NotProfitable) continue;
      notes++;
      EXPECT_NE(d.message.find("predicted slower as the flash-style kernel"), std::string::npos)
          << d.message;
      EXPECT_NE(d.message.find("than as a MatMul with its softmax epilogue and a MatMul, "),
                std::string::npos)
          << d.message;
      EXPECT_NE(d.message.find("(builtin)"), std::string::npos) << d.message;
    }
    EXPECT_EQ(notes, c.split ? 1 : 0);
    EXPECT_TRUE(
        matches_reference(g, inputs(DType::bf16, c.q, c.kt, c.v, Mask::Causal), graph_opts(), 2));
  }
}

// The rules file switches it off: the chain is then a MatMul epilogue and a MatMul.
TEST(Attention, RuleOffKeepsTwoKernels) {
  const Sizes q = {1, 2, 10, 16}, kt = {1, 2, 16, 10}, v = {1, 2, 10, 16};
  Graph g =
      attention(DType::f32, to_shape(q), to_shape(kt), to_shape(v), {Mask::Causal, Scale::Div});
  Options o = graph_opts();
  const std::string path = temp_dir("attention_rules") + "/rules.json";
  {
    std::ofstream f(path);
    f << R"({"Switch": {"UBFusion": {"AttentionFusion": "off"}}})";
  }
  o["ge.fusionSwitchFile"] = path;
  CompiledModel m = compile(g, o);
  EXPECT_EQ(m.kernels().size(), 2u);
  EXPECT_TRUE(matches_reference(g, inputs(DType::f32, q, kt, v, Mask::Causal), o));
}

}  // namespace
}  // namespace ubfuse
