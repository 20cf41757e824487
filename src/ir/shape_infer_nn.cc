// Shape inference of the convolution-network ops: Conv, GroupNormalization (and
// InstanceNormalization through it), Pad and Resize.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/shape_infer_internal.h"
#include "ir/shape_util.h"
#include "ir/values.h"
#include "ubfuse/error.h"

namespace ubfuse::shape_infer {

namespace {

// Attribute `k` as `len` integers (default `dflt` each when absent), each at least `min`.
std::vector<int64_t> attr_list(Node& n, const std::string& k, size_t len, int64_t dflt, int64_t min,
                               const std::string& hint) {
  std::vector<int64_t> v = n.has_attr(k) ? n.attr_ints(k) : std::vector<int64_t>(len, dflt);
  if (v.size() != len) {
    fail(n,
         "attribute '" + k + "' " + sizes_str(v) + " has " + std::to_string(v.size()) +
             " values, expected " + std::to_string(len),
         hint);
  }
  for (int64_t x : v) {
    if (x < min)
      fail(n, "attribute '" + k + "' " + sizes_str(v) + " has a value below " + std::to_string(min),
           hint);
  }
  n.attrs[k] = v;
  return v;
}

// A window's strides, dilations, pads and auto_pad (Conv's and the pools'), checked and written
// back complete.
struct Window {
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad;
};

Window window_attrs(Node& n, size_t sp, const std::string& hint) {
  Window w;
  w.strides = attr_list(n, "strides", sp, 1, 1, hint);
  w.dilations = attr_list(n, "dilations", sp, 1, 1, hint);
  const bool had_pads = n.has_attr("pads");
  w.pads = attr_list(n, "pads", 2 * sp, 0, 0, hint);
  w.auto_pad = n.attr_str("auto_pad", "NOTSET");
  const std::string& ap = w.auto_pad;
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID") {
    fail(n, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"" + ap + "\"");
  }
  if (ap != "NOTSET" && had_pads &&
      std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; })) {
    fail(n, "explicit pads " + sizes_str(w.pads) + " with auto_pad " + ap,
         "give either pads (auto_pad NOTSET) or auto_pad, not both");
  }
  n.attrs["auto_pad"] = ap;
  return w;
}

}  // namespace

// Conv: x [N, C, spatial...] (1 to 3 spatial axes; 1 or 2 for the integer convolutions),
// w [M, C/group, k...], bias [M]. The attributes
// are written back complete (strides, dilations, pads, group, auto_pad), so the kernels and the
// reference read them as they are.
void infer_conv(Node& n) { infer_conv_geometry(n, false); }

void infer_conv_geometry(Node& n, bool integer) {
  const Value* x = n.inputs[0];
  const Value* w = n.inputs[1];
  if (!integer) {  // ConvInteger checks its operands' dtypes itself (shape_infer_quant.cc)
    require_float(n, x);
    require_same_dtype(n, x, w);
  }
  const size_t r = x->shape.size();
  if (integer && r != 3 && r != 4) {
    fail(n, "input must be [N, C, L] (1-D) or [N, C, H, W] (2-D), got rank " + std::to_string(r),
         "integer convolutions over 3 and more spatial axes are not supported");
  }
  if (r < 3 || r > 5) {
    fail(n,
         "input must be [N, C, L] (1-D), [N, C, H, W] (2-D) or [N, C, D, H, W] (3-D), got rank " +
             std::to_string(r),
         "convolutions over more than 3 spatial axes are not supported");
  }
  if (w->shape.size() != r) {
    fail(n,
         "weight must be [M, C/group, k...] of rank " + std::to_string(r) + ", got " +
             shape_str(w->shape),
         "W holds one kernel per output channel: [out channels, in channels / group, kernel...]");
  }
  const size_t sp = r - 2;
  const std::string kHint =
      "Conv attributes: strides, dilations >= 1, pads >= 0, one per "
      "spatial axis (pads: begins then ends)";
  const int64_t group = n.attr_int("group", 1);
  if (group < 1) fail(n, "group must be >= 1, got " + std::to_string(group));
  n.attrs["group"] = group;
  const Dim& c = x->shape[1];
  const Dim& m = w->shape[0];
  if (m.is_static() && m.value() % group != 0) {
    fail(n,
         "group " + std::to_string(group) + " does not divide the " + m.str() +
             " output channels (W's dim 0)",
         "the output channels split into `group` equal groups");
  }
  if (c.is_static() && c.value() % group != 0) {
    fail(n,
         "group " + std::to_string(group) + " does not divide the " + c.str() +
             " input channels (X's dim 1)",
         "the input channels split into `group` equal groups; depthwise is group = channels");
  }
  if (Dim::mul(w->shape[1], Dim(group)) != c) {
    fail(n,
         "weight " + shape_str(w->shape) + " takes " + w->shape[1].str() +
             " input channels per group, but the input's " + c.str() + " channels in " +
             std::to_string(group) + " group(s) give " +
             (c.is_static() ? std::to_string(c.value() / group)
                            : c.str() + "/" + std::to_string(group)),
         "W is [out channels, in channels / group, kernel...]");
  }
  std::vector<int64_t> k;
  for (size_t i = 2; i < r; i++) {
    if (!w->shape[i].is_static() || w->shape[i].value() < 1) {
      fail(n, "kernel dims of weight " + shape_str(w->shape) + " must be fixed and >= 1");
    }
    k.push_back(w->shape[i].value());
  }
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != k) {
    fail(n,
         "kernel_shape " + sizes_str(n.attr_ints("kernel_shape")) +
             " does not match the weight's kernel dims " + sizes_str(k) + " (weight " +
             shape_str(w->shape) + ")",
         "kernel_shape is optional; when given it must equal W's trailing dims");
  }
  const Window win = window_attrs(n, sp, kHint);
  const auto &strides = win.strides, &dil = win.dilations, &pads = win.pads;
  const std::string& ap = win.auto_pad;
  if (n.inputs.size() > 2 && !integer) {
    const Value* b = n.inputs[2];
    require_same_dtype(n, x, b);
    if (b->shape.size() != 1 || b->shape[0] != m) {
      fail(n, "bias must have shape [" + m.str() + "] (one per output channel), got " +
                  shape_str(b->shape));
    }
  }
  Shape out{x->shape[0], m};
  for (size_t i = 0; i < sp; i++) {
    const Dim& in = x->shape[2 + i];
    auto o = conv_out_dim(in, k[i], strides[i], dil[i], ap, pads[i], pads[sp + i]);
    if (o && o->is_static() && o->value() < 1) {
      fail(n,
           "spatial axis " + std::to_string(i) + " of length " + in.str() +
               " gives no output: the kernel spans " + std::to_string(dil[i] * (k[i] - 1) + 1) +
               " (size " + std::to_string(k[i]) + ", dilation " + std::to_string(dil[i]) +
               ") and the pads add " + std::to_string(ap == "NOTSET" ? pads[i] + pads[sp + i] : 0),
           "pad the input or use a smaller kernel or dilation");
    }
    out.push_back(o ? *o : runtime_dim(n, 0, int(2 + i)));
  }
  n.out()->dtype = integer ? DType::i32 : x->dtype;
  n.out()->shape = out;
}

// MaxPool, AveragePool: x [N, C, spatial...] with 1 to 3 spatial axes, a window per output over
// each channel. MaxPool takes floats and 8-bit integers (a max is exact in any dtype); its second
// output, when the node has one, holds each max's flat index into x (i64).
void infer_pool(Node& n) {
  const Value* x = n.inputs[0];
  const bool max = n.op == OpKind::MaxPool;
  if (!is_float(x->dtype) && !(max && (x->dtype == DType::u8 || x->dtype == DType::i8))) {
    fail(n,
         "input must be f32, bf16 or f16" + std::string(max ? ", u8 or i8" : "") + ", got " +
             std::string(dtype_name(x->dtype)),
         "Cast the input to a float dtype");
  }
  if (n.outputs.size() > (max ? 2u : 1u)) {
    fail(n, "has " + std::to_string(n.outputs.size()) + " outputs",
         "MaxPool gives the pooled values and, optionally, their indices; AveragePool one output");
  }
  const size_t r = x->shape.size();
  if (r < 3 || r > 5) {
    fail(n, "input must be [N, C, spatial...] with 1 to 3 spatial axes, got rank " +
                std::to_string(r));
  }
  const size_t sp = r - 2;
  const std::string kHint =
      "pooling attributes: kernel_shape >= 1, strides and dilations >= 1, pads >= 0, one per "
      "spatial axis (pads: begins then ends)";
  if (!n.has_attr("kernel_shape")) fail(n, "missing attribute 'kernel_shape'", kHint);
  const auto k = attr_list(n, "kernel_shape", sp, 1, 1, kHint);
  const Window win = window_attrs(n, sp, kHint);
  const auto &strides = win.strides, &dil = win.dilations, &pads = win.pads;
  const std::string& ap = win.auto_pad;
  for (size_t i = 0; i < sp; i++) {
    // ONNX requires pads smaller than the window; a larger pad would give windows of pads only.
    if (pads[i] >= dil[i] * (k[i] - 1) + 1 || pads[sp + i] >= dil[i] * (k[i] - 1) + 1) {
      fail(n,
           "pads " + sizes_str(pads) + " reach past the window " + sizes_str(k) +
               " along spatial axis " + std::to_string(i),
           "each pad must be smaller than the (dilated) kernel size");
    }
  }
  for (const char* flag : {"ceil_mode", "count_include_pad", "storage_order"}) {
    const int64_t v = n.attr_int(flag, 0);
    if (v != 0 && v != 1) fail(n, std::string(flag) + " must be 0 or 1, got " + std::to_string(v));
    n.attrs[flag] = v;
  }
  const bool ceil = n.attr_int("ceil_mode", 0) != 0;
  Shape out{x->shape[0], x->shape[1]};
  for (size_t i = 0; i < sp; i++) {
    const Dim& in = x->shape[2 + i];
    std::optional<Dim> o;
    if (in.is_static()) {
      o = Dim(pool_axis(in.value(), k[i], strides[i], dil[i], ap, pads[i], pads[sp + i], ceil).out);
    } else if (!ceil) {
      o = conv_out_dim(in, k[i], strides[i], dil[i], ap, pads[i], pads[sp + i]);
    }
    if (o && o->is_static() && o->value() < 1) {
      fail(n,
           "spatial axis " + std::to_string(i) + " of length " + in.str() +
               " gives no output: the window spans " + std::to_string(dil[i] * (k[i] - 1) + 1) +
               " (size " + std::to_string(k[i]) + ", dilation " + std::to_string(dil[i]) + ")",
           "pad the input or use a smaller kernel or dilation");
    }
    out.push_back(o ? *o : runtime_dim(n, 0, int(2 + i)));
  }
  n.out()->dtype = x->dtype;
  n.out()->shape = out;
  if (n.outputs.size() == 2) {
    n.outputs[1]->dtype = DType::i64;
    n.outputs[1]->shape = out;
  }
}

// GroupNorm: x [N, C, ...]; each sample's C channels in `groups` groups, normalized over each
// group's channels and positions, then scaled and shifted per channel.
void infer_group_norm(Node& n) {
  const Value* x = n.inputs[0];
  require_float(n, x);
  if (x->shape.size() < 2) {
    fail(n, "input must be [N, C, ...] (rank >= 2), got rank " + std::to_string(x->shape.size()));
  }
  const Dim& c = x->shape[1];
  if (!c.is_static()) {
    fail(n, "needs a fixed channel count (X's dim 1), got " + c.str(),
         "the groups split the channels, so their number must be known");
  }
  if (!n.has_attr("groups")) fail(n, "missing attribute 'groups'");
  const int64_t g = n.attr_int("groups", 1);
  if (g < 1 || c.value() % g != 0) {
    fail(n, "groups " + std::to_string(g) + " does not divide the " + c.str() + " channels",
         "num_groups must be >= 1 and divide X's dim 1 (InstanceNormalization: one per channel)");
  }
  const double eps = n.attr_float("eps", 1e-5);
  if (!(eps >= 0)) fail(n, "eps must be >= 0, got " + std::to_string(eps));
  for (size_t i = 1; i < n.inputs.size(); i++) {
    const Value* p = n.inputs[i];
    require_same_dtype(n, x, p);
    if (p->shape.size() != 1 || p->shape[0] != c) {
      fail(n,
           std::string(i == 1 ? "scale" : "bias") + " must have shape [" + c.str() +
               "] (one per channel), got " + shape_str(p->shape),
           "a per-group scale or bias (GroupNormalization before opset 21) repeats each value "
           "over its group's channels");
    }
  }
  n.out()->dtype = x->dtype;
  n.out()->shape = x->shape;
}

// Pad: each axis grows by its begin and end pads (negative ones crop).
void infer_pad(Node& n) {
  const Value* x = n.inputs[0];
  const size_t r = x->shape.size();
  std::vector<int64_t> pads;
  bool known = true;
  if (n.inputs.size() == 3) {
    // (x, value, pads): the pads a value operand, checked here when known, else by each plan.
    if (n.has_attr("pads")) fail(n, "takes pads as an attribute or as input 2, not both");
    if (operand_length(n, 2, "pads") != int64_t(2 * r)) {
      fail(n,
           "pads must hold " + std::to_string(2 * r) + " values for rank " + std::to_string(r) +
               ", got the shape " + shape_str(n.inputs[2]->shape),
           "pads lists every axis' begin pad, then every axis' end pad");
    }
    auto p = operand_static_ints(n, 2);
    known = p.has_value();
    if (p) pads = *p;
  } else {
    if (!n.has_attr("pads")) fail(n, "missing attribute 'pads'");
    pads = n.attr_ints("pads");
  }
  if (known && pads.size() != 2 * r) {
    fail(n,
         "pads " + sizes_str(pads) + " has " + std::to_string(pads.size()) + " values, expected " +
             std::to_string(2 * r) + " for rank " + std::to_string(r),
         "pads lists every axis' begin pad, then every axis' end pad");
  }
  const std::string mode = n.attr_str("mode", "constant");
  auto pm = parse_pad_mode(mode);
  if (!pm) fail(n, "mode must be constant, reflect or edge, got \"" + mode + "\"");
  n.attrs["mode"] = mode;
  if (n.inputs.size() > 1) {
    const Value* v = n.inputs[1];
    require_same_dtype(n, x, v);
    if (v->shape.size() > 1 || (v->shape.size() == 1 && v->shape[0] != Dim(int64_t(1)))) {
      fail(n, "the fill value must have one element, got " + shape_str(v->shape));
    }
  }
  n.out()->dtype = x->dtype;
  if (!known) {
    Shape s;  // each dim the plan's to know
    for (size_t d = 0; d < r; d++) s.push_back(runtime_dim(n, 0, int(d)));
    n.out()->shape = s;
    return;
  }
  Shape out;
  for (size_t i = 0; i < r; i++) {
    const Dim& d = x->shape[i];
    const int64_t b = pads[i], e = pads[r + i];
    Dim o = Dim::add(d, Dim(b + e));
    if (o.is_static() && o.value() < 0) {
      fail(n, "pads " + sizes_str(pads) + " crop axis " + std::to_string(i) + " of length " +
                  d.str() + " below 0");
    }
    if (*pm != PadMode::Constant && d.is_static() && d.value() == 0 && (b > 0 || e > 0)) {
      fail(n, "cannot " + mode + "-pad axis " + std::to_string(i) + ", which is empty",
           "constant mode pads an empty axis");
    }
    out.push_back(o);
  }
  n.out()->dtype = x->dtype;
  n.out()->shape = out;
}

}  // namespace ubfuse::shape_infer

namespace ubfuse::shape_infer {

// Resize: the attributes checked and written back complete (axes normalized, all of them when
// absent), the output's sizes from the scales or sizes where they are known (a constant or, while
// a plan is built, the run's values), else the resized axes' dims are the plan's to know.
void infer_resize(Node& n) {
  const Value* x = n.inputs[0];
  require_float(n, x);
  const int64_t r = int64_t(x->shape.size());
  if (r == 0) fail(n, "cannot resize a scalar", "Resize samples the axes of a tensor of rank >= 1");
  const std::string mode = n.attr_str("mode", "nearest"),
                    coord = n.attr_str("coordinate_transformation_mode", "half_pixel"),
                    nearest = n.attr_str("nearest_mode", "round_prefer_floor"),
                    policy = n.attr_str("keep_aspect_ratio_policy", "stretch");
  if (!parse_resize_mode(mode)) {
    fail(n, "mode must be nearest, linear or cubic, got \"" + mode + "\"",
         "ONNX's Resize interpolates by these three modes only");
  }
  if (!parse_resize_coord(coord)) {
    fail(n, "coordinate_transformation_mode \"" + coord + "\" is not one of ONNX's",
         "half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, "
         "tf_half_pixel_for_nn or tf_crop_and_resize");
  }
  if (!parse_resize_nearest(nearest)) {
    fail(n, "nearest_mode \"" + nearest + "\" is not one of ONNX's",
         "round_prefer_floor, round_prefer_ceil, floor or ceil");
  }
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    fail(n, "keep_aspect_ratio_policy \"" + policy + "\" is not one of ONNX's",
         "stretch, not_larger or not_smaller");
  }
  for (const char* k : {"exclude_outside", "antialias"}) {
    const int64_t v = n.attr_int(k, 0);
    if (v != 0 && v != 1) fail(n, std::string(k) + " must be 0 or 1, got " + std::to_string(v));
    n.attrs[k] = v;
  }
  const double a = n.attr_float("cubic_coeff_a", -0.75),
               e = n.attr_float("extrapolation_value", 0.0);
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) {
    for (int64_t ax : n.attr_ints("axes")) {
      const int64_t v = norm_axis(n, ax, r);
      if (std::find(axes.begin(), axes.end(), v) != axes.end()) {
        fail(n, "axes " + sizes_str(n.attr_ints("axes")) + " repeat axis " + std::to_string(v),
             "each axis is resized once");
      }
      axes.push_back(v);
    }
  } else {
    for (int64_t i = 0; i < r; i++) axes.push_back(i);
  }
  n.attrs["mode"] = mode;
  n.attrs["coordinate_transformation_mode"] = coord;
  n.attrs["nearest_mode"] = nearest;
  n.attrs["keep_aspect_ratio_policy"] = policy;
  n.attrs["cubic_coeff_a"] = a;
  n.attrs["extrapolation_value"] = e;
  n.attrs["axes"] = axes;
  const int64_t k = int64_t(axes.size());

  // Input 1: scales (float) or sizes (integers), one per resized axis.
  const Value* v = n.inputs[1];
  const bool sizes = v->dtype == DType::i64 || v->dtype == DType::i32;
  if (!sizes && v->dtype != DType::f32) {
    fail(n,
         "input 1 must hold scales (f32) or sizes (i64), got " + std::string(dtype_name(v->dtype)),
         "ONNX's scales are float, its sizes int64");
  }
  const char* what = sizes ? "sizes" : "scales";
  if (v->shape.size() != 1 || !v->shape[0].is_static() || v->shape[0].value() != k) {
    fail(n,
         std::string(what) + " must hold " + std::to_string(k) + " values, one per resized axis, " +
             "got the shape " + shape_str(v->shape),
         "one value per axis of the input's rank, or per axis in 'axes'");
  }
  if (n.inputs.size() > 2) {
    const Value* roi = n.inputs[2];
    require_float(n, roi);
    if (roi->shape.size() != 1 || (roi->shape[0].is_static() && roi->shape[0].value() != 2 * k)) {
      fail(n,
           "roi must hold " + std::to_string(2 * k) + " values, got the shape " +
               shape_str(roi->shape),
           "roi lists every resized axis' start, then every one's end (tf_crop_and_resize)");
    }
  }
  n.out()->dtype = x->dtype;
  Shape out = x->shape;
  // Sizes stretched: the output's dims are the values, symbolic ones too (a shape value).
  if (sizes && policy == "stretch") {
    auto d = operand_dims(n, 1);
    for (int64_t i = 0; i < k; i++) {
      const size_t ax = size_t(axes[size_t(i)]);
      if (!d) {
        out[ax] = runtime_dim(n, 0, int(ax));
        continue;
      }
      const Dim& o = (*d)[size_t(i)];
      if (o.is_static() && o.value() < 0) {
        fail(n, "sizes " + shape_str(*d) + " holds a negative size",
             "sizes are the output's lengths along the resized axes");
      }
      const Dim& in = x->shape[ax];
      if (in.is_static() && in.value() == 0 && !(o.is_static() && o.value() == 0)) {
        fail(n, "cannot resize the empty axis " + std::to_string(ax) + " to " + o.str(),
             "an empty axis has nothing to sample");
      }
      out[ax] = o;
    }
    n.out()->shape = out;
    return;
  }
  const Tensor* t = operand_value(n, 1);
  std::vector<double> vals;
  if (t) {
    for (int64_t i = 0; i < t->numel(); i++) vals.push_back(t->get(i));
  }
  bool all_static = true;
  for (int64_t ax : axes) all_static = all_static && x->shape[size_t(ax)].is_static();
  if (t && all_static) {
    std::string why;
    Sizes in;  // the axes not resized may be symbolic: 1 stands in for them
    for (const Dim& d : x->shape) in.push_back(d.is_static() ? d.value() : 1);
    auto g = resize_geometry(in, vals, sizes, axes, policy, &why);
    if (!g) fail(n, why);
    for (int64_t ax : axes) out[size_t(ax)] = Dim(g->out[size_t(ax)]);
    n.out()->shape = out;
    return;
  }
  for (int64_t i = 0; i < k; i++) {
    const size_t ax = size_t(axes[size_t(i)]);
    // A symbolic length times a whole scale stays a polynomial; any other is the plan's.
    const double s = t ? vals[size_t(i)] : 0.0;
    if (t && !sizes && s >= 1 && s == std::trunc(s) && s < 1e9) {
      out[ax] = Dim::mul(x->shape[ax], Dim(int64_t(s)));
    } else if (t && !sizes && !(s > 0 && std::isfinite(s))) {
      fail(n, "scales hold " + std::to_string(s) + ", not a positive finite scale",
           "a scale is the output's length over the input's, > 0");
    } else {
      out[ax] = runtime_dim(n, 0, int(ax));
    }
  }
  n.out()->shape = out;
}

}  // namespace ubfuse::shape_infer
