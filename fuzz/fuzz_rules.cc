// Fuzzes the fusion rules file parser: any bytes either parse or throw ubfuse::Error naming the
// field; nothing else (no other exception, no crash) is acceptable.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fusion/rules.h"
#include "ubfuse/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ubfuse::FusionRules r = ubfuse::parse_fusion_rules(text, "fuzz.json");
    // Queries on a parsed file must work for every known name.
    for (auto& p : ubfuse::graph_fusion_pass_names()) (void)r.pass_enabled(p);
    for (auto& n : ubfuse::ub_fusion_rule_names()) (void)r.rule_enabled(n);
  } catch (const ubfuse::Error&) {
  }
  return 0;
}
