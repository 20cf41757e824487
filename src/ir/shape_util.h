// Shape arithmetic shared by shape inference, the executor and the kernels.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ubfuse/shape.h"

namespace ubfuse {

// Numpy broadcasting of two (possibly symbolic) shapes; nullopt with *why set when they clash.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* why);
// Reshape target with -1 (infer) and 0 (copy the input dim). The -1 is the input's element count
// divided by the others' as polynomials, so it stays symbolic ("batch*seq", "past+seq") when that
// divides exactly.
std::optional<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& target,
                                    std::string* why);
// The same over a target of dims (a shape value's known dims); with allowzero a 0 is a size.
std::optional<Shape> reshape_target(const Shape& in, const std::vector<Dim>& target, bool allowzero,
                                    std::string* why);
// Length of an ONNX-style slice (clamped starts/ends, negative indices wrap, any nonzero step).
int64_t slice_length(int64_t dim, int64_t start, int64_t end, int64_t step);
// That length for a symbolic dim when it is a polynomial of the dim for every dim past the
// clamping: x[1:] of seq is "seq-1", x[:-1] is "seq-1", x[::-1] is "seq", x[::2] of "2*n" is "n".
// nullopt when it is min(n, dim) or 0 for large dims (x[0:4], x[-1:], x[2:1]) or its division
// by the step is not a polynomial. The polynomial is wrong below the clamping ("seq-1" is -1 at
// seq=0, not 0), where plans find the dim disagrees with the op's real size and throw.
std::optional<Dim> slice_length(const Dim& dim, int64_t start, int64_t end, int64_t step);
// Clamped start index of such a slice.
int64_t slice_start(int64_t dim, int64_t start, int64_t step);

// One spatial axis of an ONNX Conv: input length `in`, kernel length k, stride s >= 1, dilation
// d >= 1. auto_pad "NOTSET" takes the pads pb (begin) and pe (end); "VALID" pads nothing;
// "SAME_UPPER" / "SAME_LOWER" pad for ceil(in / s) outputs, the odd element at the end / the
// beginning. out may be <= 0 (an input shorter than the dilated kernel): the caller says so.
struct ConvAxis {
  int64_t pad_begin = 0, pad_end = 0, out = 0;
};
ConvAxis conv_axis(int64_t in, int64_t k, int64_t s, int64_t d, const std::string& auto_pad,
                   int64_t pb, int64_t pe);
// The output length of that axis for a symbolic input length, when a polynomial states it
// (floor((in + pads - d*(k-1) - 1) / s) + 1 with s dividing in's coefficients, as at stride 1);
// else nullopt, and the dim is the plan's to know.
std::optional<Dim> conv_out_dim(const Dim& in, int64_t k, int64_t s, int64_t d,
                                const std::string& auto_pad, int64_t pb, int64_t pe);
// A pooling window's axis: conv_axis, and with ceil_mode (auto_pad NOTSET or VALID) the output
// rounded up to take a last, partial window, less one that would start past the input and its
// begin pad (ONNX's and PyTorch's rule).
ConvAxis pool_axis(int64_t in, int64_t k, int64_t s, int64_t d, const std::string& auto_pad,
                   int64_t pb, int64_t pe, bool ceil_mode);

// ONNX Pad's modes, and the input index output index o - pad_begin (i) reads along an axis of
// length n: -1 where constant mode fills; reflect mirrors about the end elements, repeatedly past
// a length of pads (numpy.pad); edge repeats the end elements (n > 0).
enum class PadMode { Constant, Reflect, Edge };
std::optional<PadMode> parse_pad_mode(const std::string& s);
int64_t pad_source(int64_t i, int64_t n, PadMode mode);

// ONNX Resize's options (ops.def) and the geometry its scales or sizes give.
enum class ResizeMode { Nearest, Linear, Cubic };
enum class ResizeCoord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNN,  // opset 11's (x + 0.5) / scale
  TfCropAndResize,
};
enum class ResizeNearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
std::optional<ResizeMode> parse_resize_mode(const std::string& s);
std::optional<ResizeCoord> parse_resize_coord(const std::string& s);
std::optional<ResizeNearest> parse_resize_nearest(const std::string& s);
// The output sizes and each axis' scale (1 on the axes not resized) of input sizes `in` resized
// by `values`, the scales (sizes = false: out = floor(in * scale)) or the sizes of the axes
// `axes` (normalized and distinct, one per value). With sizes, policy "stretch" takes them as they
// are (scale out / in); "not_larger" and "not_smaller" keep the aspect ratio: one scale, the
// smallest or largest of sizes / in, and out = round_half_up(scale * in). nullopt with *why
// (the values, the sizes and a hint) for a scale that is not finite and positive, a negative size,
// or an empty axis made longer.
struct ResizeGeometry {
  Sizes out;
  std::vector<double> scales;
};
std::optional<ResizeGeometry> resize_geometry(const Sizes& in, const std::vector<double>& values,
                                              bool sizes, const std::vector<int64_t>& axes,
                                              const std::string& policy, std::string* why);

// AxesShape (ops.def): the vector `mode` makes of an input's shape `s` and the values `v` (axes,
// split sizes or repeats) an ONNX op takes as an input, each value checked against the shape.
// axes_shape_length is its length for rank r and k values (-1: no such mode). axes_shape returns
// nullopt with *why naming the op, the values and the shape when a value is invalid, and with
// *why empty when a symbolic dim leaves it open (a squeezed dim of "seq" may be 1); the plan,
// which knows every size, decides then.
int64_t axes_shape_length(const std::string& mode, int64_t r, int64_t k);
std::optional<Shape> axes_shape(const std::string& mode, const Shape& s,
                                const std::vector<int64_t>& v, int64_t axis, std::string* why);

// Element strides of a contiguous tensor of `sizes`, with 0 where the dim is 1 and broadcast to
// `out` (sizes right-aligned to out's rank).
std::vector<int64_t> broadcast_strides(const Sizes& sizes, const Sizes& out);

}  // namespace ubfuse
