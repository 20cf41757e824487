// A dense row-major host tensor that owns its memory (64-byte aligned) or views the caller's.
// Copies share the buffer; clone() makes a deep copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ubfuse/dtype.h"
#include "ubfuse/shape.h"

namespace ubfuse {

class Tensor {
 public:
  Tensor() = default;
  // Allocates (uninitialized) memory.
  Tensor(DType dtype, Sizes sizes);
  // Views `data`, which must outlive every use of the tensor.
  static Tensor view(DType dtype, Sizes sizes, void* data);
  // Makes this tensor a view of `data`, as view() would, reusing the storage of its sizes (the
  // executor rebinds its kernels' operands this way on every call without allocating).
  void assign_view(DType dtype, const Sizes& sizes, void* data);
  static Tensor zeros(DType dtype, Sizes sizes);
  // From f32 values, converted to `dtype` (rounding to nearest even for bf16/f16).
  static Tensor from_floats(DType dtype, Sizes sizes, const std::vector<float>& values);
  // Uniform values in [lo, hi) from a fixed-seed generator (floats) or integers in [lo, hi).
  static Tensor random(DType dtype, Sizes sizes, uint64_t seed, double lo = -1.0, double hi = 1.0);

  bool defined() const { return data_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Sizes& sizes() const { return sizes_; }
  int64_t dim(int i) const { return sizes_.at(i < 0 ? i + rank() : i); }
  int rank() const { return int(sizes_.size()); }
  int64_t numel() const { return ubfuse::numel(sizes_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  // Element i (flat index) as double / set from double, whatever the dtype.
  double get(int64_t i) const;
  void set(int64_t i, double v);
  std::vector<float> to_floats() const;

  Tensor clone() const;
  // Same memory, new sizes with the same element count.
  Tensor reshaped(Sizes sizes) const;
  std::string str(int max_elems = 8) const;

 private:
  DType dtype_ = DType::f32;
  Sizes sizes_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
};

}  // namespace ubfuse
