// A tensor seen as [outer, len, inner] around one axis: the ops that work along an axis (ArgMax,
// CumSum, TopK) walk `len` elements `inner` apart, once per (outer, inner) position.
#pragma once

#include <cstdint>

#include "ubfuse/tensor.h"

namespace ubfuse::cpu {

struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
  AxisView(const Sizes& s, int64_t ax) {
    for (int64_t i = 0; i < ax; i++) outer *= s[size_t(i)];
    len = s[size_t(ax)];
    for (size_t i = size_t(ax) + 1; i < s.size(); i++) inner *= s[i];
  }
  // Flat index of element k along the axis at position (o, j).
  int64_t at(int64_t o, int64_t k, int64_t j) const { return (o * len + k) * inner + j; }
};

// Element i of an i64 or i32 index tensor.
inline int64_t index_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i64 ? t.data_as<int64_t>()[i] : int64_t(t.data_as<int32_t>()[i]);
}

}  // namespace ubfuse::cpu
