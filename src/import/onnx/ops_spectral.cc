// The spectral ops of opset 17. DFT and STFT are lowered at import to MatMuls with a cosine and a
// sine basis: a spectrogram front end is a few hundred bins of a few hundred samples per frame,
// where the basis product runs on oneDNN's matmul. The basis angles are 2 pi (k t mod L) / L with
// k t exact in int64, so that large k t lose nothing to f32, reduced to a quarter turn; with a
// constant length the basis folds at import. MelWeightMatrix of constants becomes a constant.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
// The most values a DFT's basis (its cosines, and as many sines) or a mel weight matrix built at
// import may hold: 2^26, 256 MiB of f32.
constexpr int64_t kMaxBasis = int64_t(1) << 26;

// A scalar integer input (rank 0 or [1]) as an i64 scalar.
Value* int_scalar(NodeCtx& c, int i, const std::string& what) {
  const DType t = c.dtype(i);
  if (t != DType::i64 && t != DType::i32) {
    c.invalid(what + " must be int32 or int64, got " + std::string(dtype_name(t)));
  }
  const Shape& s = c.shape(i);
  if (!s.empty() && !(s.size() == 1 && s[0] == Dim(1))) {
    c.invalid(what + " must be a scalar, got the shape " + shape_str(s));
  }
  Value* v = c.value(i);
  if (!s.empty()) v = c.reshape_to(v, {});
  return cast_value(c, v, DType::i64);
}

// The size of x's dim `axis` as an i64 scalar (read from x's shape when it is symbolic).
Value* dim_scalar(NodeCtx& c, Value* x, int64_t axis) {
  const Dim& d = x->shape[size_t(axis)];
  if (d.is_static()) return c.scalar(double(d.value()), DType::i64);
  return c.reshape_to(slice_axis(c, c.emit(OpKind::Shape, {x}), 0, axis, axis + 1), {});
}

// The value of an i64 scalar known at import.
std::optional<int64_t> known(Value* v) {
  const Node* p = v->producer;
  if (p && p->op == OpKind::Constant && p->payload.defined() && p->payload.numel() == 1) {
    return int64_t(p->payload.get(0));
  }
  return std::nullopt;
}

// The DFT along x's last axis: x [..., rows, n] in f32, rows 1 (real) or 2 (real, imaginary);
// the signal zero-padded or cut to length L (an i64 scalar). Returns [..., 2, bins] (real and
// imaginary rows), bins = L / 2 + 1 when onesided, else L; the inverse is divided by L.
Value* dft_rows(NodeCtx& c, Value* x, Value* L, bool onesided, bool inverse) {
  const int64_t r = int64_t(x->shape.size());
  const int64_t rows = x->shape[size_t(r - 2)].value();
  const DType i64 = DType::i64, f32 = DType::f32;
  auto op = [&](OpKind k, std::vector<Value*> in) { return c.emit(k, std::move(in)); };
  Value* zero = c.scalar(0, i64);
  Value* one = c.scalar(1, i64);
  Value* two = c.scalar(2, i64);
  Value* n = dim_scalar(c, x, r - 1);
  const Dim& nd = x->shape[size_t(r - 1)];
  const auto len = known(L);  // checked here; a length given at run time is not
  if (len) {
    const int64_t b = onesided ? *len / 2 + 1 : *len;
    if (*len < 1) c.invalid("the DFT length must be at least 1, got " + std::to_string(*len));
    if (nd.is_static() && double(nd.value()) * double(b) > double(kMaxBasis)) {
      c.unsupported("a DFT of length " + std::to_string(*len) + " over " + nd.str() +
                    " samples: its basis of " + nd.str() + " x " + std::to_string(b) +
                    " values is past the direct DFT's " + std::to_string(kMaxBasis));
    }
  }
  Value* bins = onesided ? op(OpKind::Add, {op(OpKind::Div, {L, two}), one}) : L;
  Value* t = op(OpKind::Range, {zero, n, one});
  t = c.reshape_to(t, {t->shape[0], Dim(1)});  // [n, 1]
  Value* k = op(OpKind::Range, {zero, bins, one});
  // theta = 2 pi m / L, m = k t mod L, as a quarter turn q = 4 m / L and phi = (pi / 2) r / L
  // with r = 4 m - q L: cos and sin of phi, swapped and negated per quarter, so that the
  // quarter points (the Nyquist bin's sin pi) are exact zeros and ones.
  Value* m4 = op(OpKind::Mul, {op(OpKind::Mod, {op(OpKind::Mul, {t, k}), L}), c.scalar(4, i64)});
  Value* q = op(OpKind::Div, {m4, L});  // [n, bins], 0 to 3
  Value* rem = op(OpKind::Sub, {m4, op(OpKind::Mul, {q, L})});
  Value* phi =
      op(OpKind::Mul, {cast_value(c, rem, f32),
                       op(OpKind::Div, {c.scalar(kTwoPi / 4, f32), cast_value(c, L, f32)})});
  Value* c0 = op(OpKind::Cos, {phi});
  Value* s0 = op(OpKind::Sin, {phi});
  Value* odd = op(OpKind::Equal, {op(OpKind::Mod, {q, two}), one});  // quarters 1 and 3 swap
  auto sign = [&](Value* half) {                                     // 1 - 2 (half mod 2) as f32
    return cast_value(
        c, op(OpKind::Sub, {one, op(OpKind::Mul, {two, op(OpKind::Mod, {half, two})})}), f32);
  };
  // cos theta: c0, -s0, -c0, s0; sin theta: s0, c0, -s0, -c0 for quarters 0 to 3.
  Value* cs = op(OpKind::Mul, {op(OpKind::Where, {odd, s0, c0}),
                               sign(op(OpKind::Div, {op(OpKind::Add, {q, one}), two}))});
  Value* sn = op(OpKind::Mul, {op(OpKind::Where, {odd, c0, s0}), sign(op(OpKind::Div, {q, two}))});
  if (!(len && nd.is_static() && *len >= nd.value())) {  // samples past L are cut
    Value* keep = op(OpKind::Less, {t, L});
    cs = op(OpKind::Where, {keep, cs, c.scalar(0, f32)});
    sn = op(OpKind::Where, {keep, sn, c.scalar(0, f32)});
  }
  Value* a = op(OpKind::MatMul, {x, cs});  // [..., rows, bins]: x cos
  Value* b = op(OpKind::MatMul, {x, sn});  // x sin
  // e^(-+i theta) = cos theta -+ i sin theta times (xr + i xi).
  Value *re = nullptr, *im = nullptr;
  if (rows == 1) {
    re = a;
    im = inverse ? b : op(OpKind::Neg, {b});
  } else {
    Value* ar = slice_axis(c, a, r - 2, 0, 1);
    Value* ai = slice_axis(c, a, r - 2, 1, 2);
    Value* br = slice_axis(c, b, r - 2, 0, 1);
    Value* bi = slice_axis(c, b, r - 2, 1, 2);
    re = op(inverse ? OpKind::Sub : OpKind::Add, {ar, bi});
    im = op(inverse ? OpKind::Add : OpKind::Sub, {ai, br});
  }
  if (inverse) {
    Value* inv = op(OpKind::Div, {c.scalar(1, f32), cast_value(c, L, f32)});
    re = op(OpKind::Mul, {re, inv});
    im = op(OpKind::Mul, {im, inv});
  }
  return c.emit(OpKind::Concat, {re, im}, {{"axis", r - 2}});
}

Value* transpose(NodeCtx& c, Value* x, const std::vector<int64_t>& perm) {
  return c.emit(OpKind::Transpose, {x}, {{"perm", perm}});
}

// The trailing dim of a DFT or STFT signal: 1 (real) or 2 (complex).
int64_t complex_dim(NodeCtx& c, const Shape& s, const std::string& what) {
  if (s.size() < 2 || !s.back().is_static() || (s.back().value() != 1 && s.back().value() != 2)) {
    c.invalid(what + " must end in a dim of 1 (real) or 2 (real, imaginary), got the shape " +
              shape_str(s));
  }
  return s.back().value();
}

// DFT(input, dft_length?; axis, inverse, onesided) on [..., n, ..., 1 or 2].
void dft(NodeCtx& c) {
  require_float(c, 0);
  const int64_t r = c.rank(0);
  const int64_t parts = complex_dim(c, c.shape(0), "input");
  int64_t axis = 1;
  if (c.opset() >= 20) {
    if (c.has_input(2)) axis = c.const_ints(2, "axis").at(0);
  } else {
    axis = c.attr_int("axis", 1);
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r - 1) {
    c.invalid("axis must name a dim of the signal, not its last (real, imaginary) dim: " +
              std::to_string(axis < 0 ? axis - r : axis) + " for the shape " +
              shape_str(c.shape(0)));
  }
  const bool inverse = c.attr_int("inverse", 0) != 0;
  const bool onesided = c.attr_int("onesided", 0) != 0;
  if (onesided && parts == 2) c.invalid("onesided needs a real input (a last dim of 1)");
  if (onesided && inverse) c.unsupported("onesided with inverse (a onesided inverse DFT)");
  Value* x = c.value(0);
  const DType dt = x->dtype;
  x = cast_value(c, x, DType::f32);
  Value* L = c.has_input(1) ? int_scalar(c, 1, "dft_length") : dim_scalar(c, x, axis);
  // [others..., parts, n]: the signal's axis last, its parts before it.
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r - 1; i++) {
    if (i != axis) perm.push_back(i);
  }
  perm.push_back(r - 1);
  perm.push_back(axis);
  Value* y = dft_rows(c, transpose(c, x, perm), L, onesided, inverse);
  std::vector<int64_t> back(size_t(r), 0);
  for (int64_t i = 0; i < r; i++) back[size_t(perm[size_t(i)])] = i;
  c.set_output(0, cast_value(c, transpose(c, y, back), dt));
}

// STFT(signal [batch, length, 1 or 2], frame_step, window?, frame_length?; onesided):
// [batch, frames, bins, 2], frames = 1 + floor((length - frame_length) / frame_step), none for a
// signal shorter than a frame. The frames are a Gather of the signal at (frame start + offset),
// times the window, then the DFT.
void stft(NodeCtx& c) {
  require_float(c, 0);
  if (c.rank(0) != 3)
    c.invalid("signal must be [batch, length, 1 or 2], got " + shape_str(c.shape(0)));
  const int64_t parts = complex_dim(c, c.shape(0), "signal");
  const bool onesided = c.attr_int("onesided", 1) != 0;
  if (onesided && parts == 2) c.invalid("onesided needs a real signal (a last dim of 1)");
  const DType i64 = DType::i64;
  Value* x = c.value(0);
  const DType dt = x->dtype;
  x = cast_value(c, x, DType::f32);
  Value* step = int_scalar(c, 1, "frame_step");
  Value* window = nullptr;
  if (c.has_input(2)) {
    require_float(c, 2);
    if (c.rank(2) != 1) c.invalid("window must be 1-D, got " + shape_str(c.shape(2)));
    window = cast_value(c, c.value(2), DType::f32);
  }
  if (!window && !c.has_input(3)) {
    c.invalid("needs a window or a frame_length (the samples per frame)");
  }
  Value* fl = c.has_input(3) ? int_scalar(c, 3, "frame_length") : dim_scalar(c, window, 0);
  Value* fw = window ? dim_scalar(c, window, 0) : fl;  // samples per frame
  if (window && known(fl) && known(fw) && *known(fl) != *known(fw)) {
    c.invalid("window has " + std::to_string(*known(fw)) + " values but frame_length is " +
              std::to_string(*known(fl)));
  }
  auto op = [&](OpKind k, std::vector<Value*> in) { return c.emit(k, std::move(in)); };
  Value* zero = c.scalar(0, i64);
  Value* one = c.scalar(1, i64);
  // 1 + floor((length - frame_length) / step) as (length - frame_length + step) / step: where the
  // numerator is negative (no whole frame) the count is below 1 and the Range empty either way.
  Value* frames =
      op(OpKind::Div, {op(OpKind::Add, {op(OpKind::Sub, {dim_scalar(c, x, 1), fl}), step}), step});
  Value* starts = op(OpKind::Mul, {op(OpKind::Range, {zero, frames, one}), step});
  starts = c.reshape_to(starts, {starts->shape[0], Dim(1)});
  Value* idx = op(OpKind::Add, {starts, op(OpKind::Range, {zero, fw, one})});  // [frames, fw]
  Value* f = c.emit(OpKind::Gather, {x, idx}, {{"axis", int64_t(1)}});  // [b, frames, fw, parts]
  if (window) f = op(OpKind::Mul, {f, c.reshape_to(window, {window->shape[0], Dim(1)})});
  Value* y = dft_rows(c, transpose(c, f, {0, 1, 3, 2}), fl, onesided, false);
  c.set_output(0, cast_value(c, transpose(c, y, {0, 1, 3, 2}), dt));
}

// numpy's floor division of doubles (npy_divmod), which the reference's bin edges use: it can
// differ from floor(a / b) where a / b rounds up to a whole number.
double numpy_floor_divide(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
// [dft_length / 2 + 1, num_mel_bins] triangular filters on the mel scale, computed at import as
// ONNX's reference computes them (in double, the edges in whole spectrogram bins).
void mel_weight_matrix(NodeCtx& c) {
  auto value = [&](int i, const std::string& what, bool integral) {
    if (integral != !is_float(c.dtype(i))) {
      c.invalid(what + " must be " + (integral ? "an integer" : "a float") + ", got " +
                std::string(dtype_name(c.dtype(i))));
    }
    const Tensor& t = c.const_input(i, what +
                                           " given at run time (MelWeightMatrix is computed "
                                           "at import; its inputs must be constants)");
    if (t.numel() != 1) c.invalid(what + " must be a scalar, got " + sizes_str(t.sizes()));
    return t.get(0);
  };
  const double mels = value(0, "num_mel_bins", true), dft = value(1, "dft_length", true),
               rate = value(2, "sample_rate", true), lo = value(3, "lower_edge_hertz", false),
               hi = value(4, "upper_edge_hertz", false);
  const DType out = dtype_from_onnx(int32_t(c.attr_int("output_datatype", 1)),
                                    c.where() + ": attribute 'output_datatype'");
  if (!is_float(out)) c.unsupported("output_datatype " + std::string(dtype_name(out)));
  if (mels < 1 || dft < 1 || rate <= 0) {
    c.invalid("num_mel_bins and dft_length must be at least 1 and sample_rate positive, got " +
              std::to_string(int64_t(mels)) + ", " + std::to_string(int64_t(dft)) + " and " +
              std::to_string(int64_t(rate)));
  }
  const int64_t nmel = int64_t(mels), bins = int64_t(dft) / 2 + 1;
  if (double(bins) * double(nmel) > double(kMaxBasis)) {
    c.unsupported("a mel weight matrix of " + std::to_string(bins) + " x " + std::to_string(nmel) +
                  " values (at most " + std::to_string(kMaxBasis) + ")");
  }
  const double low_mel = 2595 * std::log10(1 + lo / 700),
               high_mel = 2595 * std::log10(1 + hi / 700);
  const double step = (high_mel - low_mel) / double(nmel + 2);
  const auto outside = [&](const std::string& what, const std::string& j) {
    c.invalid(what + " reaches spectrogram bin " + j + " of " + std::to_string(bins) +
              " (lower_edge_hertz " + std::to_string(lo) + ", upper_edge_hertz " +
              std::to_string(hi) + ", sample_rate " + std::to_string(int64_t(rate)) + ")");
  };
  std::vector<int64_t> edge(size_t(nmel + 2));
  for (int64_t i = 0; i < nmel + 2; i++) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + low_mel) / 2595) - 1);
    const double e = numpy_floor_divide((dft + 1) * hz, rate);
    // Every edge is a bin, or one past the last (the last filter's end, exclusive): checked
    // before it becomes an integer (an edge can be any double, NaN included).
    if (!(e >= 0 && e <= double(bins))) {
      char j[32];
      std::snprintf(j, sizeof j, "%.17g", e);
      outside("mel edge " + std::to_string(i), j);
    }
    edge[size_t(i)] = int64_t(e);
  }
  std::vector<double> w(size_t(bins * nmel), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= bins) outside("mel bin " + std::to_string(i), std::to_string(j));
    return w[size_t(j * nmel + i)];
  };
  for (int64_t i = 0; i < nmel; i++) {
    const int64_t left = edge[size_t(i)], center = edge[size_t(i + 1)], right = edge[size_t(i + 2)];
    if (center == left) {
      at(center, i) = 1;
    } else {
      for (int64_t j = left; j <= center; j++) at(j, i) = double(j - left) / double(center - left);
    }
    for (int64_t j = center; j < right; j++) at(j, i) = double(right - j) / double(right - center);
  }
  Tensor t(out, {bins, nmel});
  for (int64_t k = 0; k < t.numel(); k++) t.set(k, w[size_t(k)]);
  c.set_output_const(0, t);
}

}  // namespace

void add_spectral_ops(ConverterMap& m) {
  m["DFT"] = dft;
  m["STFT"] = stft;
  m["MelWeightMatrix"] = mel_weight_matrix;
}

}  // namespace ubfuse::onnx_import
