// Fuzzes the ONNX importer: any bytes either import or throw ubfuse::Error (OnnxUnsupportedError
// included). A model that imports is compiled and, when its inputs are small, run in eager and
// graph mode against the double reference (fuzz_common.h); symbolic dims are bound to 2.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_common.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

// An empty folder: external data references must stay inside it and find nothing there.
const std::string& data_dir() {
  static const std::string d = [] {
    auto p = std::filesystem::temp_directory_path() / "ubfuse-fuzz-onnx-empty";
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

void one_input(const std::string& bytes) {
  ImportOptions io;
  io.external_data_dir = data_dir();
  OnnxModel model = import_onnx_model_from_bytes(bytes, io);
  const Graph& g = model.graph;
  fuzz::Inputs inputs;
  uint64_t seed = 1;
  for (auto* v : g.inputs()) {
    Sizes s;
    int64_t n = 1;
    for (auto& d : v->shape) {
      s.push_back(d.is_static() ? d.value() : 2);
      n *= std::max<int64_t>(s.back(), 1);
      if (n > (1 << 16)) return;  // too big to run per input; importing it was the test
    }
    inputs[v->name] = is_float(v->dtype) ? Tensor::random(v->dtype, s, seed++)
                                         : Tensor::random(v->dtype, s, seed++, 0, 2);
  }
  CompiledModel eager = compile(g, {{"ge.exec.enableOperatorFusion", "0"}});
  CompiledModel fused =
      compile(g, {{"ge.exec.enableOperatorFusion", "1"}, {"codegen", "interpreter"}});
  fuzz::RefOutputs want = ref::run_graph(g, inputs);
  fuzz::compare(g, inputs, want, eager.run(inputs), "eager");
  const ref::KernelOfNode kernel_of = fuzz::kernel_of_node(fused);
  fuzz::compare(g, inputs, want, fused.run(inputs), "graph", &kernel_of);
}

}  // namespace
}  // namespace ubfuse

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ubfuse::one_input(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const ubfuse::Error&) {
  }
  return 0;
}
