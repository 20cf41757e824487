// Fused kernels (generated C++ and the tile interpreter) against the double reference: every
// elementwise op and row op inside fused groups, f32/bf16/f16, odd row lengths (1, 3, 4097),
// size-1 dims, every broadcast form of an input, the re-read variant, and the traffic of the
// seed block. Groups are built by hand (one group per graph) and all kernels of one engine are
// built in one call, so the generated ones compile as one translation unit.
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>

#include "codegen/cpp_compile.h"
#include "codegen/kernel_ir.h"
#include "fused_kernel_util.h"
#include "kernels/cpu/kernel_util.h"
#include "test_util.h"

namespace ubfuse {
namespace {

using testing::close_to_ref;
using testing::run_kernel;
using testing::whole_graph_group;
using V = GraphBuilder::V;

struct KernelCase {
  std::string tag;  // test that checks it
  std::string name;
  std::unique_ptr<Graph> graph;
  std::map<std::string, Tensor> inputs;
  double scale = 1;  // tolerance multiplier (long bf16 chains round more)
};

using Build = std::function<V(GraphBuilder&, DType, const Sizes&)>;

KernelCase make_case(const std::string& tag, const std::string& name, DType t, const Sizes& s,
                     const Build& f, double lo = -2, double hi = 2, double scale = 1) {
  GraphBuilder b;
  V y = f(b, t, s);
  b.output("y", y);
  KernelCase c;
  c.tag = tag;
  c.name = name + "/" + std::string(dtype_name(t)) + sizes_str(s);
  c.graph = std::make_unique<Graph>(b.build());
  uint64_t seed = 1;
  for (auto* v : c.graph->inputs()) {
    Sizes sz;
    // Symbols stand for the case's sizes: "rows" = all but the last, "cols" = the last.
    for (auto& d : v->shape) sz.push_back(d.is_static() ? d.value() : s.back());
    DType dt = v->dtype;
    c.inputs[v->name] = dt == DType::boolean ? Tensor::random(dt, sz, seed++, 0, 2)
                                             : Tensor::random(dt, sz, seed++, lo, hi);
  }
  c.scale = scale;
  return c;
}

using testing::in;
Sizes last(const Sizes& s) { return {s.back()}; }
Sizes per_row(Sizes s) {
  s.back() = 1;
  return s;
}

std::vector<KernelCase>& kernel_cases() {
  static std::vector<KernelCase> all = [] {
    std::vector<KernelCase> c;
    const std::vector<DType> dts = {f32, bf16, f16};
    // Unary ops in a chain: pre-op with a [C] weight, post-op with a per-row input.
    struct Un {
      std::string name;
      std::function<V(GraphBuilder&, V)> op;
      bool positive = false;
    };
    std::vector<Un> uns = {
        {"neg", [](GraphBuilder& b, V x) { return b.neg(x); }},
        {"abs", [](GraphBuilder& b, V x) { return b.abs(x); }},
        {"exp", [](GraphBuilder& b, V x) { return b.exp(x); }},
        {"log", [](GraphBuilder& b, V x) { return b.log(x); }, true},
        {"sqrt", [](GraphBuilder& b, V x) { return b.sqrt(x); }, true},
        {"rsqrt", [](GraphBuilder& b, V x) { return b.rsqrt(x); }, true},
        {"reciprocal", [](GraphBuilder& b, V x) { return b.reciprocal(x); }, true},
        {"tanh", [](GraphBuilder& b, V x) { return b.tanh(x); }},
        {"sigmoid", [](GraphBuilder& b, V x) { return b.sigmoid(x); }},
        {"relu", [](GraphBuilder& b, V x) { return b.relu(x); }},
        {"silu", [](GraphBuilder& b, V x) { return b.silu(x); }},
        {"gelu", [](GraphBuilder& b, V x) { return b.gelu(x); }},
        {"gelu_tanh", [](GraphBuilder& b, V x) { return b.gelu(x, true); }},
        {"erf", [](GraphBuilder& b, V x) { return b.erf(x); }},
        {"pow2", [](GraphBuilder& b, V x) { return b.pow(x, 2); }},
        {"pow3", [](GraphBuilder& b, V x) { return b.pow(x, 3); }},
        {"pow_half", [](GraphBuilder& b, V x) { return b.pow(x, 0.5); }, true},
        {"pow_-1.5", [](GraphBuilder& b, V x) { return b.pow(x, -1.5); }, true},
        {"cast_bf16_f32", [](GraphBuilder& b, V x) { return b.cast(b.cast(x, bf16), x->dtype); }},
        {"cast_f16_f32", [](GraphBuilder& b, V x) { return b.cast(b.cast(x, f16), x->dtype); }},
    };
    for (auto& u : uns) {
      for (DType t : dts) {
        c.push_back(
            make_case("unary", u.name, t, {3, 37}, [u](GraphBuilder& b, DType t, const Sizes& s) {
              V x = b.add(in(b, "x", t, s), in(b, "w", t, last(s)));
              if (u.positive) x = b.add(b.abs(x), 0.25);
              return b.mul(u.op(b, x), in(b, "r", t, per_row(s)));
            }));
      }
    }
    // Binary ops against every broadcast form of the second operand.
    struct Bin {
      std::string name;
      std::function<V(GraphBuilder&, V, V)> op;
    };
    std::vector<Bin> bins = {
        {"add", [](GraphBuilder& b, V x, V y) { return b.add(x, y); }},
        {"sub", [](GraphBuilder& b, V x, V y) { return b.sub(y, x); }},
        {"mul", [](GraphBuilder& b, V x, V y) { return b.mul(x, y); }},
        {"div", [](GraphBuilder& b, V x, V y) { return b.div(x, b.add(b.abs(y), 0.5)); }},
        {"max", [](GraphBuilder& b, V x, V y) { return b.max(x, y); }},
        {"min", [](GraphBuilder& b, V x, V y) { return b.min(y, x); }},
    };
    std::vector<std::pair<std::string, std::function<Sizes(const Sizes&)>>> forms = {
        {"full", [](const Sizes& s) { return s; }},
        {"vec", [](const Sizes& s) { return last(s); }},
        {"1xC",
         [](const Sizes& s) {
           return Sizes{1, s.back()};
         }},
        {"Bx1xC",
         [](const Sizes& s) {
           return Sizes{s[0], 1, s[2]};
         }},
        {"1xSx1",
         [](const Sizes& s) {
           return Sizes{1, s[1], 1};
         }},
        {"row", [](const Sizes& s) { return per_row(s); }},
        {"scalar", [](const Sizes&) { return Sizes{}; }},
    };
    for (auto& bn : bins) {
      for (auto& [fname, form] : forms) {
        for (DType t : {f32, bf16}) {
          auto f = form;
          c.push_back(make_case("binary", bn.name + "_" + fname, t, {2, 3, 19},
                                [bn, f](GraphBuilder& b, DType t, const Sizes& s) {
                                  V x = b.exp(in(b, "x", t, s));
                                  return b.relu(bn.op(b, x, in(b, "y", t, f(s))));
                                }));
        }
      }
    }
    // Comparisons, where, not, bool in and out.
    for (DType t : dts) {
      c.push_back(make_case("logic", "where_less", t, {4, 33},
                            [](GraphBuilder& b, DType t, const Sizes& s) {
                              V x = in(b, "x", t, s), r = in(b, "r", t, per_row(s));
                              // One node per statement: argument order is the compiler's, and
                              // the asan stage (clang) must find ctest's (GCC) kernels cached.
                              V d = b.sub(r, x), m = b.mul(x, 3.0);
                              return b.where(b.less(x, r), m, d);
                            }));
      c.push_back(make_case(
          "logic", "not_greater", t, {4, 33}, [](GraphBuilder& b, DType t, const Sizes& s) {
            return b.logical_not(
                b.greater(b.add(in(b, "x", t, s), in(b, "w", t, last(s))), b.scalar(0.5, t)));
          }));
      c.push_back(make_case("logic", "where_mask_input", t, {4, 33},
                            [](GraphBuilder& b, DType t, const Sizes& s) {
                              V m = in(b, "m", boolean, last(s));
                              V x = in(b, "x", t, s);
                              V eq = b.cast(b.equal(x, x), t), e = b.exp(x);  // as above
                              return b.where(b.logical_not(m), e, eq);
                            }));
    }
    // Row ops with prologue and epilogue, odd and size-1 row lengths.
    struct Row {
      std::string name;
      Build f;
    };
    std::vector<Row> rows = {
        {"add_layernorm_silu",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           V x = b.add(in(b, "x", t, s), in(b, "res", t, s));
           return b.silu(b.layer_norm(x, in(b, "w", t, last(s)), in(b, "bias", t, last(s)), 1e-5));
         }},
        {"layernorm_plain",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           return b.layer_norm(b.mul(in(b, "x", t, s), 3.0), nullptr, nullptr, 1e-5);
         }},
        {"rmsnorm_gelu",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           V x = b.add(in(b, "x", t, s), in(b, "r", t, s));
           return b.gelu(b.rms_norm(x, in(b, "w", t, last(s)), 1e-6));
         }},
        {"softmax_scaled",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           return b.softmax(b.add(b.mul(in(b, "x", t, s), 4.0), in(b, "mask", t, last(s))));
         }},
        {"reduce_sum_keep",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           return b.mul(b.reduce_sum(b.tanh(in(b, "x", t, s)), true), 0.5);
         }},
        {"reduce_mean_center",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           V x = in(b, "x", t, s);
           return b.sub(x, b.reduce_mean(x, true));
         }},
        {"reduce_max_drop",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           return b.reduce_max(b.add(in(b, "x", t, s), in(b, "w", t, last(s))), false);
         }},
        {"softmax_then_layernorm",
         [](GraphBuilder& b, DType t, const Sizes& s) {
           V p = b.softmax(in(b, "x", t, s));
           return b.layer_norm(b.mul(p, 10.0), in(b, "w", t, last(s)), nullptr, 1e-5);
         }},
    };
    for (auto& r : rows) {
      for (DType t : dts) {
        for (Sizes s : {Sizes{2, 3, 1}, Sizes{5, 3}, Sizes{3, 4097}, Sizes{1, 1, 64}}) {
          c.push_back(make_case("row", r.name, t, s, r.f, -2, 2, 2));
        }
      }
    }
    return c;
  }();
  return all;
}

struct Built {
  std::vector<FusedGroup> groups;
  std::vector<std::unique_ptr<Kernel>> kernels;
};

// Kernels in the default cache dir, where the asan stage finds those ctest's stage built.
CodegenConfig config_for(const std::string& engine) {
  CodegenConfig c;
  c.engine = engine;
  return c;
}

// "cpp_clang": generated kernels built by clang (UBFUSE_TEST_CLANGXX) instead of the compiler that
// built ubfuse, which builds them everywhere else in the tests.
const Built& built(const std::string& engine) {
  static std::map<std::string, std::unique_ptr<Built>> cache;
  auto& b = cache[engine];
  if (!b) {
    b = std::make_unique<Built>();
    for (auto& c : kernel_cases()) b->groups.push_back(whole_graph_group(*c.graph));
    if (engine == "cpp_clang") {
      testing::ScopedEnv cxx("UBFUSE_CXX", UBFUSE_TEST_CLANGXX);
      EXPECT_NE(cpp::toolchain().version.find("clang"), std::string::npos)
          << cpp::toolchain().version;
      b->kernels = make_group_kernels(b->groups, config_for("cpp"));
    } else {
      b->kernels = make_group_kernels(b->groups, config_for(engine));
    }
  }
  return *b;
}

class FusedKernels : public ::testing::TestWithParam<std::string> {
 protected:
  void check(const std::string& tag, int64_t ub_bytes = 196608) {
    if (GetParam() == "cpp_clang" && !*UBFUSE_TEST_CLANGXX)
      GTEST_SKIP() << "no clang++ was found when the build was configured";
    const Built& b = built(GetParam());
    int n = 0;
    for (size_t i = 0; i < kernel_cases().size(); i++) {
      const KernelCase& c = kernel_cases()[i];
      if (c.tag != tag) continue;
      n++;
      const Kernel& k = *b.kernels[i];
      EXPECT_EQ(k.info.variant.rfind(GetParam() == "interpreter" ? "interpreter" : "codegen", 0),
                0u)
          << c.name << ": " << k.info.variant;
      if (::testing::Test::HasFailure()) return;
      auto want = ref::run_graph(*c.graph, c.inputs);
      auto got = run_kernel(k, *c.graph, c.inputs, want, ub_bytes);
      for (auto& [name, w] : want) {
        EXPECT_TRUE(close_to_ref(got.at(name), w, c.scale)) << c.name << " output " << name;
      }
    }
    EXPECT_GT(n, 0);
  }
};

TEST_P(FusedKernels, EveryUnaryOpInAChain) { check("unary"); }
TEST_P(FusedKernels, EveryBinaryOpWithEveryBroadcast) { check("binary"); }
TEST_P(FusedKernels, ComparisonsWhereNotAndBool) { check("logic"); }
TEST_P(FusedKernels, RowOpsWithPrologueAndEpilogue) { check("row"); }
// 20000 bytes hold one 4097-column row but not two: the one-row-at-a-time UB variant, not
// the pipelined one (generated code).
TEST_P(FusedKernels, RowOpsWithUbForOneRowOnly) { check("row", 20000); }
// 256 bytes of UB hold no row of 64+ columns: every row op re-reads its inputs.
TEST_P(FusedKernels, RowOpsTwoPassWithTinyUb) { check("row", 256); }

// Non-temporal stores (threshold lowered to 1 KiB), with rows that start 64-byte aligned (the
// streaming path, bf16 outputs in pairs: StorePairF32) and rows that do not (plain stores).
// add + RMSNorm computes no transcendental per element, so it streams.
TEST(FusedKernelStores, NonTemporalStoresGiveTheReferenceResults) {
  const size_t saved = cpu::stream_min_bytes();
  cpu::set_stream_min_bytes(1024);
  for (DType t : {f32, bf16}) {
    for (int64_t cols : {1024, 1031}) {
      GraphBuilder b;
      auto x = b.input("x", t, {37, cols});
      auto r = b.input("r", t, {37, cols});
      auto sum = b.add(x, r);
      b.output("sum", sum);
      b.output("y", b.rms_norm(sum, b.input("w", t, {cols}), 1e-6));
      Graph g = b.build();
      std::map<std::string, Tensor> in{{"x", Tensor::random(t, {37, cols}, 1)},
                                       {"r", Tensor::random(t, {37, cols}, 2)},
                                       {"w", Tensor::random(t, {cols}, 3)}};
      const Options o = testing::graph_opts();
      EXPECT_EQ(compile(g, o).kernels().size(), 1u);
      EXPECT_TRUE(testing::matches_reference(g, in, o)) << dtype_name(t) << " cols " << cols;
    }
  }
  cpu::set_stream_min_bytes(saved);
}

INSTANTIATE_TEST_SUITE_P(Engines, FusedKernels,
                         ::testing::Values("cpp", "interpreter", "cpp_clang"),
                         [](const auto& info) { return info.param; });

// ---- schedules: what the UB keeps ----

TEST(KernelIr, SeedBlockKeepsTheShiftedSumInOneSlot) {
  Graph g = testing::seed_block({"batch", "seq", 4096});
  FusedGroup fg = whole_graph_group(g);
  std::string why;
  auto p = kir::lower_group(fg, &why);
  ASSERT_TRUE(p) << why;
  // LayerNorm's statistics come from the pass that computes x + residual (shifted by its value
  // at column 0, loaded before the pass); the output pass is the second.
  EXPECT_EQ(p->num_phases, 2);
  kir::Schedule ub = kir::schedule(*p, true), rr = kir::schedule(*p, false);
  std::string text = kir::to_string(*p, ub);
  EXPECT_EQ(ub.num_slots, 1) << text;
  EXPECT_FALSE(ub.rereads()) << text;
  // x and residual are read once, in pass 0; (x + residual - pivot) / 2 goes to slot 0, and
  // the output pass normalizes it in one FMA: slot, FMA, w, b, affine FMA, SiLU.
  ASSERT_EQ(ub.phases.size(), 2u);
  ASSERT_EQ(ub.phases[0].slot_stores.size(), 1u) << text;
  const kir::Expr& kept = p->exprs[size_t(ub.phases[0].slot_stores[0])];
  EXPECT_EQ(kept.op, kir::Op::MulAdd) << text;
  EXPECT_EQ(kept.a, 2) << text;  // the sum
  EXPECT_EQ(ub.phases[1].slot_loads, ub.phases[0].slot_stores) << text;
  ASSERT_EQ(ub.phases[1].compute.size(), 5u) << text;
  EXPECT_EQ(p->exprs[size_t(ub.phases[1].compute[0])].op, kir::Op::MulAdd) << text;
  EXPECT_EQ(p->exprs[size_t(ub.phases[1].compute[0])].a, ub.phases[0].slot_stores[0]) << text;
  const std::string prog = kir::to_string(*p);
  EXPECT_NE(prog.find("load in0 sample 0.5"), std::string::npos) << prog;
  EXPECT_NE(prog.find("rowsumsq"), std::string::npos) << prog;
  // Every row takes 2 sums (of d and d^2); the sums at 2^-80 are guarded: a loop of their own,
  // only for rows whose sum of d^2 passed 2^100.
  EXPECT_EQ(ub.phases[0].reductions.size(), 2u) << text;
  ASSERT_EQ(ub.phases[0].rescues.size(), 1u) << text;
  EXPECT_EQ(ub.phases[0].rescues[0].reductions.size(), 2u) << text;
  EXPECT_NE(text.find("| if %"), std::string::npos) << text;
  EXPECT_EQ(ub_bytes_per_row(fg, 4096), 4096 * 4);
  EXPECT_EQ(ub_bytes_per_row(fg, 4097), (4096 + 16) * 4);
  EXPECT_TRUE(rr.rereads());
  EXPECT_EQ(rr.num_slots, 0);
  EXPECT_EQ(rr.input_passes[0], 2) << kir::to_string(*p, rr);
}

TEST(KernelIr, SoftmaxSharesOneSlotBetweenInputAndExp) {
  GraphBuilder b;
  b.output("y", b.softmax(b.input("x", f32, {4, 100})));
  Graph g = b.build();
  FusedGroup fg = whole_graph_group(g);
  auto p = kir::lower_group(fg, nullptr);
  ASSERT_TRUE(p);
  kir::Schedule ub = kir::schedule(*p, true);
  EXPECT_EQ(ub.num_slots, 1) << kir::to_string(*p, ub);
}

TEST(KernelIr, ElementwiseChainNeedsNoUb) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 100});
  b.output("y", b.silu(b.mul(b.add(x, 1.0), x)));
  Graph g = b.build();
  EXPECT_EQ(ub_bytes_per_row(whole_graph_group(g), 100), 0);
}

TEST(KernelIr, IntegerGroupsRunOpByOp) {
  GraphBuilder b;
  auto x = b.input("x", i32, {4, 10});
  b.output("y", b.abs(b.neg(x)));
  Graph g = b.build();
  FusedGroup fg = whole_graph_group(g);
  auto k = make_group_kernels({fg}, config_for("interpreter"));
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0]->info.variant.rfind("op-by-op", 0), 0u) << k[0]->info.variant;
  std::map<std::string, Tensor> inputs = {{"x", Tensor::random(i32, {4, 10}, 3, -50, 50)}};
  auto want = ref::run_graph(g, inputs);
  auto got = run_kernel(*k[0], g, inputs, want, 1024);
  EXPECT_TRUE(close_to_ref(got.at("y"), want.at("y")));
}

// ---- through compile(): structure, variants, traffic ----

std::map<std::string, Tensor> seed_inputs(const Sizes& s, DType t = f32) {
  return {{"x", Tensor::random(t, s, 1)},
          {"residual", Tensor::random(t, s, 2)},
          {"w", Tensor::random(t, {s.back()}, 3, 0.5, 1.5)},
          {"b", Tensor::random(t, {s.back()}, 4)}};
}

Options engine_graph_opts(const std::string& engine, int64_t ub = 0) {
  Options o = {{"ge.exec.enableOperatorFusion", "1"}, {"codegen", engine}};
  if (ub) o["ub_bytes"] = std::to_string(ub);
  return o;
}

// MatMulInteger's epilogue: an i32 input read only through a Cast to f32 loads with the
// conversion, so the rescale (and what follows) is one generated kernel; values past 2^24 round
// as the Cast rounds. An i32 input something else reads keeps the group op by op.
TEST(FusedCompile, Int32InputThroughACastToF32Fuses) {
  GraphBuilder b;
  auto acc = b.input("acc", i32, {"rows", 37});
  auto scale = b.input("scale", f32, {37});
  auto bias = b.input("bias", f32, {37});
  b.output("y", b.gelu(b.add(b.mul(b.cast(acc, f32), scale), bias)));
  Graph g = b.build();
  Tensor acc_t = Tensor::random(i32, {5, 37}, 3, -40000, 40000);
  for (int64_t i = 0; i < 37; i++) acc_t.set(i, double((int64_t(1) << 24) + 2 * i + 1));  // ties
  std::map<std::string, Tensor> in = {{"acc", acc_t},
                                      {"scale", Tensor::random(f32, {37}, 4, 1e-5, 3e-5)},
                                      {"bias", Tensor::random(f32, {37}, 5)}};
  auto want = ref::run_graph(g, in);
  for (const std::string engine : {"cpp", "interpreter"}) {
    CompiledModel m = compile(g, engine_graph_opts(engine));
    ASSERT_EQ(m.kernels().size(), 1u) << engine;
    EXPECT_EQ(m.kernels()[0].variant.rfind(engine == "cpp" ? "codegen" : "interpreter", 0), 0u)
        << m.kernels()[0].variant;
    EXPECT_TRUE(close_to_ref(m.run(in).at("y"), want.at("y"))) << engine;
  }
  GraphBuilder b2;
  auto a2 = b2.input("acc", i32, {"rows", 37});
  b2.output("y", b2.add(b2.cast(a2, f32), b2.cast(b2.neg(a2), f32)));
  Graph g2 = b2.build();
  CompiledModel m2 = compile(g2, engine_graph_opts("cpp"));
  for (auto& k : m2.kernels()) {
    EXPECT_EQ(k.variant.find("codegen"), std::string::npos) << k.name << ": " << k.variant;
  }
  std::map<std::string, Tensor> in2 = {{"acc", acc_t}};
  EXPECT_TRUE(close_to_ref(m2.run(in2).at("y"), ref::run_graph(g2, in2).at("y")));
}

TEST(FusedCompile, SeedBlockIsOneGeneratedKernelMovingOnlyInputsAndOutputs) {
  Graph g = testing::seed_block({"batch", "seq", 1024});
  CompiledModel m = compile(g, engine_graph_opts("cpp"));
  ASSERT_EQ(m.kernels().size(), 1u);
  EXPECT_EQ(m.kernels()[0].name, "FusedAddLayerNormSilu");
  EXPECT_EQ(m.kernels()[0].variant, "codegen");
  for (Sizes s : {Sizes{1, 1, 1024}, Sizes{2, 7, 1024}, Sizes{3, 128, 1024}}) {
    auto in = seed_inputs(s);
    RunStats st;
    auto out = m.run(in, &st);
    int64_t in_bytes = 0;
    for (auto& [n, t] : in) in_bytes += int64_t(t.nbytes());
    EXPECT_EQ(st.bytes_read, in_bytes) << sizes_str(s);
    EXPECT_EQ(st.bytes_written, int64_t(out.at("y").nbytes()));
    EXPECT_EQ(st.kernels_launched, 1);
    auto want = ref::run_graph(g, in);
    EXPECT_TRUE(close_to_ref(out.at("y"), want.at("y")));
  }
}

TEST(FusedCompile, RowLongerThanTheUbRereadsAndSaysSo) {
  Graph g = testing::seed_block({"batch", "hidden"});
  for (const char* engine : {"cpp", "interpreter"}) {
    CompiledModel m = compile(g, engine_graph_opts(engine, 4096));
    ASSERT_EQ(m.kernels().size(), 1u);
    auto small = seed_inputs({2, 512});  // 2 KiB per row: fits
    auto big = seed_inputs({2, 3000});   // 12 KiB per row: re-read
    RunStats a, b;
    auto ya = m.run(small, &a);
    auto yb = m.run(big, &b);
    int64_t small_in = 0, big_in = 0;
    for (auto& [n, t] : small) small_in += int64_t(t.nbytes());
    for (auto& [n, t] : big) big_in += int64_t(t.nbytes());
    EXPECT_EQ(a.bytes_read, small_in) << engine;
    // x and residual are read again by the output pass.
    EXPECT_EQ(b.bytes_read, big_in + 2 * int64_t(big.at("x").nbytes())) << engine;
    EXPECT_TRUE(close_to_ref(yb.at("y"), ref::run_graph(g, big).at("y"))) << engine;
    EXPECT_TRUE(close_to_ref(ya.at("y"), ref::run_graph(g, small).at("y"))) << engine;
  }
}

TEST(FusedCompile, AddRmsNormWritesBothOutputsInOnePass) {
  GraphBuilder b;
  auto x = b.input("x", bf16, {"batch", 256});
  auto r = b.input("r", bf16, {"batch", 256});
  auto w = b.input("w", bf16, {256});
  auto s = b.add(x, r);
  b.output("normed", b.rms_norm(s, w, 1e-6));
  b.output("sum", s);
  Graph g = b.build();
  CompiledModel m = compile(g, engine_graph_opts("cpp"));
  ASSERT_EQ(m.kernels().size(), 1u);
  std::map<std::string, Tensor> in = {{"x", Tensor::random(bf16, {9, 256}, 1)},
                                      {"r", Tensor::random(bf16, {9, 256}, 2)},
                                      {"w", Tensor::random(bf16, {256}, 3)}};
  RunStats st;
  auto out = m.run(in, &st);
  EXPECT_EQ(st.bytes_written, 2 * 9 * 256 * 2);
  auto want = ref::run_graph(g, in);
  EXPECT_TRUE(close_to_ref(out.at("normed"), want.at("normed")));
  EXPECT_TRUE(close_to_ref(out.at("sum"), want.at("sum")));
}

// A projection, its bias, the residual add and the LayerNorm in one kernel (BERT's output
// block), and a MatMul whose only output is a row reduction; both in and out of blocks.
TEST(FusedCompile, MatMulEpilogueWithRowReductions) {
  for (DType t : {f32, bf16}) {
    for (int64_t rows : {1, 3, 700}) {
      GraphBuilder b;
      auto x = b.input("x", t, {"batch", rows, 48});
      auto w = b.constant(Tensor::random(t, {48, 1031}, 7, -0.2, 0.2), "w");
      auto bias = b.constant(Tensor::random(t, {1031}, 8), "bias");
      auto lw = b.constant(Tensor::random(t, {1031}, 9), "lw");
      auto lb = b.constant(Tensor::random(t, {1031}, 10), "lb");
      auto res = b.input("res", t, {"batch", rows, 1031});
      auto mm = b.matmul(x, w);
      b.output("y", b.layer_norm(b.add(b.add(mm, bias), res), lw, lb, 1e-5));
      b.output("rowmax", b.reduce_max(b.mul(mm, mm)));
      Graph g = b.build();
      CompiledModel m = compile(g, engine_graph_opts("cpp"));
      std::string names;
      for (auto& k : m.kernels()) names += k.name + " ";
      EXPECT_EQ(m.kernels().size(), 1u) << names;
      EXPECT_EQ(m.kernels()[0].name, "FusedMatMulAddAddLayerNormMulReduceMax") << names;
      std::map<std::string, Tensor> in = {{"x", Tensor::random(t, {2, rows, 48}, 1)},
                                          {"res", Tensor::random(t, {2, rows, 1031}, 3)}};
      auto out = m.run(in);
      auto want = ref::run_graph(g, in);
      EXPECT_TRUE(close_to_ref(out.at("y"), want.at("y"), t == bf16 ? 2 : 1)) << rows;
      EXPECT_TRUE(close_to_ref(out.at("rowmax"), want.at("rowmax"), t == bf16 ? 2 : 1)) << rows;
      // Only the reduction leaves the kernel: the blocks' shape comes from the operands.
      GraphBuilder b2;
      auto x2 = b2.input("x", t, {"batch", rows, 48});
      auto w2 = b2.constant(Tensor::random(t, {48, 1031}, 7, -0.2, 0.2), "w");
      b2.output("rowsum", b2.reduce_sum(b2.matmul(x2, w2)));
      Graph g2 = b2.build();
      CompiledModel m2 = compile(g2, engine_graph_opts("cpp"));
      ASSERT_EQ(m2.kernels().size(), 1u);
      EXPECT_EQ(m2.kernels()[0].name, "FusedMatMulReduceSum");
      std::map<std::string, Tensor> in2 = {{"x", in.at("x")}};
      EXPECT_TRUE(close_to_ref(m2.run(in2).at("rowsum"), ref::run_graph(g2, in2).at("rowsum"),
                               t == bf16 ? 2 : 1))
          << rows;
    }
  }
}

TEST(FusedCompile, CompileErrorsNameTheGroupAndKeepTheSource) {
  ASSERT_TRUE(cpp::toolchain().available) << cpp::toolchain().why_not;
  CodegenConfig c = config_for("cpp");
  EXPECT_TRUE(testing::throws_with(
      [&] { cpp::build_library("this is not C++;\n", c.cache_dir, "FusedBrokenGroup"); },
      {"FusedBrokenGroup", "error", "failed-", "codegen=interpreter"}));
}

TEST(FusedCompile, KernelsComeFromTheDiskCacheTheSecondTime) {
  std::string dir = std::string(UBFUSE_BINARY_DIR) + "/kernel-cache-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  Graph g = testing::seed_block({"batch", 96});
  Options o = engine_graph_opts("cpp");
  o["cache_dir"] = dir;
  cpp::BuildCounters before = cpp::build_counters();
  { compile(g, o); }  // compiles, then unloads with the model
  cpp::BuildCounters mid = cpp::build_counters();
  CompiledModel m = compile(g, o);
  cpp::BuildCounters after = cpp::build_counters();
  EXPECT_EQ(mid.compiles, before.compiles + 1);
  EXPECT_EQ(after.compiles, mid.compiles);
  EXPECT_EQ(after.cache_hits, mid.cache_hits + 1);
  auto in = seed_inputs({3, 96});
  EXPECT_TRUE(close_to_ref(m.run(in).at("y"), ref::run_graph(g, in).at("y")));
  std::filesystem::remove_all(dir);
}

TEST(FusedCompile, WithoutACompilerGroupsRunOnTheInterpreter) {
  Graph g = testing::seed_block({"batch", 100});
  CompiledModel m = [&] {
    // Restores the stage's own choice after (the asan stage sets one: scripts/sanitize.sh).
    testing::ScopedEnv cxx("UBFUSE_CXX", "/nonexistent/ubfuse-test-c++");
    return compile(g, engine_graph_opts("cpp"));
  }();
  ASSERT_EQ(m.kernels().size(), 1u);
  EXPECT_EQ(m.kernels()[0].variant.rfind("interpreter (the C++ compiler", 0), 0u)
      << m.kernels()[0].variant;
  auto in = seed_inputs({2, 100});
  EXPECT_TRUE(close_to_ref(m.run(in).at("y"), ref::run_graph(g, in).at("y")));
}

}  // namespace
}  // namespace ubfuse
