// Shape inference of the recurrent cells RNN, GRU and LSTM (ir/recurrent.h): the operands'
// shapes against X's and hidden_size, the attributes written back complete.
#include <algorithm>

#include "ir/recurrent.h"
#include "ir/shape_infer_internal.h"

namespace ubfuse::shape_infer {

namespace rc = recurrent;

void infer_recurrent(Node& n) {
  const std::string op(op_name(n.op));
  if (!n.attrs.count("optional")) n.attrs["optional"] = std::vector<int64_t>{};
  const std::vector<int64_t> opt = n.attr_ints("optional");
  const int64_t max_opt = n.op == OpKind::LSTM ? 7 : 5;
  for (size_t i = 0; i < opt.size(); i++) {
    if (opt[i] < 3 || opt[i] > max_opt || (i > 0 && opt[i] <= opt[i - 1])) {
      fail(n, "attribute 'optional' must list rising ONNX input indices in [3, " +
                  std::to_string(max_opt) + "], got " + sizes_str(opt));
    }
  }
  if (n.inputs.size() != 3 + opt.size()) {
    fail(n, "has " + std::to_string(n.inputs.size()) + " inputs but 'optional' lists " +
                std::to_string(opt.size()) + " after X, W and R");
  }
  const size_t outs = n.op == OpKind::LSTM ? 3 : 2;
  if (n.outputs.size() != outs) {
    fail(n, "has " + std::to_string(n.outputs.size()) + " outputs, expected " +
                std::to_string(outs) + (outs == 3 ? " (Y, Y_h, Y_c)" : " (Y, Y_h)"));
  }
  const Value *x = n.inputs[0], *w = n.inputs[1], *r = n.inputs[2];
  require_float(n, x);
  require_same_dtype(n, x, w);
  require_same_dtype(n, x, r);
  const int64_t dir = n.attr_int("direction", 0);
  if (dir < 0 || dir > 2) {
    fail(n, "direction must be 0 (forward), 1 (reverse) or 2 (bidirectional), got " +
                std::to_string(dir));
  }
  const int64_t dirs = dir == 2 ? 2 : 1;
  const int64_t hs = n.attr_int("hidden_size", 0);
  if (hs < 1) fail(n, "hidden_size must be >= 1, got " + std::to_string(hs));
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) fail(n, "layout must be 0 or 1, got " + std::to_string(layout));
  const double clip = n.attr_float("clip", 0.0);
  if (!(clip >= 0)) fail(n, "clip must be >= 0 (0: none), got " + std::to_string(clip));
  n.attrs["direction"] = dir;
  n.attrs["hidden_size"] = hs;
  n.attrs["layout"] = layout;
  n.attrs["clip"] = clip;
  std::vector<int64_t> acts =
      n.attrs.count("activations") ? n.attr_ints("activations") : std::vector<int64_t>{};
  const size_t per = size_t(rc::acts_per_direction(n.op));
  if (acts.empty()) {
    for (int64_t d = 0; d < dirs; d++) {
      for (int64_t a : rc::default_acts(n.op)) acts.push_back(a);
    }
  }
  if (acts.size() != per * size_t(dirs)) {
    fail(n, std::to_string(acts.size()) + " activations for " + std::to_string(dirs) +
                " direction(s), expected " + std::to_string(per * size_t(dirs)));
  }
  for (int64_t a : acts) {
    if (a < 0 || a >= int64_t(std::size(rc::kActNames))) {
      fail(n, "activation code " + std::to_string(a) + " is not one of ir/recurrent.h's Act");
    }
  }
  n.attrs["activations"] = acts;
  if (n.op == OpKind::GRU) n.attrs["linear_before_reset"] = n.attr_int("linear_before_reset", 0);
  if (n.op == OpKind::LSTM) n.attrs["input_forget"] = n.attr_int("input_forget", 0);

  if (x->shape.size() != 3) {
    fail(n, "X must be rank 3 ([seq, batch, input], or [batch, seq, input] with layout 1), got " +
                shape_str(x->shape));
  }
  const Dim& seq = x->shape[layout == 0 ? 0 : 1];
  const Dim& batch = x->shape[layout == 0 ? 1 : 0];
  const Dim& in = x->shape[2];
  const Dim g(rc::gates(n.op) * hs), H(hs), D(dirs);
  auto expect = [&](const Value* v, const Shape& want, const char* what) {
    if (v->shape != want) {
      fail(n, std::string(what) + " must be " + shape_str(want) + ", got " + shape_str(v->shape),
           "W [directions, gates * hidden_size, input], R [.., hidden_size], B [.., 2 * gates * "
           "hidden_size], initial states [directions, batch, hidden_size] ([batch, directions, "
           "hidden_size] with layout 1) (ONNX's " +
               op + ")");
    }
  };
  expect(w, {D, g, in}, "W");
  expect(r, {D, g, H}, "R");
  for (size_t i = 0; i < opt.size(); i++) {
    const Value* v = n.inputs[3 + i];
    switch (opt[i]) {
      case 3:
        require_same_dtype(n, x, v);
        expect(v, {D, Dim(2 * rc::gates(n.op) * hs)}, "B");
        break;
      case 4:
        if (v->dtype != DType::i32 && v->dtype != DType::i64) {
          fail(n, "sequence_lens must be i32 (or i64), got " + std::string(dtype_name(v->dtype)));
        }
        expect(v, {batch}, "sequence_lens");
        break;
      case 5:
      case 6:
        require_same_dtype(n, x, v);
        expect(v, layout == 0 ? Shape{D, batch, H} : Shape{batch, D, H},
               opt[i] == 5 ? "initial_h" : "initial_c");
        break;
      case 7:
        require_same_dtype(n, x, v);
        expect(v, {D, Dim(3 * hs)}, "P");
        break;
    }
  }
  n.outputs[0]->dtype = x->dtype;
  n.outputs[0]->shape = layout == 0 ? Shape{seq, D, batch, H} : Shape{batch, seq, D, H};
  for (size_t o = 1; o < outs; o++) {
    n.outputs[o]->dtype = x->dtype;
    n.outputs[o]->shape = layout == 0 ? Shape{D, batch, H} : Shape{batch, D, H};
  }
}

}  // namespace ubfuse::shape_infer
