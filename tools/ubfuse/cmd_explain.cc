// `ubfuse explain <demo|MODEL.onnx>`: the fusion report (groups, boundaries with reasons and
// hints, predicted traffic eager vs graph) and, with --dot, before/after pictures. The logic is
// in src/explain so tests call it directly; this file only turns flags into ExplainOptions.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "seed_block.h"
#include "ubfuse/explain.h"
#include "ubfuse/onnx.h"

namespace ubfuse::cli {

namespace {

struct ExplainArgs {
  std::string target;
  std::string shape = "2,2048,4096";
  std::string dtype = "f32";
  std::vector<std::string> options;
  std::vector<std::string> dims;
  std::string rules;
  std::string dot_dir;
  bool json = false;
  bool print_mid = false;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run_explain(const ExplainArgs& a) {
  ExplainOptions o;
  o.options = parse_kv_options(a.options);
  if (!a.rules.empty()) o.options["ge.fusion_optimizer_config_path"] = a.rules;
  o.dims = parse_dims(a.dims);
  Graph g;
  if (a.target == "demo") {
    SeedBlockOptions so;
    so.shape = parse_sizes(a.shape, "--shape");
    so.dtype = parse_dtype(a.dtype);
    so.print_mid = a.print_mid;
    g = seed_block(so);
    o.model_name = std::string("demo silu(layer_norm(x + residual))") +
                   (a.print_mid ? " with a Host print after layer_norm" : "") + ", " + a.dtype +
                   sizes_str(so.shape);
  } else if (ends_with(a.target, ".onnx")) {
    if (a.print_mid) throw Error("--print-mid only applies to 'demo'");
    try {
      g = import_onnx(a.target);  // symbolic dims stay symbolic; --dim gives them values
    } catch (const OnnxNeedsStaticDimsError&) {
      // The model needs static dims at import: use the --dim values there instead.
      ImportOptions io;
      io.static_dims = o.dims;
      g = import_onnx(a.target, io);
      o.dims.clear();
    }
    o.model_name = a.target;
  } else {
    throw Error("explain expects 'demo' or a MODEL.onnx path, got '" + a.target + "'");
  }

  ExplainReport r;
  {
    InterruptibleCompile ctrl_c;
    o.on_progress = ctrl_c.callback();
    r = explain(g, o);
  }
  DotFiles dots;
  if (!a.dot_dir.empty()) dots = write_dot_files(r, a.dot_dir);
  if (a.json) {
    nlohmann::json j = nlohmann::json::parse(explain_json(r));
    if (!a.dot_dir.empty()) j["dot"] = {{"written", dots.written}, {"note", dots.note}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s", format_explain(r).c_str());
  if (!a.dot_dir.empty()) {
    std::printf("\nPictures:\n");
    for (auto& p : dots.written) std::printf("  %s\n", p.c_str());
    if (!dots.note.empty()) std::printf("  (%s)\n", dots.note.c_str());
  }
  return 0;
}

}  // namespace

void register_explain(CLI::App& app, std::vector<std::function<int()>>& actions) {
  auto a = std::make_shared<ExplainArgs>();
  auto* c = app.add_subcommand("explain", "why ops fused or not, and the bytes it saves");
  c->add_option("target", a->target, "demo | MODEL.onnx")->required();
  c->add_option("--shape", a->shape, "demo shape B,S,H")->capture_default_str();
  c->add_option("--dtype", a->dtype, "demo dtype f32|bf16|f16")->capture_default_str();
  c->add_option("--option", a->options, "compile option k=v (repeatable)");
  c->add_option("--rules", a->rules, "fusion rules file (JSON)");
  c->add_option("--dim", a->dims, "value of a symbolic dim NAME=N (repeatable)");
  c->add_option("--dot", a->dot_dir, "write before/after .dot (and .svg with Graphviz) here");
  c->add_flag("--json", a->json, "print one JSON object");
  c->add_flag("--print-mid", a->print_mid, "demo: put a Host print between LayerNorm and Silu");
  actions.push_back(nullptr);
  size_t slot = actions.size() - 1;
  c->callback([a, &actions, slot] { actions[slot] = [a] { return run_explain(*a); }; });
}

}  // namespace ubfuse::cli
