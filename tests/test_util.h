// Shared helpers for tests: running a graph in a mode and comparing with the double reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "ubfuse/ubfuse.h"

namespace ubfuse::testing {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// A graph input of static sizes s.
inline GraphBuilder::V in(GraphBuilder& b, const std::string& n, DType t, const Sizes& s) {
  return b.input(n, t, to_shape(s));
}
// The engines a graph runs on: op by op, generated C++, the kernel-IR interpreter.
inline const std::vector<std::string> kEngines = {"eager", "cpp", "interpreter"};

// Sets an environment variable for a scope ("" unsets it), then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    set(value);
  }
  ~ScopedEnv() { set(saved_ ? saved_->c_str() : ""); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const char* v) {
    if (*v) {
      ::setenv(name_, v, 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> saved_;
};

inline Options eager_opts() { return {{"ge.exec.enableOperatorFusion", "0"}}; }
inline Options graph_opts() { return {{"ge.exec.enableOperatorFusion", "1"}}; }
// Options for one engine by name: "eager", or a graph-mode codegen ("cpp", "interpreter").
inline Options engine_opts(const std::string& engine) {
  if (engine == "eager") return eager_opts();
  Options o = graph_opts();
  o["codegen"] = engine;
  return o;
}

// The seed block y = silu(layer_norm(x + residual, w, b)) over shape s (w, b: the last dim).
inline Graph seed_block(const Shape& s, DType t = DType::f32) {
  GraphBuilder b;
  auto x = b.input("x", t, s);
  auto r = b.input("residual", t, s);
  auto w = b.input("w", t, {s.back()});
  auto bias = b.input("b", t, {s.back()});
  b.output("y", b.silu(b.layer_norm(b.add(x, r), w, bias, 1e-5)));
  return b.build();
}

// |got - want| <= atol + rtol * |want| elementwise, with atol/rtol from the dtype.
inline ::testing::AssertionResult close_to_ref(const Tensor& got, const ref::RefTensor& want,
                                               double scale = 1.0) {
  if (got.sizes() != want.sizes) {
    return ::testing::AssertionFailure()
           << "sizes " << sizes_str(got.sizes()) << " vs reference " << sizes_str(want.sizes);
  }
  double tol = ref::tolerance(got.dtype()) * scale;
  for (int64_t i = 0; i < got.numel(); i++) {
    double a = got.get(i), b = want.data[size_t(i)];
    if (std::isnan(b) && std::isnan(a)) continue;
    if (std::isinf(b) && a == b) continue;
    double lim = tol + tol * std::fabs(b);
    if (!(std::fabs(a - b) <= lim)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << a << ", reference " << b << " (tolerance " << lim
             << ", dtype " << dtype_name(got.dtype()) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs g with options and checks every output against the reference.
inline ::testing::AssertionResult matches_reference(const Graph& g,
                                                    const std::map<std::string, Tensor>& inputs,
                                                    const Options& opts, double scale = 1.0) {
  auto want = ref::run_graph(g, inputs);
  auto got = compile(g, opts).run(inputs);
  for (auto& [name, w] : want) {
    auto r = close_to_ref(got.at(name), w, scale);
    if (!r) return r << " (output '" << name << "')";
  }
  return ::testing::AssertionSuccess();
}

// Expects `fn` to throw ubfuse::Error whose message contains every fragment.
template <typename F>
::testing::AssertionResult throws_with(F fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
  } catch (const Error& e) {
    std::string msg = e.what();
    for (auto& f : fragments) {
      if (msg.find(f) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << f << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "did not throw ubfuse::Error";
}

// A tensor's elements as doubles, in order.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); i++) v.push_back(t.get(i));
  return v;
}

// A tensor of dtype t and sizes s from float values (Tensor::from_floats).
inline Tensor tensor(DType t, Sizes s, const std::vector<float>& v) {
  return Tensor::from_floats(t, s, v);
}

}  // namespace ubfuse::testing
