// Whole models as exporters write them (tests/models/README.md): each .onnx file runs every
// reference set of its manifest from one compiled model per mode, against onnxruntime's stored
// outputs and the double-precision reference. A model that does not load yet is listed with the
// op that stops it, and the test checks that this is still the reason, so support landing for it
// turns the entry into a failure until the model runs here.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "ubfuse/npy.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

const std::string kModels = std::string(UBFUSE_SOURCE_DIR) + "/tests/models/";

// File -> what its import stops at today: an unsupported ONNX op, or a fragment of the error.
const std::map<std::string, std::string> kBlockedBy = {};

// onnxruntime and ubfuse differ by f32 rounding through a few layers.
::testing::AssertionResult near(const Tensor& got, const Sizes& sizes,
                                const std::vector<double>& want, const std::string& what) {
  if (got.sizes() != sizes) {
    return ::testing::AssertionFailure()
           << what << ": sizes " << sizes_str(got.sizes()) << ", expected " << sizes_str(sizes);
  }
  for (int64_t i = 0; i < got.numel(); i++) {
    double g = got.get(i), w = want[size_t(i)];
    double err = std::fabs(g - w) / (1e-4 + 1e-3 * std::fabs(w));
    if (!(err <= 1)) {
      return ::testing::AssertionFailure() << what << " element " << i << ": " << g << " vs " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

void check_model(const std::string& model) {
  std::ifstream f(kModels + "refs/" + model + "/manifest.json");
  ASSERT_TRUE(f) << model;
  nlohmann::json man = nlohmann::json::parse(f);
  std::vector<std::string> files = man["files"];
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    auto blocked = kBlockedBy.find(file);
    if (blocked != kBlockedBy.end()) {
      try {
        import_onnx(kModels + file);
        ADD_FAILURE() << file << " loads now: take it off kBlockedBy";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(blocked->second), std::string::npos) << e.what();
      }
      continue;
    }
    Graph g = import_onnx(kModels + file);
    for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
      CompiledModel m = compile(g, opts);
      for (auto& set : man["sets"]) {
        if (!set["runs"].contains(file)) continue;
        const std::string dir = kModels + "refs/" + model + "/" + set["name"].get<std::string>();
        std::map<std::string, Tensor> inputs;
        for (const std::string in : set["runs"][file]) {
          inputs[in] = read_npy(dir + "/in/" + in + ".npy");
        }
        auto got = m.run(inputs);
        auto ref = ref::run_graph(g, inputs);
        for (auto& [name, v] : g.outputs()) {
          std::string what =
              set["name"].get<std::string>() + " " + name + " fusion=" + opts.begin()->second;
          Tensor want = read_npy(dir + "/ort/" + name + ".npy");
          std::vector<double> w(size_t(want.numel()));
          for (int64_t i = 0; i < want.numel(); i++) w[size_t(i)] = want.get(i);
          EXPECT_TRUE(near(got.at(name), want.sizes(), w, what + " vs onnxruntime"));
          EXPECT_TRUE(near(got.at(name), ref.at(name).sizes, ref.at(name).data,
                           what + " vs the reference"));
        }
      }
    }
  }
}

TEST(Models, BertStack) { check_model("bert_stack"); }
// bert_stack quantized as onnxruntime's dynamic quantizer writes it (quantize_model.py).
TEST(Models, BertStackInt8) { check_model("bert_stack_int8"); }
// The same on ubfuse's exact int8 product (the pair panels of CPUs without VNNI), wherever the
// test runs.
TEST(Models, BertStackInt8ExactProduct) {
  testing::ScopedEnv no_onednn("UBFUSE_INT8_NO_ONEDNN", "1");
  check_model("bert_stack_int8");
}
TEST(Models, KvDecoder) { check_model("kv_decoder"); }
TEST(Models, LlamaStack) { check_model("llama_stack"); }
TEST(Models, SpeechEncoder) { check_model("speech_encoder"); }
TEST(Models, VitEncoder) { check_model("vit_encoder"); }
TEST(Models, VideoEncoder) { check_model("video_encoder"); }
TEST(Models, RnnStack) { check_model("rnn_stack"); }

}  // namespace
}  // namespace ubfuse
