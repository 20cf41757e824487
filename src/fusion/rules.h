// The fusion rules file (JSON), in the CANN fusion-switch shape plus user patterns:
//   {"Switch": {"GraphFusion": {"ALL": "on", "canonicalize": "off"},
//               "UBFusion":    {"ALL": "on", "ReductionEpilogueFusion": "off"}},
//    "Patterns": [{"name": "FusedAddRmsNorm", "ops": ["Add", "RMSNorm"]},
//                 {"name": "NoMulSilu", "ops": ["Mul", "Silu"], "action": "forbid"}]}
// See docs/fusion-rules.md.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ubfuse {

struct FusionPattern {
  std::string name;
  std::vector<std::string> ops;  // op names in launch order
  bool forbid = false;           // forbid a group holding this op sequence instead of naming it
};

struct FusionRules {
  std::string source;                        // file path, for messages
  std::map<std::string, bool> graph_fusion;  // pass name -> on/off ("ALL" included)
  std::map<std::string, bool> ub_fusion;     // fusion rule name -> on/off ("ALL" included)
  std::vector<FusionPattern> patterns;

  bool pass_enabled(const std::string& pass) const;
  bool rule_enabled(const std::string& rule) const;
};

// The UB fusion rules the partitioner's checks apply (fusion_checks.cc), and the graph passes that
// can be switched.
const std::vector<std::string>& ub_fusion_rule_names();
const std::vector<std::string>& graph_fusion_pass_names();

// Parses a rules file; throws Error naming the file, the field and the known names.
FusionRules load_fusion_rules(const std::string& path);
FusionRules parse_fusion_rules(const std::string& json_text, const std::string& source);

}  // namespace ubfuse
