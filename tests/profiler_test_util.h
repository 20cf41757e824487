// Helpers for the profiler and explain tests: the seed block at small shapes, temp dirs, traces.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace ubfuse::testing {

// silu(layer_norm(x + residual)) with the node names the demo uses; print_mid puts a Host node
// named "print" between layer_norm and silu.
inline Graph seed_graph(Sizes shape, bool print_mid = false, bool symbolic = false) {
  GraphBuilder b;
  Shape s = to_shape(shape);
  if (symbolic) {
    s[0] = Dim("batch");
    s[1] = Dim("seq");
  }
  const int64_t h = shape.back();
  auto x = b.input("x", DType::f32, s);
  auto r = b.input("residual", DType::f32, s);
  auto w = b.constant(Tensor::random(DType::f32, {h}, 7, 0.5, 1.5), "ln_weight");
  auto bias = b.constant(Tensor::random(DType::f32, {h}, 8, -0.1, 0.1), "ln_bias");
  auto sum = b.add(x, r);
  b.name_last("add");
  auto ln = b.layer_norm(sum, w, bias, 1e-5);
  b.name_last("layer_norm");
  if (print_mid)
    ln = b.host(
        ln, [](Tensor&) {}, "print");
  auto y = b.silu(ln);
  b.name_last("silu");
  b.output("y", y);
  return b.build();
}

inline std::map<std::string, Tensor> seed_inputs(const Sizes& shape) {
  return {{"x", Tensor::random(DType::f32, shape, 1)},
          {"residual", Tensor::random(DType::f32, shape, 2)}};
}

// A fresh directory under the system temp dir, unique per process and tag.
inline std::string temp_dir(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() /
           ("ubfuse_test_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return nlohmann::json::parse(f);  // throws (fails the test) on invalid JSON
}

// A fixed roofline so tests never run the bandwidth measurement.
inline void fixed_bandwidth() { ::setenv("UBFUSE_BANDWIDTH_GBPS", "20", 1); }

inline bool have_graphviz() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

}  // namespace ubfuse::testing
