// Real PyTorch exports (tests/models/export_layers.py, torch.onnx.export opset 17, dynamic batch
// and seq): a LLaMA-style decoder layer, a BERT-style encoder layer and a convolutional audio
// front end. ubfuse matches PyTorch's
// outputs in eager and graph mode from one import (symbolic dims) at two sizes, and graph mode
// fuses every norm that follows a residual add with that add.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "ubfuse/npy.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

std::string model_path(const std::string& f) {
  return std::string(UBFUSE_SOURCE_DIR) + "/tests/models/" + f;
}

struct Layer {
  std::string name;
  std::vector<std::string> inputs;
  OpKind norm;
  int norms;            // norm ops in the layer
  int norms_after_add;  // of which follow a residual add (and must fuse with it)
};

const Layer kLlama{"llama_decoder", {"hidden_states", "position_ids"}, OpKind::RMSNorm, 2, 1};
const Layer kBert{"bert_encoder", {"hidden_states", "attention_mask"}, OpKind::LayerNorm, 2, 2};

std::map<std::string, Tensor> load_inputs(const Layer& l, int set) {
  std::map<std::string, Tensor> in;
  for (auto& n : l.inputs) {
    in[n] = read_npy(model_path(l.name + "." + std::to_string(set) + "." + n + ".npy"));
  }
  return in;
}

::testing::AssertionResult matches_torch(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes()) {
    return ::testing::AssertionFailure()
           << sizes_str(got.sizes()) << " vs " << sizes_str(want.sizes());
  }
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); i++) {
    double a = got.get(i), b = want.get(i);
    double err = std::fabs(a - b) / (1e-4 + 1e-3 * std::fabs(b));
    if (!(err <= 1)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs PyTorch " << b;
    }
    worst = std::max(worst, err);
  }
  return ::testing::AssertionSuccess() << "worst error " << worst << " of tolerance";
}

void check_layer(const Layer& l) {
  Graph g = import_onnx(model_path(l.name + ".onnx"));
  EXPECT_EQ(shape_str(g.inputs()[0]->shape), "[batch,seq,64]");
  for (bool fusion : {false, true}) {
    CompiledModel m = compile(g, fusion ? testing::graph_opts() : testing::eager_opts());
    for (int set : {0, 1}) {  // two sizes, one compiled model
      auto in = load_inputs(l, set);
      Tensor want = read_npy(model_path(l.name + "." + std::to_string(set) + ".out.npy"));
      auto got = m.run(in);
      EXPECT_TRUE(matches_torch(got.at("out"), want))
          << l.name << (fusion ? " graph" : " eager") << " mode, set " << set;
    }
  }
}

// An audio front end (export_layers.py conv_stem): reflect Pad with torch's pads arithmetic,
// Conv1d at stride 2 over a symbolic length (a run-time output length), GroupNorm exported as
// Reshape -> InstanceNormalization -> Reshape -> Mul -> Add, GELU from Erf.
TEST(OnnxLayers, ConvStemMatchesPyTorch) {
  const Layer stem{"conv_stem", {"features"}, OpKind::GroupNorm, 2, 0};
  Graph g = import_onnx(model_path("conv_stem.onnx"));
  EXPECT_EQ(shape_str(g.inputs()[0]->shape), "[batch,16,frames]");
  int convs = 0, norms = 0;
  for (Node* n : g.topo_order()) {
    convs += n->op == OpKind::Conv;
    norms += n->op == OpKind::GroupNorm;
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(norms, 2);
  for (bool fusion : {false, true}) {
    CompiledModel m = compile(g, fusion ? testing::graph_opts() : testing::eager_opts());
    for (int set : {0, 1}) {
      Tensor want = read_npy(model_path("conv_stem." + std::to_string(set) + ".out.npy"));
      EXPECT_TRUE(matches_torch(m.run(load_inputs(stem, set)).at("out"), want))
          << (fusion ? "graph" : "eager") << " mode, set " << set;
    }
  }
}

TEST(OnnxLayers, LlamaDecoderMatchesPyTorch) { check_layer(kLlama); }
TEST(OnnxLayers, BertEncoderMatchesPyTorch) { check_layer(kBert); }

std::string kernel_str(const KernelInfo& k) {
  std::string s = k.name + "(";
  for (size_t i = 0; i < k.op_types.size(); i++) s += (i ? "," : "") + k.op_types[i];
  return s + ")";
}

// Graph mode: canonicalization recovers each norm from the exported ops, and the partitioner puts
// every norm that follows a residual add in one kernel with that add.
void check_norm_fusion(const Layer& l) {
  Graph g = import_onnx(model_path(l.name + ".onnx"));
  CompiledModel m = compile(g, testing::graph_opts());
  CompiledModel e = compile(g, testing::eager_opts());
  std::string all;
  int norm_kernels = 0, with_add = 0, norms = 0;
  for (auto& k : m.kernels()) {
    all += kernel_str(k) + " ";
    int n = int(std::count(k.op_types.begin(), k.op_types.end(), std::string(op_name(l.norm))));
    norms += n;
    if (n == 0) continue;
    norm_kernels++;
    // The residual add feeds the norm inside the kernel: it comes first among the kernel's ops.
    auto norm_at = std::find(k.op_types.begin(), k.op_types.end(), std::string(op_name(l.norm)));
    with_add += std::find(k.op_types.begin(), norm_at, "Add") != norm_at;
  }
  EXPECT_EQ(norms, l.norms) << "canonicalization should recover every " << op_name(l.norm)
                            << "; kernels: " << all;
  EXPECT_EQ(norm_kernels, l.norms) << all;
  EXPECT_EQ(with_add, l.norms_after_add) << "every norm after a residual add must share its "
                                            "kernel with the add; kernels: "
                                         << all;
  EXPECT_LT(m.kernels().size(), e.kernels().size()) << all;
  std::printf("[%s] graph mode: %zu kernels (eager: %zu): %s\n", l.name.c_str(), m.kernels().size(),
              e.kernels().size(), all.c_str());
}

TEST(OnnxLayers, LlamaDecoderFusesResidualAddWithRMSNorm) { check_norm_fusion(kLlama); }
TEST(OnnxLayers, BertEncoderFusesResidualAddWithLayerNorm) { check_norm_fusion(kBert); }

// RoPE: canonicalization turns each exported rotate_half (Slice, Neg, Slice, Concat) into
// RotateHalf, and graph mode runs q * cos + rotate_half(q) * sin (and k's) as one kernel each,
// with the heads' Transpose before it as a strided read of the projection.
TEST(OnnxLayers, LlamaDecoderFusesRope) {
  Graph g = import_onnx(model_path("llama_decoder.onnx"));
  std::string all;
  for (bool fusion : {false, true}) {
    CompiledModel m = compile(g, fusion ? testing::graph_opts() : testing::eager_opts());
    int rope = 0;
    for (auto& k : m.kernels()) {
      all += kernel_str(k) + " ";
      for (const char* op : {"Slice", "Neg", "Concat"}) {
        EXPECT_EQ(std::count(k.op_types.begin(), k.op_types.end(), op), 0) << all;
      }
      if (std::count(k.op_types.begin(), k.op_types.end(), "RotateHalf") == 0) continue;
      rope++;
      // Transpose, Mul, RotateHalf, Mul, Add
      EXPECT_EQ(k.op_types.size(), fusion ? 5u : 1u) << kernel_str(k);
      if (!fusion) continue;
      EXPECT_EQ(k.op_types[0], "Transpose") << kernel_str(k);
    }
    EXPECT_EQ(rope, 2) << all;
  }
}

// The text of a file the CLI wrote.
std::string file_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// `ubfuse run` of the exported LLaMA decoder (model files `p`*) on its stored inputs.
std::string run_llama_decoder(const std::string& exe, const std::string& p) {
  return exe + " run " + p + "onnx --input hidden_states=" + p + "0.hidden_states.npy" +
         " --input position_ids=" + p + "0.position_ids.npy";
}

// `ubfuse run` end to end: .npy in, .npy out, compared with PyTorch's output.
TEST(OnnxLayers, UbfuseRunCommandWritesNpyOutputs) {
  std::string exe = std::string(UBFUSE_BINARY_DIR) + "/ubfuse";
  if (!std::ifstream(exe)) GTEST_SKIP() << "build the ubfuse CLI first (" << exe << ")";
  std::string out = ::testing::TempDir() + "ubfuse_run_test";
  std::string p = model_path("llama_decoder.");
  std::string cmd = run_llama_decoder(exe, p) + " --output-dir " + out +
                    " --option codegen=interpreter --json > " + out + ".json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Tensor got = read_npy(out + "/out.npy");
  EXPECT_TRUE(matches_torch(got, read_npy(p + "0.out.npy")));
  std::string text = file_text(out + ".json");
  EXPECT_NE(text.find("\"num_kernels\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"median_ms\""), std::string::npos);
  // Random inputs need sizes for the symbolic dims.
  std::string bad = exe + " run " + p + "onnx > /dev/null 2> " + out + ".err";
  EXPECT_NE(std::system(bad.c_str()), 0);
  std::string etext = file_text(out + ".err");
  EXPECT_NE(etext.find("--dim batch=N"), std::string::npos) << etext;
  std::string rnd = exe + " run " + p + "onnx --dim batch=1 --dim seq=4 --mode eager > /dev/null";
  EXPECT_EQ(std::system(rnd.c_str()), 0);
  // run and explain read --dim alike: one positive integer per name, nothing after it.
  for (const char* cmd : {" run ", " explain "}) {
    for (const char* dim : {"seq=4,5", "seq=0", "=4", "seq"}) {
      std::string bad_dim =
          exe + cmd + p + "onnx --dim batch=1 --dim " + dim + " > /dev/null 2> " + out + ".err";
      EXPECT_NE(std::system(bad_dim.c_str()), 0) << bad_dim;
      EXPECT_NE(file_text(out + ".err").find("must have the form NAME=N with N > 0"),
                std::string::npos)
          << cmd << dim << ": " << file_text(out + ".err");
    }
  }
}

// `ubfuse run --mode both`: graph and eager in one process, each timed --iters times, with graph
// mode's speed-up and how far its outputs are from eager's; --trace takes one mode only.
TEST(OnnxLayers, UbfuseRunBothModesComparesThem) {
  std::string exe = std::string(UBFUSE_BINARY_DIR) + "/ubfuse";
  if (!std::ifstream(exe)) GTEST_SKIP() << "build the ubfuse CLI first (" << exe << ")";
  std::string out = ::testing::TempDir() + "ubfuse_run_both";
  std::string p = model_path("llama_decoder.");
  std::string cmd = run_llama_decoder(exe, p) + " --mode both --iters 3 --output-dir " + out +
                    " --option codegen=interpreter --json > " + out + ".json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // The outputs written are graph mode's.
  EXPECT_TRUE(matches_torch(read_npy(out + "/out.npy"), read_npy(p + "0.out.npy")));
  std::ifstream f(out + ".json");
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["mode"], "both");
  const auto& g = j["modes"]["graph"];
  const auto& e = j["modes"]["eager"];
  EXPECT_LT(g["num_kernels"].get<int>(), e["num_kernels"].get<int>()) << j.dump();
  EXPECT_EQ(g["num_kernels"], j["num_kernels"]);
  EXPECT_GT(g["median_ms"].get<double>(), 0.0);
  EXPECT_GE(e["median_ms"].get<double>(), e["min_ms"].get<double>());
  EXPECT_NEAR(j["graph_speedup"].get<double>(),
              e["median_ms"].get<double>() / g["median_ms"].get<double>(), 1e-9);
  // Fusion reorders float sums only: the outputs agree to a few ulps of their scale.
  EXPECT_GT(j["max_abs_eager"].get<double>(), 0.0);
  EXPECT_LE(j["max_abs_diff"].get<double>(), 1e-4 * j["max_abs_eager"].get<double>()) << j.dump();
  std::string traced = exe + " run " + p + "onnx --dim batch=1 --dim seq=4 --mode both --trace " +
                       out + "/t > /dev/null 2> " + out + ".err";
  EXPECT_NE(std::system(traced.c_str()), 0);
  std::string etext = file_text(out + ".err");
  EXPECT_NE(etext.find("--trace records one mode"), std::string::npos) << etext;
}

}  // namespace
}  // namespace ubfuse
