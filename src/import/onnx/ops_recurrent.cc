// RNN, GRU and LSTM: one ubfuse op each (ir/recurrent.h), whose optional inputs are those the
// model gives, listed by ONNX index in attr `optional`.
#include <algorithm>

#include "import/onnx/registry.h"
#include "ir/recurrent.h"

namespace ubfuse::onnx_import {

namespace {

template <OpKind K>
void recurrent_cell(NodeCtx& c) {
  require_float(c, 0);
  const std::string dir = c.attr_str("direction", "forward");
  const int64_t direction = dir == "forward"         ? 0
                            : dir == "reverse"       ? 1
                            : dir == "bidirectional" ? 2
                                                     : -1;
  if (direction < 0) {
    c.invalid("direction must be forward, reverse or bidirectional, got \"" + dir + "\"");
  }
  if (!c.has_attr("hidden_size")) c.invalid("needs attribute hidden_size");
  Attrs a{{"direction", direction},
          {"hidden_size", c.attr_int("hidden_size", 0)},
          {"layout", c.attr_int("layout", 0)},
          {"clip", c.attr_float("clip", 0.0)}};
  for (const char* p : {"activation_alpha", "activation_beta"}) {
    if (c.has_attr(p)) {
      c.unsupported(std::string("attribute '") + p +
                    "' (the activations that take parameters: HardSigmoid, LeakyRelu, ...)");
    }
  }
  const std::vector<std::string> names = c.attr_strs("activations");
  if (!names.empty()) {
    std::vector<int64_t> acts;
    for (const std::string& nm : names) {
      const int64_t code = recurrent::act_code(nm);
      if (code < 0) {
        std::string known;
        for (const char* k : recurrent::kActNames)
          known += (known.empty() ? "" : ", ") + std::string(k);
        c.unsupported("activation '" + nm + "' (supported: " + known + ")");
      }
      acts.push_back(code);
    }
    a["activations"] = acts;
  }
  if (K == OpKind::GRU) a["linear_before_reset"] = c.attr_int("linear_before_reset", 0);
  if (K == OpKind::LSTM) a["input_forget"] = c.attr_int("input_forget", 0);
  std::vector<Value*> in{c.value(0), c.value(1), c.value(2)};
  std::vector<int64_t> optional;
  const int last = K == OpKind::LSTM ? 7 : 5;
  for (int i = 3; i <= std::min(last, c.num_inputs() - 1); i++) {
    if (!c.has_input(i)) continue;
    in.push_back(c.value(i));  // sequence_lens: i32 as ONNX has it, or i64 as some exporters write
    optional.push_back(i);
  }
  if (c.num_inputs() > last + 1) c.invalid("has more than " + std::to_string(last + 1) + " inputs");
  a["optional"] = optional;
  const int outs = K == OpKind::LSTM ? 3 : 2;
  std::vector<Value*> o = c.emit_outputs(K, in, a, outs);
  for (int i = 0; i < outs; i++) {
    if (c.output_used(i)) c.set_output(i, o[size_t(i)]);
  }
}

}  // namespace

void add_recurrent_ops(ConverterMap& m) {
  m["RNN"] = recurrent_cell<OpKind::RNN>;
  m["GRU"] = recurrent_cell<OpKind::GRU>;
  m["LSTM"] = recurrent_cell<OpKind::LSTM>;
}

}  // namespace ubfuse::onnx_import
