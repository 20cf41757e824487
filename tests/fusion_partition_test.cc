// Structure of the fusion analysis: which groups form, their names, outputs and the reason
// recorded for every edge that did not fuse.
#include <fstream>

#include "codegen/group_kernels.h"
#include "fusion/partition.h"
#include "test_util.h"

namespace ubfuse {
namespace {

FusionConfig config_with(int64_t ub = 196608) {
  FusionConfig c;
  c.ub_bytes = ub;
  c.ub_bytes_per_row = ub_bytes_per_row;
  return c;
}

Graph seed(bool print_mid = false, Shape s = {2, 16, 64}) {
  GraphBuilder b;
  auto x = b.input("x", f32, s);
  auto r = b.input("residual", f32, s);
  auto w = b.input("w", f32, {s.back()});
  auto bias = b.input("b", f32, {s.back()});
  auto ln = b.layer_norm(b.add(x, r), w, bias, 1e-5);
  if (print_mid)
    ln = b.host(
        ln, [](Tensor&) {}, "print");
  b.output("y", b.silu(ln));
  return b.build();
}

const FusionDecision* find_reason(const Partition& p, FusionReason r) {
  for (auto& d : p.decisions) {
    if (d.reason == r) return &d;
  }
  return nullptr;
}

TEST(Partition, SeedBlockIsOneGroup) {
  Graph g = seed();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].name, "FusedAddLayerNormSilu");
  EXPECT_EQ(p.groups[0].kind, GroupKind::RowReduction);
  EXPECT_EQ(p.groups[0].inputs.size(), 4u);
  EXPECT_EQ(p.groups[0].outputs.size(), 1u);
  EXPECT_FALSE(p.groups[0].reread);
  for (auto& d : p.decisions) EXPECT_EQ(d.reason, FusionReason::Fused) << d.message;
}

TEST(Partition, AddRmsNormWithReusedSumHasTwoOutputs) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"batch", 64});
  auto r = b.input("r", f32, {"batch", 64});
  auto w = b.input("w", f32, {64});
  auto s = b.add(x, r);
  b.output("normed", b.rms_norm(s, w));
  b.output("sum", s);
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].name, "FusedAddRMSNorm");
  EXPECT_EQ(p.groups[0].outputs.size(), 2u);
}

TEST(Partition, HostSplitsWithHostSync) {
  Graph g = seed(true);
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 3u);
  EXPECT_EQ(p.groups[0].name, "FusedAddLayerNorm");
  EXPECT_EQ(p.groups[1].name, "Host");
  EXPECT_EQ(p.groups[2].name, "Silu");
  auto* d = find_reason(p, FusionReason::HostSync);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->message.find("'print'"), std::string::npos) << d->message;
  EXPECT_NE(d->hint.find("move 'print'"), std::string::npos) << d->hint;
}

TEST(Partition, TinyUbSplitsWithBufferCapacity) {
  Graph g = seed(false, {2, 16, 4096});
  Partition p = partition_graph(g, config_with(1024), FusionRules{});
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].name, "Add");
  EXPECT_EQ(p.groups[1].name, "FusedLayerNormSilu");
  auto* d = find_reason(p, FusionReason::BufferCapacity);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->hint.find("raise ub_bytes to at least"), std::string::npos) << d->hint;
}

TEST(Partition, RulesSwitchOffGivesThreeGroups) {
  Graph g = seed();
  FusionRules rules = parse_fusion_rules(
      R"({"Switch": {"UBFusion": {"ALL": "on", "ReductionPrologueFusion": "off",
                                  "ReductionEpilogueFusion": "off"}}})",
      "rules.json");
  Partition p = partition_graph(g, config_with(), rules);
  EXPECT_EQ(p.groups.size(), 3u);
  auto* d = find_reason(p, FusionReason::DisabledByRule);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->message.find("rules.json"), std::string::npos) << d->message;
}

TEST(Partition, UserPatternNamesAndForbids) {
  Graph g = seed();
  FusionRules named = parse_fusion_rules(
      R"({"Patterns": [{"name": "TbeFusedAddLayerNormSilu", "ops": ["Add", "LayerNorm", "Silu"]}]})",
      "p.json");
  EXPECT_EQ(partition_graph(g, config_with(), named).groups[0].name, "TbeFusedAddLayerNormSilu");
  FusionRules forbid = parse_fusion_rules(
      R"({"Patterns": [{"name": "NoLnSilu", "ops": ["LayerNorm", "Silu"], "action": "forbid"}]})",
      "p.json");
  Partition p = partition_graph(g, config_with(), forbid);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].name, "FusedAddLayerNorm");
  ASSERT_NE(find_reason(p, FusionReason::DisabledByRule), nullptr);
}

TEST(Partition, MatMulEpilogueAndCycle) {
  GraphBuilder b;
  auto x = b.input("x", f32, {8, 32});
  auto w = b.constant(Tensor::random(f32, {32, 32}, 1));
  auto bias = b.constant(Tensor::random(f32, {32}, 2));
  auto a = b.exp(x);
  auto m = b.matmul(a, w);
  auto y = b.add(b.gelu(b.add(m, bias)), a);  // a reaches the add directly and via the matmul
  b.output("y", y);
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].name, "Exp");
  EXPECT_EQ(p.groups[1].name, "FusedMatMulAddGeluAdd");
  EXPECT_EQ(p.groups[1].kind, GroupKind::MatMulEpilogue);
  // exp -> add would need the MatMul inside the epilogue's group: NotFusible, named as such.
  auto* d = find_reason(p, FusionReason::NotFusible);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->message.find("MatMul"), std::string::npos) << d->message;
}

TEST(Partition, ResidualAddAndNormJoinTheMatMulEpilogue) {
  GraphBuilder b;
  auto x = b.input("x", f32, {"tokens", 32});
  auto w = b.constant(Tensor::random(f32, {32, 32}, 1));
  auto nw = b.constant(Tensor::random(f32, {32}, 2));
  auto h = b.add(x, b.matmul(x, w));
  b.output("normed", b.rms_norm(h, nw));
  b.output("h", h);
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].name, "FusedMatMulAddRMSNorm");
  EXPECT_EQ(p.groups[0].kind, GroupKind::MatMulEpilogue);
  EXPECT_EQ(p.groups[0].outputs.size(), 2u);
}

TEST(Partition, VectorMatMulKeepsItsReductionApart) {
  GraphBuilder b;
  auto x = b.input("x", f32, {32});
  auto w = b.constant(Tensor::random(f32, {32, 16}, 1));
  b.output("y", b.softmax(b.exp(b.matmul(x, w))));
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].name, "FusedMatMulExp");
  auto* d = find_reason(p, FusionReason::NotFusible);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->message.find("vector operand"), std::string::npos) << d->message;
}

TEST(Partition, PathThroughAnotherKernelIsACycle) {
  GraphBuilder b;
  auto x = b.input("x", f32, {8, 8});
  auto a = b.exp(x);
  auto t = b.transpose(b.transpose(a, {1, 0}), {1, 0});  // Injective: its own kernels
  b.output("y", b.add(a, t));
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  EXPECT_EQ(p.groups.size(), 4u);
  auto* d = find_reason(p, FusionReason::Cycle);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->producer, "exp0");
  EXPECT_EQ(d->consumer, "add0");
}

TEST(Partition, SmallerDomainStaysOutsideWithShapeMismatch) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto w = b.input("w", f32, {16});
  auto y = b.mul(x, b.exp(w));
  b.output("y", b.relu(y));
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[1].name, "FusedMulRelu");
  EXPECT_NE(find_reason(p, FusionReason::ShapeMismatch), nullptr);
}

TEST(Partition, ReductionFeedsBroadcastEpilogue) {
  // x - mean(x) written by hand: the row scalar joins the full-width group.
  GraphBuilder b;
  auto x = b.input("x", f32, {"rows", 32});
  auto m = b.reduce_mean(x, true);
  b.output("y", b.mul(b.sub(x, m), 2.0));
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].name, "FusedReduceMeanSubMul");
}

// Two groups that would feed each other with no node-level path back: {Exp, Sub} reads Concat,
// which reads Neg, and {Neg, Min} would read Exp. The group-level Cycle check keeps Neg and Min
// apart (it used to merge them and abort with "fused groups form a cycle").
TEST(Partition, GroupsNeverFeedEachOther) {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 1});
  auto a = b.neg(x);
  auto e = b.exp(x);
  auto c = b.concat({x, a}, 1);
  b.output("s", b.sub(c, e));
  b.output("m", b.min(a, e));
  Graph g = b.build();
  Partition p = partition_graph(g, config_with(), FusionRules{});
  bool cycle = false;
  for (auto& d : p.decisions) cycle |= d.reason == FusionReason::Cycle;
  EXPECT_TRUE(cycle);
  std::map<std::string, Tensor> in = {{"x", Tensor::random(f32, {4, 1}, 5)}};
  auto want = ref::run_graph(g, in);
  auto got = compile(g, {{"fusion", "1"}}).run(in);
  for (auto& name : {"s", "m"}) EXPECT_TRUE(testing::close_to_ref(got.at(name), want.at(name)));
}

TEST(Rules, BadFilesNameTheField) {
  using testing::throws_with;
  EXPECT_TRUE(throws_with([] { parse_fusion_rules("{", "r.json"); }, {"r.json", "not valid JSON"}));
  EXPECT_TRUE(throws_with(
      [] { parse_fusion_rules(R"({"Switch": {"UBFusion": {"Foo": "off"}}})", "r.json"); },
      {"r.json", "Switch.UBFusion", "unknown name 'Foo'", "ElementwiseFusion"}));
  EXPECT_TRUE(throws_with(
      [] { parse_fusion_rules(R"({"Switch": {"UBFusion": {"ALL": "no"}}})", "r.json"); },
      {"Switch.UBFusion.ALL", "\"on\" or \"off\""}));
  EXPECT_TRUE(throws_with(
      [] {
        parse_fusion_rules(R"({"Patterns": [{"name": "P", "ops": ["Add", "Frob"]}]})", "r.json");
      },
      {"Patterns[0].ops", "unknown op \"Frob\"", "LayerNorm"}));
  EXPECT_TRUE(throws_with([] { parse_fusion_rules(R"({"Switchh": {}})", "r.json"); },
                          {"unknown field 'Switchh'", "Switch, Patterns"}));
  EXPECT_TRUE(throws_with([] { load_fusion_rules("/nonexistent/rules.json"); },
                          {"/nonexistent/rules.json", "cannot be read"}));
}

}  // namespace
}  // namespace ubfuse
