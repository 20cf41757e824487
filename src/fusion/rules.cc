#include "fusion/rules.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ubfuse/error.h"
#include "ubfuse/op.h"
#include "util/read_file.h"

namespace ubfuse {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool parse_switch(const nlohmann::json& v, const std::string& where, const std::string& src) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "on") return true;
    if (s == "off") return false;
  }
  throw Error("fusion rules file " + src + ": " + where + " must be \"on\" or \"off\", got " +
              v.dump());
}

std::map<std::string, bool> parse_section(const nlohmann::json& j, const std::string& section,
                                          const std::vector<std::string>& known,
                                          const std::string& src) {
  std::map<std::string, bool> out;
  if (!j.is_object()) {
    throw Error("fusion rules file " + src + ": Switch." + section + " must be an object");
  }
  for (auto& [k, v] : j.items()) {
    if (k != "ALL" && std::find(known.begin(), known.end(), k) == known.end()) {
      throw Error("fusion rules file " + src + ": Switch." + section + " has unknown name '" + k +
                  "'; known: ALL, " + join(known));
    }
    out[k] = parse_switch(v, "Switch." + section + "." + k, src);
  }
  return out;
}

}  // namespace

bool FusionRules::pass_enabled(const std::string& pass) const {
  auto it = graph_fusion.find(pass);
  if (it != graph_fusion.end()) return it->second;
  it = graph_fusion.find("ALL");
  return it == graph_fusion.end() || it->second;
}

bool FusionRules::rule_enabled(const std::string& rule) const {
  auto it = ub_fusion.find(rule);
  if (it != ub_fusion.end()) return it->second;
  it = ub_fusion.find("ALL");
  return it == ub_fusion.end() || it->second;
}

const std::vector<std::string>& ub_fusion_rule_names() {
  static const std::vector<std::string> v = {
      "ElementwiseFusion",        // elementwise/broadcast producer into elementwise consumer
      "ReductionPrologueFusion",  // elementwise producer into a row reduction
      "ReductionEpilogueFusion",  // row reduction into elementwise consumers
      "MatMulEpilogueFusion",     // MatMul into elementwise consumers of its output
      "ConvEpilogueFusion",       // Conv into elementwise consumers of its output
      "MultiOutputFusion",        // keep fusing when an inner value is also needed outside
      "RowPermuteFusion",         // a row permutation (RotateHalf) into the ops that read it
      "RowTransposeFusion",       // a Transpose keeping the last axis into the ops that read it
      "AttentionFusion",          // MatMul -> scale/mask -> Softmax -> MatMul as one kernel
  };
  return v;
}

const std::vector<std::string>& graph_fusion_pass_names() {
  static const std::vector<std::string> v = {"simplify", "canonicalize", "dce", "quant_matmul"};
  return v;
}

FusionRules parse_fusion_rules(const std::string& text, const std::string& src) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw Error("fusion rules file " + src + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error("fusion rules file " + src + ": top level must be an object");
  FusionRules r;
  r.source = src;
  for (auto& [k, v] : j.items()) {
    if (k == "Switch") {
      if (!v.is_object()) throw Error("fusion rules file " + src + ": Switch must be an object");
      for (auto& [sk, sv] : v.items()) {
        if (sk == "GraphFusion") {
          r.graph_fusion = parse_section(sv, sk, graph_fusion_pass_names(), src);
        } else if (sk == "UBFusion") {
          r.ub_fusion = parse_section(sv, sk, ub_fusion_rule_names(), src);
        } else {
          throw Error("fusion rules file " + src + ": unknown field Switch." + sk +
                      "; known: GraphFusion, UBFusion");
        }
      }
    } else if (k == "Patterns") {
      if (!v.is_array()) throw Error("fusion rules file " + src + ": Patterns must be an array");
      for (size_t i = 0; i < v.size(); i++) {
        const auto& p = v[i];
        std::string where = "Patterns[" + std::to_string(i) + "]";
        if (!p.is_object() || !p.contains("name") || !p["name"].is_string() || !p.contains("ops") ||
            !p["ops"].is_array() || p["ops"].size() < 2) {
          throw Error("fusion rules file " + src + ": " + where +
                      " needs \"name\" (string) and \"ops\" (array of at least 2 op names)");
        }
        FusionPattern fp;
        fp.name = p["name"].get<std::string>();
        for (auto& [pk, pv] : p.items()) {
          if (pk != "name" && pk != "ops" && pk != "action") {
            throw Error("fusion rules file " + src + ": " + where + " has unknown field '" + pk +
                        "'; known: name, ops, action");
          }
        }
        for (auto& o : p["ops"]) {
          OpKind kind;
          if (!o.is_string() || !op_from_name(o.get<std::string>(), &kind)) {
            std::vector<std::string> names;
            for (int q = 0; q < kNumOps; q++) names.emplace_back(op_name(OpKind(q)));
            throw Error("fusion rules file " + src + ": " + where + ".ops has unknown op " +
                        o.dump() + "; known ops: " + join(names));
          }
          fp.ops.push_back(o.get<std::string>());
        }
        if (p.contains("action")) {
          std::string a = p["action"].is_string() ? p["action"].get<std::string>() : "";
          if (a != "fuse" && a != "forbid") {
            throw Error("fusion rules file " + src + ": " + where +
                        ".action must be \"fuse\" or \"forbid\", got " + p["action"].dump());
          }
          fp.forbid = a == "forbid";
        }
        r.patterns.push_back(fp);
      }
    } else {
      throw Error("fusion rules file " + src + ": unknown field '" + k +
                  "'; known: Switch, Patterns");
    }
  }
  return r;
}

FusionRules load_fusion_rules(const std::string& path) {
  std::optional<std::string> text = read_whole_file(path);
  if (!text) {
    throw Error(
        "fusion rules file " + path +
        " cannot be read; hint: check ge.fusion_optimizer_config_path / ge.fusionSwitchFile");
  }
  return parse_fusion_rules(*text, path);
}

}  // namespace ubfuse
