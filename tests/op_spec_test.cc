// Every op of include/ubfuse/ops.def is complete: a reference implementation, a conformance case,
// an ONNX mapping or a stated reason why none, and a row in docs/onnx.md. And no switch over an
// op enum hides a missing case behind `default:` (-Werror=switch then names every switch a new
// op must join).
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "onnx_doc.h"
#include "ops_conformance_cases.h"
#include "test_util.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Builds each conformance case at a small shape and evaluates its nodes one by one with the
// reference: every op gets its reference called on a tiny input, and is seen in some case.
TEST(OpSpec, EveryOpHasAReferenceAndAConformanceCase) {
  std::map<OpKind, std::string> case_of;
  for (const testing::OpCase& c : testing::op_conformance_cases()) {
    GraphBuilder b;
    b.output("y", c.build(b, DType::f32, Sizes{2, 3}));
    Graph g = b.build();
    std::map<const Value*, ref::RefTensor> vals;
    uint64_t seed = 1;
    for (const Value* v : g.inputs()) {
      vals[v] =
          ref::from_tensor(Tensor::random(v->dtype, static_sizes(v->shape), seed++, c.lo, c.hi));
    }
    for (Node* n : g.topo_order()) {
      case_of.emplace(n->op, c.name);
      std::vector<ref::RefTensor> in;
      for (const Value* v : n->inputs) in.push_back(vals.at(v));
      std::vector<ref::RefTensor> out = ref::eval_node(*n, in);
      ASSERT_EQ(out.size(), n->outputs.size()) << n->describe();
      for (size_t i = 0; i < out.size(); i++) {
        EXPECT_EQ(out[i].sizes, static_sizes(n->outputs[i]->shape)) << n->describe();
        vals[n->outputs[i]] = out[i];
      }
    }
  }
  for (int k = 0; k < kNumOps; k++) {
    EXPECT_TRUE(case_of.count(OpKind(k)))
        << op_name(OpKind(k)) << " is in no case of tests/ops_conformance_test.cc";
  }
}

TEST(OpSpec, EveryOpHasAnOnnxMappingOrAReason) {
  std::set<std::string> supported;
  for (const std::string& op : onnx_supported_ops()) supported.insert(op);
  for (int k = 0; k < kNumOps; k++) {
    const OpInfo& i = op_info(OpKind(k));
    const std::string onnx(i.onnx_name);
    switch (i.onnx) {
      case OnnxImport::Direct:
        EXPECT_TRUE(is_math_op(i.kind)) << i.name << ": only UBF_MATH rows import directly";
        EXPECT_TRUE(supported.count(onnx)) << i.name << ": ONNX op " << onnx << " is not imported";
        break;
      case OnnxImport::Own:
        EXPECT_TRUE(supported.count(onnx)) << i.name << ": ONNX op " << onnx << " has no converter";
        break;
      case OnnxImport::None:
        EXPECT_GT(onnx.size(), 20u) << i.name << ": say why no ONNX op maps to it";
        EXPECT_FALSE(supported.count(std::string(i.name)))
            << i.name << ": an ONNX op of that name is imported, yet ops.def says none maps";
        break;
    }
  }
}

TEST(OpSpec, EveryOpHasARowInTheOnnxDoc) {
  const std::string doc = read_file(fs::path(UBFUSE_SOURCE_DIR) / "docs/onnx.md");
  ASSERT_FALSE(doc.empty());
  const std::string table = testing::onnx_op_table();
  std::istringstream rows(table);
  for (std::string row; std::getline(rows, row);) {
    if (row.rfind("| ", 0) == 0) {
      EXPECT_NE(doc.find(row + "\n"), std::string::npos) << "docs/onnx.md lacks the row " << row;
    }
  }
  EXPECT_NE(doc.find(table), std::string::npos)
      << "docs/onnx.md is out of step with ops.def; regenerate it (UBFUSE_WRITE_ONNX_DOC, see "
         "tests/onnx_conformance_test.cc) or paste:\n"
      << table;
}

// Source text without comments, string and character literals (their braces are not code).
std::string code_only(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') i++;
      out += '\n';
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t e = s.find("*/", i + 2);
      for (size_t j = i; j < std::min(e, s.size()); j++) out += s[j] == '\n' ? '\n' : ' ';
      i = e == std::string::npos ? s.size() : e + 1;
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i];
      if (q == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1]))) {
        out += s[i];  // a digit separator (1'000)
        continue;
      }
      out += q;
      for (i++; i < s.size() && s[i] != q; i++) {
        if (s[i] == '\\') i++;
      }
      out += q;
    } else {
      out += s[i];
    }
  }
  return out;
}

TEST(OpSpec, NoSwitchOverAnOpEnumHasADefault) {
  // Case labels of OpKind, the kernel IR's Op and the eager kernels' op codes.
  const std::regex op_case(R"(case\s+(OpKind|Op|kir::Op)::|case\s+(cpu::)?k[A-Z]\w*\s*:)");
  const std::regex default_label(R"(\bdefault\s*:)");
  const std::regex switch_stmt(R"(\bswitch\s*\()");
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(UBFUSE_SOURCE_DIR) / "src")) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    files++;
    const std::string code = code_only(read_file(e.path()));
    for (auto m = std::sregex_iterator(code.begin(), code.end(), switch_stmt);
         m != std::sregex_iterator(); ++m) {
      const size_t at = size_t(m->position());
      const size_t open = code.find('{', at);
      if (open == std::string::npos) break;
      // The switch's own labels: those at brace depth 1 of its body.
      std::string own;
      int depth = 0;
      size_t i = open;
      for (; i < code.size(); i++) {
        if (code[i] == '{') depth++;
        if (code[i] == '}' && --depth == 0) break;
        if (depth == 1 && code[i] != '{') own += code[i];
      }
      if (std::regex_search(own, op_case) && std::regex_search(own, default_label)) {
        const auto line = std::count(code.begin(), code.begin() + long(at), '\n') + 1;
        ADD_FAILURE() << e.path().string() << ":" << line
                      << ": a switch over an op enum has a default: arm; name every op instead";
      }
    }
  }
  EXPECT_GT(files, 50);
}

}  // namespace
}  // namespace ubfuse
