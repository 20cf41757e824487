// The partitioner's check list (fusion_checks()): every check is reachable and objects with its
// own reason, the order holds where two checks both object, and partition.h and
// docs/architecture.md print the list as it is.
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "codegen/group_kernels.h"
#include "codegen/kernel_ir.h"
#include "compiler/cost_calibration.h"
#include "fusion/partition.h"
#include "test_util.h"

namespace ubfuse {
namespace {

// A graph, the rules and UB size it is partitioned with, and the edge a check objects to.
struct CheckCase {
  std::function<Graph()> graph;
  std::string rules_json;  // empty: every rule on, no patterns
  int64_t ub_bytes;
  std::string producer, consumer;
};

constexpr int64_t kUb = 196608;

Partition partition(const std::function<Graph()>& graph, const std::string& rules_json = "",
                    int64_t ub_bytes = kUb) {
  FusionConfig config;
  config.ub_bytes = ub_bytes;
  config.ub_bytes_per_row = ub_bytes_per_row;
  FusionRules rules =
      rules_json.empty() ? FusionRules{} : parse_fusion_rules(rules_json, "rules.json");
  config.costs = []() -> const CostParams& { return builtin_costs(); };
  config.lowers = [](const FusedGroup& grp, std::string* why) {
    return kir::lower_group(grp, why) != nullptr;
  };
  Graph g = graph();
  Partition p = partition_graph(g, config, rules);
  p.groups.clear();  // they point into g; the decisions are what the tests read
  return p;
}

Partition partition(const CheckCase& c) { return partition(c.graph, c.rules_json, c.ub_bytes); }

// The check that objected to the edge p -> n, or "" when none did (or there is no such edge).
std::string objection(const Partition& part, const std::string& p, const std::string& n) {
  EXPECT_EQ(part.objected_by.size(), part.decisions.size());
  for (size_t i = 0; i < part.decisions.size(); i++) {
    const FusionDecision& d = part.decisions[i];
    if (d.producer == p && d.consumer == n) return std::string(part.objected_by[i]);
  }
  return "";
}

std::string decisions_text(const Partition& part) {
  std::string s;
  for (size_t i = 0; i < part.decisions.size(); i++) {
    const FusionDecision& d = part.decisions[i];
    s += std::string(fusion_reason_name(d.reason)) + " [" + std::string(part.objected_by[i]) +
         "] " + d.producer + " -> " + d.consumer + ": " + d.message + "\n";
  }
  return s;
}

// [4, 4, 16]: a row Transpose of dims 0 and 1 keeps the shape, so it meets its input's domain.
constexpr int64_t kSide = 4;
Shape cube() { return {kSide, kSide, 16}; }

Graph host_between() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  b.output("y", b.exp(b.host(
                    b.neg(x), [](Tensor&) {}, "print")));
  return b.build();
}

// exp0 computes q for an attention chain (matmul0 -> div0 -> softmax0 -> matmul1).
Graph exp_into_attention() {
  GraphBuilder b;
  auto x = b.input("x", f32, {2, 4, 16});
  auto kt = b.input("kt", f32, {2, 16, 4});
  auto v = b.input("v", f32, {2, 4, 16});
  b.output("y", b.matmul(b.softmax(b.div(b.matmul(b.exp(x), kt), 4.0)), v));
  return b.build();
}

Graph add_into_matmul() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  b.output("y", b.matmul(b.add(x, x), b.constant(Tensor::random(f32, {16, 8}, 1))));
  return b.build();
}

// add0's first operand joins the MatMul's epilogue; exp0, computed before, cannot.
Graph exp_before_epilogue() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto z = b.input("z", f32, {4, 8});
  auto y = b.matmul(x, b.constant(Tensor::random(f32, {16, 8}, 1)));
  b.output("y", b.add(y, b.exp(z)));
  return b.build();
}

Graph vector_matmul_softmax() {
  GraphBuilder b;
  auto x = b.input("x", f32, {16});
  b.output("y", b.softmax(b.exp(b.matmul(x, b.constant(Tensor::random(f32, {16, 8}, 1))))));
  return b.build();
}

// RoPE: q * cos + rotate_half(q) * sin with q computed (add0).
Graph rope() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto cos = b.input("cos", f32, {16});
  auto sin = b.input("sin", f32, {16});
  auto q = b.add(x, x);
  auto qc = b.mul(q, cos);  // one node per statement: the names follow this order
  auto rs = b.mul(b.rotate_half(q), sin);
  b.output("y", b.add(qc, rs));
  return b.build();
}

Graph exp_add() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  b.output("y", b.add(b.exp(x), x));
  return b.build();
}

// exp0 iterates over [16], mul0 over [4, 16].
Graph vector_into_matrix() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto w = b.input("w", f32, {16});
  b.output("y", b.mul(x, b.exp(w)));
  return b.build();
}

// add0 = transpose(z) + matmul(x, w): the MatMul's epilogue would hold the Transpose.
Graph transpose_beside_matmul() {
  GraphBuilder b;
  auto x = b.input("x", f32, cube());
  auto z = b.input("z", f32, cube());
  auto t = b.transpose(z, {1, 0, 2});
  auto y = b.matmul(x, b.constant(Tensor::random(f32, {16, 16}, 1)));
  b.output("y", b.add(t, y));
  return b.build();
}

Graph transpose_of_computed() {
  GraphBuilder b;
  auto x = b.input("x", f32, cube());
  b.output("y", b.transpose(b.exp(x), {1, 0, 2}));
  return b.build();
}

// x is read through transpose0 and, untransposed, by add0.
Graph transposed_and_plain() {
  GraphBuilder b;
  auto x = b.input("x", f32, cube());
  b.output("y", b.add(b.transpose(x, {1, 0, 2}), x));
  return b.build();
}

// x [44, rows] meets the domain [44, 44]: rows against 44 agrees only when rows is 1 at run
// time (or 44).
Graph symbol_against_size() {
  GraphBuilder b;
  auto x = b.input("x", f32, {44, "rows"});
  auto col = b.input("col", f32, {44});
  b.output("y", b.exp(b.add(x, col)));
  return b.build();
}

// A chain of kMaxGroupOps + 1 Negs: the last one does not join.
Graph long_chain() {
  GraphBuilder b;
  auto v = b.input("x", f32, {4, 16});
  for (int i = 0; i <= kMaxGroupOps; i++) v = b.neg(v);
  b.output("y", v);
  return b.build();
}

Graph add_mul() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  b.output("y", b.mul(b.add(x, x), x));
  return b.build();
}

// The sum feeds the norm and is an output too.
Graph add_rms_norm_with_sum() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 16});
  auto s = b.add(x, x);
  b.output("normed", b.rms_norm(s, b.input("w", f32, {16})));
  b.output("sum", s);
  return b.build();
}

// exp0 reaches add0 directly and through two Transposes that swap rows with columns (their own
// kernels): fusing exp0 into add0 would wait for a kernel that reads exp0.
Graph path_through_another_kernel() {
  GraphBuilder b;
  auto x = b.input("x", f32, {8, 8});
  auto a = b.exp(x);
  b.output("y", b.add(a, b.transpose(b.transpose(a, {1, 0}), {1, 0})));
  return b.build();
}

Graph add_layer_norm() {
  GraphBuilder b;
  auto x = b.input("x", f32, {4, 4096});
  auto w = b.input("w", f32, {4096});
  auto bias = b.input("b", f32, {4096});
  b.output("y", b.layer_norm(b.add(x, x), w, bias, 1e-5));
  return b.build();
}

// A u8 value cast to f32, then exp: the Cast reads the u8 value and keeps its own kernel.
Graph cast_of_u8() {
  GraphBuilder b;
  auto x = b.input("x", u8, {4, 16});
  b.output("y", b.exp(b.cast(x, f32)));
  return b.build();
}

// An i64 chain generated kernels cannot compute: as one group it would run op by op.
Graph i64_mask() {
  GraphBuilder b;
  auto x = b.input("x", DType::i64, {8, 8});
  auto y = b.input("y", DType::i64, {8, 1});
  auto a = b.input("a", f32, {8, 8});
  auto c = b.less(b.sub(x, y), b.scalar(0, DType::i64));
  b.output("z", b.where(c, a, b.scalar(-1e4)));
  return b.build();
}

// One case per check, each an edge that check is the first to object to.
const std::map<std::string, CheckCase>& check_cases() {
  static const std::map<std::string, CheckCase> kCases = {
      {"HostNode", {host_between, "", kUb, "neg0", "print"}},
      {"AttentionKernel", {exp_into_attention, "", kUb, "exp0", "matmul0"}},
      {"Profitable", {i64_mask, "", kUb, "sub0", "less0"}},
      {"OpClass", {add_into_matmul, "", kUb, "add0", "matmul0"}},
      {"Int8Value", {cast_of_u8, "", kUb, "cast0", "exp0"}},
      {"MatMulPrologue", {exp_before_epilogue, "", kUb, "exp0", "add0"}},
      {"VectorMatMulRows", {vector_matmul_softmax, "", kUb, "exp0", "softmax0"}},
      {"PermutedInput", {rope, "", kUb, "add0", "mul0"}},
      {"RuleOff",
       {exp_add, R"({"Switch": {"UBFusion": {"ElementwiseFusion": "off"}}})", kUb, "exp0", "add0"}},
      {"Domain", {vector_into_matrix, "", kUb, "exp0", "mul0"}},
      {"TransposeIntoMatMul", {transpose_beside_matmul, "", kUb, "matmul0", "add0"}},
      {"InputFromMemory", {transpose_of_computed, "", kUb, "exp0", "transpose0"}},
      {"OneRowMap", {transposed_and_plain, "", kUb, "transpose0", "add0"}},
      {"RunTimeBroadcast", {symbol_against_size, "", kUb, "add0", "exp0"}},
      {"GroupLimit", {long_chain, "", kUb, "neg23", "neg24"}},
      {"ForbiddenPattern",
       {add_mul,
        R"({"Patterns": [{"name": "NoAddMul", "ops": ["Add", "Mul"], "action": "forbid"}]})", kUb,
        "add0", "mul0"}},
      {"MultiOutput",
       {add_rms_norm_with_sum, R"({"Switch": {"UBFusion": {"MultiOutputFusion": "off"}}})", kUb,
        "add0", "rmsnorm0"}},
      {"Cycle", {path_through_another_kernel, "", kUb, "exp0", "add0"}},
      {"UbCapacity", {add_layer_norm, "", 1024, "add0", "layernorm0"}},
  };
  return kCases;
}

TEST(FusionChecks, NamesAreUnique) {
  std::set<std::string_view> seen;
  for (const FusionCheck& c : fusion_checks()) {
    EXPECT_TRUE(seen.insert(c.name).second) << c.name << " names two checks";
    EXPECT_FALSE(c.when.empty()) << c.name;
  }
}

// Each reason but Fused is some check's: explain's reason table has nothing that cannot happen.
TEST(FusionChecks, EveryReasonHasACheck) {
  std::set<FusionReason> reasons;
  for (const FusionCheck& c : fusion_checks()) reasons.insert(c.reason);
  for (int r = int(FusionReason::HostSync); r <= int(FusionReason::GroupLimit); r++) {
    EXPECT_TRUE(reasons.count(FusionReason(r)))
        << fusion_reason_name(FusionReason(r)) << " is no check's reason";
  }
}

// Each check objects, with its own reason, to the edge of its case: the first to object there,
// so the cases also hold every check after the ones before it that would pass the edge.
TEST(FusionChecks, EveryCheckIsReachable) {
  std::set<std::string> names;
  for (const FusionCheck& c : fusion_checks()) {
    names.insert(std::string(c.name));
    auto it = check_cases().find(std::string(c.name));
    if (it == check_cases().end()) {
      ADD_FAILURE() << "the check " << c.name
                    << " has no case in check_cases(): add a graph whose edge "
                    << "it is the first to object to";
      continue;
    }
    const CheckCase& k = it->second;
    Partition part = partition(k);
    EXPECT_EQ(objection(part, k.producer, k.consumer), c.name)
        << k.producer << " -> " << k.consumer << "\n"
        << decisions_text(part);
    for (size_t i = 0; i < part.decisions.size(); i++) {
      if (part.objected_by[i] == c.name) {
        EXPECT_EQ(part.decisions[i].reason, c.reason) << c.name;
      }
    }
  }
  for (auto& [name, k] : check_cases()) EXPECT_TRUE(names.count(name)) << name << " is not a check";
}

// The check named beside a decision says why it is what it is: an edge that fused or a note on a
// whole group has none, every other decision has the check whose reason it carries.
TEST(FusionChecks, ObjectedByLinesUpWithDecisions) {
  for (auto& [name, k] : check_cases()) {
    Partition part = partition(k);
    ASSERT_EQ(part.objected_by.size(), part.decisions.size()) << name;
    for (size_t i = 0; i < part.decisions.size(); i++) {
      const FusionDecision& d = part.decisions[i];
      const std::string_view by = part.objected_by[i];
      if (d.reason == FusionReason::Fused) {
        EXPECT_TRUE(by.empty()) << name << ": " << d.message;
        continue;
      }
      if (by.empty()) {  // the two-pass note on a whole group
        EXPECT_EQ(d.reason, FusionReason::BufferCapacity) << name << ": " << d.message;
        EXPECT_NE(d.message.find("two-pass"), std::string::npos) << d.message;
        continue;
      }
      bool found = false;
      for (const FusionCheck& c : fusion_checks()) {
        if (c.name != by) continue;
        found = true;
        EXPECT_EQ(d.reason, c.reason) << name << ": " << by;
      }
      EXPECT_TRUE(found) << by;
    }
  }
}

// Where two checks would both object, the earlier in the list decides.
TEST(FusionChecks, EarlierCheckWins) {
  // A Host node is no fusible class either: HostNode comes before OpClass.
  EXPECT_EQ(objection(partition(host_between), "neg0", "print"), "HostNode");
  // A switched-off rule is reported before the shapes that would not fuse anyway.
  const Partition off =
      partition(vector_into_matrix, R"({"Switch": {"UBFusion": {"ElementwiseFusion": "off"}}})");
  EXPECT_EQ(objection(off, "exp0", "mul0"), "RuleOff");
  // A forbidden pattern is reported before the extra output its group would need.
  const Partition forbid =
      partition(add_rms_norm_with_sum, R"({"Switch": {"UBFusion": {"MultiOutputFusion": "off"}},
      "Patterns": [{"name": "NoAddNorm", "ops": ["Add", "RMSNorm"], "action": "forbid"}]})");
  EXPECT_EQ(objection(forbid, "add0", "rmsnorm0"), "ForbiddenPattern");
}

// The checks of each member are asked before the next member's: of two members that each meet
// a different check, the first member's decides, whatever the checks' order. Here the MatMul's
// epilogue would hold a RotateHalf of its own output (InputFromMemory) and, after it, a row
// Transpose (TransposeIntoMatMul, earlier in the list).
TEST(FusionChecks, MemberChecksGoMemberByMember) {
  GraphBuilder b;
  auto x = b.input("x", f32, cube());
  auto z = b.input("z", f32, cube());
  auto y = b.matmul(x, b.constant(Tensor::random(f32, {16, 16}, 1)));
  auto v = b.add(y, b.input("bias", f32, {16}));
  auto r = b.rotate_half(v);
  auto t = b.transpose(z, {1, 0, 2});
  b.output("out", b.add(b.add(r, t), y));
  Graph g = b.build();
  const auto order = g.topo_order();
  auto pos = [&](const Node* n) {
    return std::find(order.begin(), order.end(), n) - order.begin();
  };
  ASSERT_LT(pos(r->producer), pos(t->producer)) << "the RotateHalf must come first";
  Partition part = partition([&] { return std::move(g); });
  EXPECT_EQ(objection(part, "matmul0", "add2"), "InputFromMemory") << decisions_text(part);
}

std::string read_source(const std::string& rel) {
  std::ifstream f(std::string(UBFUSE_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

std::string when_text(const FusionCheck& c) {
  return (c.each_member ? "each member: " : "") + std::string(c.when);
}

// partition.h's list: "//   Name  Reason  when", the text wrapped at 100 columns.
std::vector<std::string> header_lines() {
  constexpr size_t kName = 20, kReason = 16, kWidth = 100;
  const std::string indent = "//   ";
  std::vector<std::string> out;
  for (const FusionCheck& c : fusion_checks()) {
    std::string head = indent + std::string(c.name);
    head.resize(indent.size() + kName, ' ');
    head += fusion_reason_name(c.reason);
    head.resize(indent.size() + kName + kReason, ' ');
    std::string line = head;
    bool empty = true;
    std::stringstream words(when_text(c));
    for (std::string w; words >> w;) {
      if (!empty && line.size() + 1 + w.size() > kWidth) {
        out.push_back(line);
        line = "//" + std::string(head.size() - 2, ' ');
        empty = true;
      }
      line += (empty ? "" : " ") + w;
      empty = false;
    }
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> doc_rows() {
  std::vector<std::string> out = {"| check | reason | fuses only when |", "|---|---|---|"};
  for (const FusionCheck& c : fusion_checks()) {
    out.push_back("| `" + std::string(c.name) + "` | `" +
                  std::string(fusion_reason_name(c.reason)) + "` | " + when_text(c) + " |");
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (auto& l : lines) s += l + "\n";
  return s;
}

// The block of `file` that starts at the line `first` and runs while lines start with `prefix`.
std::vector<std::string> block(const std::string& file, const std::string& first,
                               const std::string& prefix) {
  auto lines = lines_of(read_source(file));
  std::vector<std::string> out;
  auto it = std::find(lines.begin(), lines.end(), first);
  for (; it != lines.end() && it->rfind(prefix, 0) == 0; ++it) out.push_back(*it);
  return out;
}

TEST(FusionChecks, PartitionHeaderListsTheChecks) {
  const auto want = header_lines();
  for (auto& l : want) EXPECT_LE(l.size(), 100u) << "too long for the header: " << l;
  const auto got = block("src/fusion/partition.h", want.front(), "//   ");
  EXPECT_TRUE(got == want)
      << "src/fusion/partition.h's list of checks differs from fusion_checks() "
         "(src/fusion/fusion_checks.cc); replace the list that starts with its first check by:\n"
      << joined(want);
}

TEST(FusionChecks, ArchitectureDocListsTheChecks) {
  const auto want = doc_rows();
  const auto got = block("docs/architecture.md", want.front(), "|");
  EXPECT_TRUE(got == want)
      << "docs/architecture.md's table of fusion checks differs from fusion_checks() "
         "(src/fusion/fusion_checks.cc); replace the table under \"Fusion analysis\" by:\n"
      << joined(want);
}

}  // namespace
}  // namespace ubfuse
