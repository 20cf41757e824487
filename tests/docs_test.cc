// Keeps the documentation true to the code: every option and every fusion rule is documented.
#include <fstream>
#include <sstream>

#include "compiler/options.h"
#include "fusion/rules.h"
#include "test_util.h"

namespace ubfuse {
namespace {

std::string read_doc(const std::string& rel) {
  std::ifstream f(std::string(UBFUSE_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Docs, OptionsTableIsComplete) {
  std::string doc = read_doc("docs/options.md");
  ASSERT_FALSE(doc.empty());
  for (auto& o : option_table()) {
    EXPECT_NE(doc.find("| `" + o.key + "` |"), std::string::npos) << o.key << " is undocumented";
  }
}

TEST(Docs, FusionRulesAreDocumented) {
  std::string doc = read_doc("docs/fusion-rules.md");
  for (auto& r : ub_fusion_rule_names()) {
    EXPECT_NE(doc.find("`" + r + "`"), std::string::npos) << r;
  }
  for (auto& p : graph_fusion_pass_names()) {
    EXPECT_NE(doc.find("`" + p + "`"), std::string::npos) << p;
  }
}

}  // namespace
}  // namespace ubfuse
