// Keeps the documentation true to the code: every option and every fusion rule is documented,
// and README's Layout names every folder of the tree.
#include <filesystem>
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

// Folders are named in README's Layout table as `path`; the contents of fixture and corpus
// folders are data, named by their parent.
TEST(Docs, ReadmeLayoutNamesEveryFolder) {
  namespace fs = std::filesystem;
  const std::string readme = read_doc("README.md");
  const fs::path root(UBFUSE_SOURCE_DIR);
  const std::vector<std::string> data_parents = {"fuzz/corpus", "tests/layers",
                                                 "tests/models/onnx_cases", "tests/models/refs"};
  int checked = 0;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    if (!it->is_directory()) continue;
    const std::string rel = fs::relative(it->path(), root).string();
    const std::string name = it->path().filename().string();
    bool skip = (name.front() == '.' && rel != ".ci") || rel.rfind("build", 0) == 0;
    for (auto& d : data_parents) skip = skip || rel.rfind(d + "/", 0) == 0;
    if (skip) {
      it.disable_recursion_pending();
      continue;
    }
    checked++;
    EXPECT_NE(readme.find("`" + rel + "`"), std::string::npos)
        << "README.md's Layout does not name the folder " << rel;
  }
  EXPECT_GT(checked, 20);
}

}  // namespace
}  // namespace ubfuse
