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

// Element strides of a contiguous tensor of `sizes`, with 0 where the dim is 1 and broadcast to
// `out` (sizes right-aligned to out's rank).
std::vector<int64_t> broadcast_strides(const Sizes& sizes, const Sizes& out);

}  // namespace ubfuse
