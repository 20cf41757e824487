// Shape arithmetic shared by shape inference, the executor and the kernels.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ubfuse/shape.h"

namespace ubfuse {

// Numpy broadcasting of two (possibly symbolic) shapes; nullopt with *why set when they clash.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* why);
// Reshape target with -1 (infer) and 0 (copy the input dim); symbols survive as products.
std::optional<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& target,
                                    std::string* why);
// Length of an ONNX-style slice (clamped starts/ends, negative indices wrap, any nonzero step).
int64_t slice_length(int64_t dim, int64_t start, int64_t end, int64_t step);
// Clamped start index of such a slice.
int64_t slice_start(int64_t dim, int64_t start, int64_t step);

// Element strides of a contiguous tensor of `sizes`, with 0 where the dim is 1 and broadcast to
// `out` (sizes right-aligned to out's rank).
std::vector<int64_t> broadcast_strides(const Sizes& sizes, const Sizes& out);

}  // namespace ubfuse
