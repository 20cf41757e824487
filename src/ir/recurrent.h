// ONNX's recurrent cells (RNN, GRU, LSTM) as ubfuse's ops of the same names hold them, shared by
// shape inference, the reference (in double) and the eager kernel (in f32): the gates, the
// activations a node may name, and where the optional operands sit.
//
// A node's inputs are X, W, R, then the optional ONNX inputs the model gave, in ONNX's order;
// attr `optional` lists their ONNX indices (3 B, 4 sequence_lens, 5 initial_h, and for LSTM 6
// initial_c, 7 P). Attrs: direction (0 forward, 1 reverse, 2 bidirectional), hidden_size, layout
// (0: X [seq, batch, input]; 1: [batch, seq, input]), clip (0: none), activations (Act codes, per
// direction in ONNX's order), and GRU's linear_before_reset, LSTM's input_forget. Outputs: Y, Y_h
// and, for LSTM, Y_c.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ubfuse/graph.h"

namespace ubfuse::recurrent {

enum class Act : int64_t { Sigmoid, Tanh, Relu, Softsign, Softplus };
inline constexpr const char* kActNames[] = {"Sigmoid", "Tanh", "Relu", "Softsign", "Softplus"};

// The code of an ONNX activation name, or -1.
inline int64_t act_code(const std::string& name) {
  for (int64_t i = 0; i < int64_t(std::size(kActNames)); i++) {
    if (name == kActNames[i]) return i;
  }
  return -1;
}

template <typename T>
T activate(Act a, T x) {
  switch (a) {
    case Act::Sigmoid:
      return T(1) / (T(1) + std::exp(-x));
    case Act::Tanh:
      return std::tanh(x);
    case Act::Relu:
      return x > T(0) ? x : T(0);
    case Act::Softsign:
      return x / (T(1) + std::fabs(x));
    case Act::Softplus:
      return std::log1p(std::exp(-std::fabs(x))) + (x > T(0) ? x : T(0));
  }
  return x;
}

// Gates per direction (rows of W and R: gates * hidden_size) and activations per direction.
inline int64_t gates(OpKind k) { return k == OpKind::LSTM ? 4 : k == OpKind::GRU ? 3 : 1; }
inline int64_t acts_per_direction(OpKind k) {
  return k == OpKind::LSTM ? 3 : k == OpKind::GRU ? 2 : 1;
}
// ONNX's defaults: RNN Tanh; GRU Sigmoid, Tanh; LSTM Sigmoid, Tanh, Tanh.
inline std::vector<int64_t> default_acts(OpKind k) {
  const auto s = int64_t(Act::Sigmoid), t = int64_t(Act::Tanh);
  return k == OpKind::LSTM  ? std::vector<int64_t>{s, t, t}
         : k == OpKind::GRU ? std::vector<int64_t>{s, t}
                            : std::vector<int64_t>{t};
}

// The position among the node's inputs of ONNX input `onnx_index`, or -1 when not given.
inline int input_of(const Node& n, int64_t onnx_index) {
  const std::vector<int64_t> opt = n.attr_ints("optional");
  for (size_t i = 0; i < opt.size(); i++) {
    if (opt[i] == onnx_index) return int(3 + i);
  }
  return -1;
}

}  // namespace ubfuse::recurrent
