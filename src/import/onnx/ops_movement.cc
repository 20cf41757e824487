// Data movement: Reshape, Flatten, Squeeze, Unsqueeze (all -> Reshape), Concat, Split (-> Slices),
// Slice, Transpose, Expand, Tile, Pad, DepthToSpace, SpaceToDepth (ops_index.cc: those that move
// data through a tensor of indices). Each also works on shape vectors with symbolic dims,
// which is how exporters compute the sizes they reshape to. Axes, split sizes and repeats given at
// run time go through AxesShape (ops.def), which the plan computes and checks.
#include <algorithm>
#include <limits>

#include "import/onnx/registry.h"
#include "ir/shape_util.h"

namespace ubfuse::onnx_import {

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// A shape vector reshaped without changing its elements: a one-element one between rank 0 and
// 1, or a vector to a vector (PyTorch's expand prologue reshapes its size list to [-1]).
bool reshape_dims(NodeCtx& c, int64_t out_rank) {
  const IValue& x = c.input(0);
  if (!x.dims) return false;
  const bool vector_to_vector = x.shape.size() == 1 && out_rank == 1;
  if ((x.dims->size() != 1 && !vector_to_vector) || out_rank > 1) {
    c.needs_static(*x.dims, "reshaping a shape vector");
  }
  c.set_output_dims(0, *x.dims, out_rank == 0, x.dtype);
  return true;
}

// A value operand the importer cannot resolve into attributes (a run-time input, or symbolic
// dims no attribute states) becomes an input of the op, read while a plan is built.
template <typename Known, typename Runtime>
void known_or_runtime(NodeCtx& c, std::initializer_list<int> operands, Known known,
                      Runtime runtime) {
  for (int i : operands) {
    if (c.is_runtime(i)) return runtime();
  }
  try {
    known();
  } catch (const OnnxNeedsStaticDimsError&) {
    runtime();
  }
}

void reshape_known(NodeCtx& c, int64_t allowzero) {
  auto t = c.dims_input(1, "the target shape");
  if (c.input(0).dims && t.size() == 1 && t[0].is_static() && t[0].value() != -1 &&
      t[0].value() != int64_t(c.input(0).dims->size())) {
    c.invalid("cannot reshape a shape vector of " + std::to_string(c.input(0).dims->size()) +
              " elements to [" + t[0].str() + "]");
  }
  if (reshape_dims(c, int64_t(t.size()))) return;
  const Shape& in = c.shape(0);
  Shape target;
  int neg = -1;
  for (size_t i = 0; i < t.size(); i++) {
    const Dim& d = t[i];
    if (d.is_static() && d.value() == 0 && !allowzero) {
      if (i >= in.size())
        c.invalid("shape has 0 at position " + std::to_string(i) + " beyond the input's rank");
      target.push_back(in[i]);
    } else if (d.is_static() && d.value() == -1) {
      if (neg >= 0) c.invalid("shape has more than one -1");
      neg = int(i);
      target.push_back(Dim(1));  // placeholder
    } else if (d.is_static() && d.value() < -1) {
      c.invalid("shape has a negative dim " + std::to_string(d.value()));
    } else {
      target.push_back(d);
    }
  }
  Value* x = c.value(0);
  if (neg >= 0) {
    // Let ubfuse infer the -1 (a product of symbols where needed), keeping the other entries.
    std::vector<int64_t> attr;
    bool direct = true;
    for (size_t i = 0; i < target.size(); i++) {
      const Dim& d = target[i];
      if (int(i) == neg) {
        attr.push_back(-1);
      } else if (d.is_static()) {
        if (d.value() == 0 && !(i < in.size() && in[i] == d)) direct = false;
        attr.push_back(d.value());
      } else if (i < in.size() && in[i] == d) {
        attr.push_back(0);
      } else {
        direct = false;
      }
    }
    if (!direct) c.needs_static(t, "a reshape with -1 and moved symbolic dims");
    c.set_output(0, c.emit(OpKind::Reshape, {x}, {{"shape", attr}}));
    return;
  }
  c.set_output(0, c.reshape_to(x, target));
}

void reshape(NodeCtx& c) {
  int64_t allowzero = c.opset() >= 14 ? c.attr_int("allowzero", 0) : 0;
  if (c.opset() < 5) c.unsupported("Reshape before opset 5 (shape as an attribute)");
  known_or_runtime(
      c, {1}, [&] { reshape_known(c, allowzero); },
      [&] {
        c.set_output(0,
                     c.emit(OpKind::Reshape, {c.value(0), c.value(1)}, {{"allowzero", allowzero}}));
      });
}

void flatten(NodeCtx& c) {
  const Shape& s = c.shape(0);
  int64_t r = int64_t(s.size());
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -r || axis > r) c.invalid("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += r;
  Dim a(int64_t(1)), b(int64_t(1));
  for (int64_t i = 0; i < r; i++) (i < axis ? a : b) = Dim::mul(i < axis ? a : b, s[size_t(i)]);
  c.set_output(0, c.reshape_to(c.value(0), {a, b}));
}

std::vector<int64_t> axes_arg(NodeCtx& c, int input, bool* given) {
  *given = true;
  if (c.opset() < 13) {
    if (!c.has_attr("axes")) *given = false;
    return c.attr_ints("axes");
  }
  if (!c.has_input(input)) {
    *given = false;
    return {};
  }
  return c.const_ints(input, "axes");
}

// Unsqueeze or Squeeze whose axes arrive at run time (or name a symbolic dim that must be 1): a
// Reshape to AxesShape's vector, which checks the axes against the sizes when the plan is built.
// The number of axes is known, so the rank is.
void squeeze_runtime(NodeCtx& c, const char* mode) {
  Value* axes = nullptr;
  if (c.opset() < 13) {
    const std::vector<int64_t> a = c.attr_ints("axes");
    Tensor t(DType::i64, {int64_t(a.size())});
    std::copy(a.begin(), a.end(), t.data_as<int64_t>());
    axes = c.constant(t);
  } else {
    runtime_values_length(c, 1, "axes");
    axes = c.value(1);
  }
  Value* x = c.value(0);
  c.set_output(
      0, c.emit(OpKind::Reshape, {x, axes_shape(c, x, axes, mode)}, {{"allowzero", int64_t(1)}}));
}

void squeeze_known(NodeCtx& c) {
  bool given = false;
  auto axes = axes_arg(c, 1, &given);
  const Shape& s = c.shape(0);
  int64_t r = int64_t(s.size());
  std::vector<bool> drop(size_t(r), false);
  if (given) {
    for (auto a : axes) {
      int64_t ax = c.norm_axis(a, r, "axes entry");
      if (!s[size_t(ax)].is_static()) c.needs_static({s[size_t(ax)]}, "squeezing a symbolic dim");
      if (s[size_t(ax)].value() != 1)
        c.invalid("cannot squeeze axis " + std::to_string(a) + " of size " + s[size_t(ax)].str());
      drop[size_t(ax)] = true;
    }
  } else {
    for (int64_t i = 0; i < r; i++) drop[size_t(i)] = s[size_t(i)] == Dim(1);
  }
  Shape out;
  for (int64_t i = 0; i < r; i++) {
    if (!drop[size_t(i)]) out.push_back(s[size_t(i)]);
  }
  if (reshape_dims(c, int64_t(out.size()))) return;
  c.set_output(0, c.reshape_to(c.value(0), out));
}

void squeeze(NodeCtx& c) {
  const bool axes_input = c.opset() >= 13 && c.has_input(1);
  if (axes_input && !c.is_const(1)) return squeeze_runtime(c, "squeeze");
  try {
    squeeze_known(c);
  } catch (const OnnxNeedsStaticDimsError&) {
    // A symbolic dim to squeeze: whether it is 1 is the plan's to check. (A shape vector's own
    // symbolic dims cannot be squeezed this way: they have no size to read.)
    if (c.input(0).dims || (!axes_input && !c.has_attr("axes"))) throw;
    squeeze_runtime(c, "squeeze");
  }
}

void unsqueeze(NodeCtx& c) {
  if (c.opset() >= 13 && c.has_input(1) && !c.is_const(1)) {
    return squeeze_runtime(c, "unsqueeze");
  }
  bool given = false;
  auto axes = axes_arg(c, 1, &given);
  if (!given) c.invalid("axes are required");
  const Shape& s = c.shape(0);
  int64_t r = int64_t(s.size()) + int64_t(axes.size());
  std::vector<bool> ones(size_t(r), false);
  for (auto a : axes) {
    int64_t ax = c.norm_axis(a, r, "axes entry");
    if (ones[size_t(ax)]) c.invalid("axes repeat " + std::to_string(a));
    ones[size_t(ax)] = true;
  }
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < r; i++) out.push_back(ones[size_t(i)] ? Dim(1) : s[k++]);
  if (reshape_dims(c, r)) return;
  c.set_output(0, c.reshape_to(c.value(0), out));
}

void concat(NodeCtx& c) {
  int64_t axis = c.attr_int("axis", 0);
  bool any_dims = false;
  bool all_known = true;  // shape vectors and constants: the result is one too
  for (int i = 0; i < c.num_inputs(); i++) {
    any_dims |= c.has_input(i) && bool(c.input(i).dims);
    all_known &= c.has_input(i) && (bool(c.input(i).dims) || c.is_const(i));
  }
  if (any_dims && all_known) {
    std::vector<Dim> out;
    for (int i = 0; i < c.num_inputs(); i++) {
      if (c.rank(i) != 1) c.invalid("shape vectors must be 1-D");
      auto d = c.dims_input(i, "a shape vector");
      out.insert(out.end(), d.begin(), d.end());
    }
    c.set_output_dims(0, out, false, c.dtype(0));
    return;
  }
  std::vector<Value*> in;
  for (int i = 0; i < c.num_inputs(); i++) in.push_back(c.value(i));
  if (in.empty()) c.invalid("needs at least one input");
  // ONNX allows empty inputs along the axis; ubfuse's Concat would copy nothing from them.
  std::vector<Value*> nonempty;
  int64_t ax = c.norm_axis(axis, int64_t(in[0]->shape.size()), "axis");
  for (auto* v : in) {
    if (size_t(ax) < v->shape.size() && v->shape[size_t(ax)] == Dim(int64_t(0)) && in.size() > 1)
      continue;
    nonempty.push_back(v);
  }
  if (nonempty.empty()) nonempty.push_back(in[0]);
  c.set_output(0, c.emit(OpKind::Concat, nonempty, {{"axis", ax}}));
}

void slice_static(NodeCtx& c, Value* x, int64_t ax, int64_t start, int64_t end, int64_t step,
                  int out) {
  c.set_output(out, c.emit(OpKind::Slice, {x},
                           {{"starts", std::vector<int64_t>{start}},
                            {"ends", std::vector<int64_t>{end}},
                            {"axes", std::vector<int64_t>{ax}},
                            {"steps", std::vector<int64_t>{step}}}));
}

// Split whose sizes arrive at run time: each output a Slice between two of AxesShape's offsets,
// which checks the sizes against the axis when the plan is built.
// Constant sizes on a symbolic axis take the same way (`sizes` a constant), so that the plan
// checks they add up to the axis.
void split_runtime(NodeCtx& c, int64_t ax, Value* sizes = nullptr) {
  if (c.has_attr("num_outputs")) c.invalid("takes split or num_outputs, not both");
  const int64_t k = sizes ? sizes->shape[0].value() : runtime_values_length(c, 1, "split");
  if (k != c.num_outputs()) {
    c.invalid("split has " + std::to_string(k) + " sizes for " + std::to_string(c.num_outputs()) +
              " outputs");
  }
  Value* x = c.value(0);
  Value* off = axes_shape(c, x, sizes ? sizes : c.value(1), "split", ax);
  auto one = [&](int64_t v) {
    Tensor t(DType::i64, {1});
    t.data_as<int64_t>()[0] = v;
    return c.constant(t);
  };
  auto at = [&](int64_t i) { return slice_axis(c, off, 0, i, i + 1); };
  for (int i = 0; i < c.num_outputs(); i++) {
    if (!c.output_used(i)) continue;
    c.set_output(i, c.emit(OpKind::Slice, {x, at(i), at(i + 1), one(ax), one(1)}));
  }
}

void split(NodeCtx& c) {
  const Shape& s = c.shape(0);
  int64_t ax = c.norm_axis(c.attr_int("axis", 0), int64_t(s.size()), "axis");
  if (c.opset() >= 13 && c.has_input(1) && !c.is_const(1)) return split_runtime(c, ax);
  const Dim& d = s[size_t(ax)];
  const bool given = (c.opset() < 13 && c.has_attr("split")) || (c.opset() >= 13 && c.has_input(1));
  if (!d.is_static() && given) {
    auto v = c.opset() < 13 ? c.attr_ints("split") : c.const_ints(1, "split");
    Tensor t(DType::i64, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return split_runtime(c, ax, c.constant(t));
  }
  if (!d.is_static()) c.needs_static({d}, "splitting a symbolic axis into equal parts");
  std::vector<int64_t> sizes;
  if (c.opset() < 13 && c.has_attr("split")) {
    sizes = c.attr_ints("split");
  } else if (c.opset() >= 13 && c.has_input(1)) {
    sizes = c.const_ints(1, "split");
  } else {
    int64_t n = c.opset() >= 18 ? c.attr_int("num_outputs", c.num_outputs()) : c.num_outputs();
    if (n <= 0) c.invalid("no outputs");
    int64_t each = (d.value() + n - 1) / n;
    if (c.opset() < 18 && d.value() % n != 0) {
      c.invalid("axis of size " + d.str() + " does not split evenly into " + std::to_string(n));
    }
    for (int64_t i = 0; i < n; i++) sizes.push_back(std::min(each, d.value() - i * each));
  }
  if (int64_t(sizes.size()) != c.num_outputs()) {
    c.invalid("split has " + std::to_string(sizes.size()) + " sizes for " +
              std::to_string(c.num_outputs()) + " outputs");
  }
  int64_t total = 0;
  for (auto v : sizes) {
    if (v < 0) c.invalid("split sizes must be >= 0");
    total += v;
  }
  if (total != d.value())
    c.invalid("split sizes add up to " + std::to_string(total) + ", not " + d.str());
  int64_t at = 0;
  if (const IValue& in = c.input(0); in.dims) {
    // A shape vector split into its dims (onnxruntime's GatherSliceToSplitFusion writes this for
    // the Gathers of a shape): each part stays dims, symbolic ones too.
    for (int i = 0; i < c.num_outputs(); i++) {
      const auto from = in.dims->begin() + at;
      if (c.output_used(i)) c.set_output_dims(i, {from, from + sizes[size_t(i)]}, false, in.dtype);
      at += sizes[size_t(i)];
    }
    return;
  }
  Value* x = c.value(0);
  for (int i = 0; i < c.num_outputs(); i++) {
    if (c.output_used(i)) slice_static(c, x, ax, at, at + sizes[size_t(i)], 1, i);
    at += sizes[size_t(i)];
  }
}

// Slice(x, starts, ends, axes, steps) with the bounds read per plan; absent axes and steps
// are their defaults.
void slice_runtime(NodeCtx& c) {
  const Shape& ks = c.shape(1);
  if (ks.size() != 1 || !ks[0].is_static()) c.invalid("starts must be a vector of known length");
  const int64_t k = ks[0].value();
  auto ints = [&](auto fn) {
    Tensor t(DType::i64, {k});
    for (int64_t i = 0; i < k; i++) t.data_as<int64_t>()[i] = fn(i);
    return c.constant(t);
  };
  Value* axes = c.has_input(3) ? c.value(3) : ints([](int64_t i) { return i; });
  Value* steps = c.has_input(4) ? c.value(4) : ints([](int64_t) { return int64_t(1); });
  c.set_output(0, c.emit(OpKind::Slice, {c.value(0), c.value(1), c.value(2), axes, steps}));
}

void slice_known(NodeCtx& c);

void slice(NodeCtx& c) {
  if (c.opset() < 10) return slice_known(c);
  known_or_runtime(
      c, {1, 2, 3, 4}, [&] { slice_known(c); }, [&] { slice_runtime(c); });
}

void slice_known(NodeCtx& c) {
  std::vector<Dim> starts, ends;
  std::vector<int64_t> axes, steps;
  if (c.opset() < 10) {
    for (auto v : c.attr_ints("starts")) starts.push_back(Dim(v));
    for (auto v : c.attr_ints("ends")) ends.push_back(Dim(v));
    axes = c.attr_ints("axes");
  } else {
    starts = c.dims_input(1, "starts");
    ends = c.dims_input(2, "ends");
    if (c.has_input(3)) axes = c.const_ints(3, "axes");
    if (c.has_input(4)) steps = c.const_ints(4, "steps");
  }
  const Shape& s = c.shape(0);
  int64_t r = int64_t(s.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); i++) axes.push_back(int64_t(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    c.invalid("starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> st, en;
  for (size_t i = 0; i < starts.size(); i++) {
    int64_t ax = c.norm_axis(axes[i], r, "axes entry");
    axes[i] = ax;
    // A bound that is the axis' own size plus a constant k is index k from the end (a negative
    // index), or the end itself for k >= 0: x[..., :n-1] of an axis of size n is x[..., :-1].
    auto bound = [&](const Dim& b, const char* what) -> int64_t {
      if (b.is_static()) return b.value();
      Dim k = Dim::sub(b, s[size_t(ax)]);
      if (!k.is_static()) c.needs_static({b}, what);
      return k.value() < 0 ? k.value() : kEnd;  // at or past the end clamps either way
    };
    st.push_back(bound(starts[i], "a slice start"));
    en.push_back(bound(ends[i], "a slice end"));
    // A length like min(4, n) (x[..., :4], x[..., n-3:]) is no dim expression: sizes are needed.
    if (steps[i] != 0 && !s[size_t(ax)].is_static() &&
        !slice_length(s[size_t(ax)], st.back(), en.back(), steps[i])) {
      c.needs_static({s[size_t(ax)], starts[i], ends[i]}, "this slice of a symbolic axis");
    }
  }
  // Slicing a shape vector (x.shape[1:]) keeps it symbolic.
  if (c.input(0).dims) {
    const auto& v = *c.input(0).dims;
    if (r != 1) c.invalid("shape vectors are 1-D");
    int64_t n = int64_t(v.size()), from = 0, to = n, step = 1;
    if (!st.empty()) {
      step = steps[0];
      if (step == 0) c.invalid("step is 0");
      auto wrap = [n](int64_t x) { return x < 0 ? x + n : x; };
      from = step > 0 ? std::clamp<int64_t>(wrap(st[0]), 0, n)
                      : std::clamp<int64_t>(wrap(st[0]), 0, n - 1);
      to = step > 0 ? std::clamp<int64_t>(wrap(en[0]), 0, n)
                    : std::clamp<int64_t>(wrap(en[0]), -1, n - 1);
    }
    std::vector<Dim> out;
    for (int64_t i = from; step > 0 ? i < to : i > to; i += step) out.push_back(v[size_t(i)]);
    c.set_output_dims(0, out, false, c.dtype(0));
    return;
  }
  for (auto v : steps) {
    if (v == 0) c.invalid("a step is 0");
  }
  c.set_output(0, c.emit(OpKind::Slice, {c.value(0)},
                         {{"starts", st}, {"ends", en}, {"axes", axes}, {"steps", steps}}));
}

void transpose(NodeCtx& c) {
  Value* x = c.value(0);
  std::vector<int64_t> perm = c.attr_ints("perm");
  if (perm.empty()) {
    for (int64_t i = int64_t(x->shape.size()) - 1; i >= 0; i--) perm.push_back(i);
  }
  for (auto& p : perm) {
    if (p < 0) p += int64_t(x->shape.size());
  }
  c.set_output(0, c.emit(OpKind::Transpose, {x}, {{"perm", perm}}));
}

void expand_known(NodeCtx& c);

void expand(NodeCtx& c) {
  known_or_runtime(
      c, {1}, [&] { expand_known(c); },
      [&] {
        c.set_output(0, c.emit(OpKind::Expand, {c.value(0), c.value(1)}));
      });
}

void expand_known(NodeCtx& c) {
  auto t = c.dims_input(1, "the target shape");
  const Shape& s = c.shape(0);
  std::vector<int64_t> attr;
  for (size_t i = 0; i < t.size(); i++) {
    const Dim& d = t[i];
    int64_t xi = int64_t(i) - int64_t(t.size() - s.size());  // aligned input axis
    if (d.is_static()) {
      if (d.value() < 0) c.invalid("shape has a negative dim");
      attr.push_back(d.value());
    } else if (xi >= 0 && s[size_t(xi)] == d) {
      attr.push_back(1);  // keeps the input's (symbolic) dim
    } else {
      c.needs_static({d}, "expanding to a symbolic size");
    }
  }
  Value* x = c.value(0);
  Value* y = c.emit(OpKind::Expand, {x}, {{"shape", attr}});
  c.set_output(0, y);
}

// Tile whose repeats arrive at run time: x viewed as [1, d0, 1, d1, ...], expanded to
// [r0, d0, r1, d1, ...] and viewed as [r0*d0, r1*d1, ...], both vectors AxesShape's, which
// checks the repeats when the plan is built.
void tile_runtime(NodeCtx& c) {
  const Shape& s = c.shape(0);
  if (runtime_values_length(c, 1, "repeats") != int64_t(s.size())) {
    c.invalid("repeats must have one entry per axis of the input " + shape_str(s));
  }
  Value* x = c.value(0);
  Shape spread;
  for (const Dim& d : s) spread.insert(spread.end(), {Dim(int64_t(1)), d});
  Value* reps = c.value(1);
  Value* grid = c.emit(OpKind::Expand, {c.reshape_to(x, spread), axes_shape(c, x, reps, "tile")});
  c.set_output(0, c.emit(OpKind::Reshape, {grid, axes_shape(c, x, reps, "tiled")},
                         {{"allowzero", int64_t(1)}}));
}

void tile(NodeCtx& c) {
  if (!c.is_const(1)) return tile_runtime(c);
  auto reps = c.const_ints(1, "repeats");
  Value* y = c.value(0);
  if (int64_t(reps.size()) != int64_t(y->shape.size()))
    c.invalid("repeats must have one entry per axis");
  // Repeating a symbolic axis: copies would be a Concat of a run-time count of pieces; the
  // run-time form (an Expand and a Reshape) takes any size.
  for (size_t ax = 0; ax < reps.size(); ax++) {
    if (reps[ax] > 1 && !y->shape[ax].is_static()) return tile_runtime(c);
  }
  for (size_t ax = 0; ax < reps.size(); ax++) {
    if (reps[ax] < 0) c.invalid("repeats must be >= 0");
    if (reps[ax] == 1) continue;
    if (reps[ax] == 0) c.unsupported("tiling to an empty tensor");
    std::vector<Value*> copies(size_t(reps[ax]), y);
    y = c.emit(OpKind::Concat, copies, {{"axis", int64_t(ax)}});
  }
  if (y == c.input(0).v) y = c.reshape_to(y, y->shape);
  c.set_output(0, y);
}

// Pad whose pads (or opset 18's axes) arrive at run time: Pad's (x, value, pads) form, the pads
// read when the plan is built. Constant axes pick the axes they pad: a Gather spreads them over
// every axis, 0 for the others.
void pad_runtime(NodeCtx& c, const std::string& mode) {
  const int64_t r = c.rank(0);
  const int64_t n = runtime_values_length(c, 1, "pads");
  Value* pads = c.value(1);
  if (c.has_input(3) && !c.is_const(3)) {
    // Axes at run time too: AxesShape spreads [axes, begins, ends] over every axis and checks
    // the axes (in range, none twice) when the plan is built.
    const int64_t k = runtime_values_length(c, 3, "axes");
    if (n != 2 * k) {
      c.invalid("pads has " + std::to_string(n) + " values for " + std::to_string(k) +
                " axes (two per axis: begins, then ends)");
    }
    Value* both = c.emit(OpKind::Concat,
                         {cast_value(c, c.value(3), DType::i64), cast_value(c, pads, DType::i64)},
                         {{"axis", int64_t(0)}});
    pads = axes_shape(c, c.value(0), both, "pad");
  } else if (c.has_input(3)) {
    std::vector<int64_t> axes;
    for (int64_t a : c.const_ints(3, "axes (with pads given at run time)")) {
      axes.push_back(c.norm_axis(a, r, "axes"));
    }
    const int64_t k = int64_t(axes.size());
    if (n != 2 * k) {
      c.invalid("pads has " + std::to_string(n) + " values for " + std::to_string(k) +
                " axes (two per axis: begins, then ends)");
    }
    Tensor zero(DType::i64, {1});
    zero.data_as<int64_t>()[0] = 0;
    Value* padded = c.emit(OpKind::Concat, {pads, c.constant(zero)}, {{"axis", int64_t(0)}});
    Tensor idx(DType::i64, {2 * r});
    for (int64_t j = 0; j < 2 * r; j++) idx.data_as<int64_t>()[j] = 2 * k;  // the appended 0
    for (int64_t i = 0; i < k; i++) {
      for (int64_t j = 0; j < i; j++) {
        if (axes[size_t(j)] == axes[size_t(i)]) {
          c.invalid("axis " + std::to_string(axes[size_t(i)]) + " repeats in axes");
        }
      }
      idx.data_as<int64_t>()[axes[size_t(i)]] = i;
      idx.data_as<int64_t>()[r + axes[size_t(i)]] = k + i;
    }
    pads = c.emit(OpKind::Gather, {padded, c.constant(idx)}, {{"axis", int64_t(0)}});
  } else if (n != 2 * r) {
    c.invalid("pads has " + std::to_string(n) + " values for rank " + std::to_string(r) +
              " (two per axis: begins, then ends)");
  }
  Value* value = nullptr;
  if (c.has_input(2) && mode == "constant") {
    if (c.dtype(2) != c.dtype(0)) c.invalid("constant_value's dtype differs from the data's");
    value = c.value(2);
  } else {
    value = scalar_like(c, 0.0, c.value(0));  // the form takes a value; only constant mode reads it
  }
  c.set_output(0, c.emit(OpKind::Pad, {c.value(0), value, pads}, {{"mode", mode}}));
}

// Pad: pads and axes known at import become the attribute, else an input (pad_runtime); the fill
// value may be a run-time scalar. Before opset 11 pads and
// value are attributes.
void pad(NodeCtx& c) {
  const int64_t r = c.rank(0);
  const std::string mode = c.attr_str("mode", "constant");
  if (!parse_pad_mode(mode)) {
    c.unsupported("mode \"" + mode + "\" (constant, reflect and edge are supported)");
  }
  std::vector<int64_t> pads;
  Value* value = nullptr;
  if (c.opset() < 11) {
    pads = c.attr_ints("pads");
    const double v = c.attr_float("value", 0.0);
    if (v != 0.0 && mode == "constant") value = scalar_like(c, v, c.value(0));
  } else {
    if (!c.is_const(1) || (c.has_input(3) && !c.is_const(3))) return pad_runtime(c, mode);
    auto given = c.const_ints(1, "pads");
    std::vector<int64_t> axes;
    if (c.has_input(3)) {
      for (int64_t a : c.const_ints(3, "axes")) axes.push_back(c.norm_axis(a, r, "axes"));
    } else {
      for (int64_t a = 0; a < r; a++) axes.push_back(a);
    }
    if (given.size() != 2 * axes.size()) {
      c.invalid("pads has " + std::to_string(given.size()) + " values for " +
                std::to_string(axes.size()) + " axes (two per axis: begins, then ends)");
    }
    pads.assign(size_t(2 * r), 0);
    std::vector<bool> seen(size_t(r), false);
    for (size_t i = 0; i < axes.size(); i++) {
      if (seen[size_t(axes[i])]) c.invalid("axis " + std::to_string(axes[i]) + " repeats in axes");
      seen[size_t(axes[i])] = true;
      pads[size_t(axes[i])] = given[i];
      pads[size_t(r + axes[i])] = given[axes.size() + i];
    }
    if (c.has_input(2) && mode == "constant") {
      if (c.dtype(2) != c.dtype(0)) c.invalid("constant_value's dtype differs from the data's");
      value = c.value(2);
    }
  }
  std::vector<Value*> in{c.value(0)};
  if (value) in.push_back(value);
  c.set_output(0, c.emit(OpKind::Pad, in, {{"pads", pads}, {"mode", mode}}));
}

}  // namespace

// DepthToSpace (DCR: [N, b, b, C/b^2, H, W]; CRD: [N, C/b^2, b, b, H, W]) and SpaceToDepth
// ([N, C, H/b, b, W/b, b]): a Reshape to six axes, a Transpose and a Reshape back to four.
template <bool kToSpace>
void depth_space(NodeCtx& c) {
  Value* x = c.value(0);
  const Shape s = x->shape;
  if (s.size() != 4) c.invalid("input must be [N, C, H, W], got " + shape_str(s));
  const int64_t b = c.attr_int("blocksize", 0);
  if (b < 1) c.invalid("blocksize must be >= 1, got " + std::to_string(b));
  for (size_t i = 1; i < 4; i++) {
    if (!s[i].is_static()) c.needs_static({s[i]}, "moving blocks of a symbolic dim");
  }
  const int64_t C = s[1].value(), H = s[2].value(), W = s[3].value();
  Shape six, out;
  std::vector<int64_t> perm;
  if (kToSpace) {
    if (C % (b * b) != 0) {
      c.invalid("the " + std::to_string(C) +
                " channels do not divide by blocksize^2 = " + std::to_string(b * b));
    }
    const std::string mode = c.attr_str("mode", "DCR");
    const Dim cb(C / (b * b));
    if (mode == "DCR") {
      six = {s[0], Dim(b), Dim(b), cb, s[2], s[3]};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      six = {s[0], cb, Dim(b), Dim(b), s[2], s[3]};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      c.invalid("mode must be DCR or CRD, got \"" + mode + "\"");
    }
    out = {s[0], cb, Dim(H * b), Dim(W * b)};
  } else {
    if (H % b != 0 || W % b != 0) {
      c.invalid("H " + std::to_string(H) + " and W " + std::to_string(W) +
                " must divide by blocksize " + std::to_string(b));
    }
    six = {s[0], s[1], Dim(H / b), Dim(b), Dim(W / b), Dim(b)};
    perm = {0, 3, 5, 1, 2, 4};
    out = {s[0], Dim(C * b * b), Dim(H / b), Dim(W / b)};
  }
  Value* t = c.emit(OpKind::Transpose, {c.reshape_to(x, six)}, {{"perm", perm}});
  c.set_output(0, c.reshape_to(t, out));
}

void add_movement_ops(ConverterMap& m) {
  m["DepthToSpace"] = depth_space<true>;
  m["SpaceToDepth"] = depth_space<false>;
  m["Reshape"] = reshape;
  m["Flatten"] = flatten;
  m["Squeeze"] = squeeze;
  m["Unsqueeze"] = unsqueeze;
  m["Concat"] = concat;
  m["Split"] = split;
  m["Slice"] = slice;
  m["Transpose"] = transpose;
  m["Expand"] = expand;
  m["Tile"] = tile;
  m["Pad"] = pad;
}

}  // namespace ubfuse::onnx_import
