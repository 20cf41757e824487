#include "ubfuse/tensor.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "ubfuse/error.h"
#include "util/big_alloc.h"
#include "util/machine_memory.h"

namespace ubfuse {

Tensor::Tensor(DType dtype, Sizes sizes) : dtype_(dtype), sizes_(std::move(sizes)) {
  size_t bytes = dtype_size(dtype_);
  for (auto s : sizes_) {
    if (s < 0) throw Error("tensor size " + sizes_str(sizes_) + " has a negative dim");
    if (__builtin_mul_overflow(bytes, size_t(s), &bytes)) bytes = SIZE_MAX;
  }
  // No tensor larger than the machine's memory can be used: refuse it with its sizes instead of
  // asking the allocator (or, with overcommit, the OOM killer) to decide.
  if (const size_t mem = machine_memory_bytes(); mem && bytes > mem) {
    throw Error("a " + std::string(dtype_name(dtype_)) + " tensor of sizes " + sizes_str(sizes_) +
                " needs " +
                (bytes == SIZE_MAX ? std::string("more than 2^64") : std::to_string(bytes)) +
                " bytes, more than this machine's memory (" + std::to_string(mem) +
                " bytes); hint: check the shapes or dims that produced it");
  }
  void* p = alloc_tensor_bytes(bytes ? bytes : 1);
  if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  owner_ = std::shared_ptr<void>(p, std::free);
  data_ = p;
}

Tensor Tensor::view(DType dtype, Sizes sizes, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.data_ = data;
  return t;
}

void Tensor::assign_view(DType dtype, const Sizes& sizes, void* data) {
  owner_.reset();
  dtype_ = dtype;
  sizes_.assign(sizes.begin(), sizes.end());
  data_ = data;
}

Tensor Tensor::zeros(DType dtype, Sizes sizes) {
  Tensor t(dtype, std::move(sizes));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::from_floats(DType dtype, Sizes sizes, const std::vector<float>& values) {
  Tensor t(dtype, std::move(sizes));
  if (int64_t(values.size()) != t.numel()) {
    throw Error("from_floats: " + std::to_string(values.size()) + " values for shape " +
                sizes_str(t.sizes()));
  }
  for (int64_t i = 0; i < t.numel(); i++) t.set(i, values[i]);
  return t;
}

Tensor Tensor::random(DType dtype, Sizes sizes, uint64_t seed, double lo, double hi) {
  Tensor t(dtype, std::move(sizes));
  std::mt19937_64 gen(seed);
  int64_t n = t.numel();
  if (is_float(dtype)) {
    std::uniform_real_distribution<float> dist{float(lo), float(hi)};
    if (dtype == DType::f32) {
      float* p = t.data_as<float>();
      for (int64_t i = 0; i < n; i++) p[i] = dist(gen);
    } else {
      for (int64_t i = 0; i < n; i++) t.set(i, dist(gen));
    }
  } else if (dtype == DType::boolean) {
    std::bernoulli_distribution dist(0.5);
    for (int64_t i = 0; i < n; i++) t.set(i, dist(gen) ? 1 : 0);
  } else {
    std::uniform_int_distribution<int64_t> dist(int64_t(lo),
                                                std::max(int64_t(lo), int64_t(hi) - 1));
    for (int64_t i = 0; i < n; i++) t.set(i, double(dist(gen)));
  }
  return t;
}

double Tensor::get(int64_t i) const {
  switch (dtype_) {
    case DType::f32:
      return static_cast<const float*>(data_)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(data_)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(data_)[i]);
    case DType::i64:
      return double(static_cast<const int64_t*>(data_)[i]);
    case DType::i32:
      return double(static_cast<const int32_t*>(data_)[i]);
    case DType::boolean:
      return static_cast<const uint8_t*>(data_)[i] ? 1.0 : 0.0;
    case DType::i8:
      return static_cast<const int8_t*>(data_)[i];
    case DType::u8:
      return static_cast<const uint8_t*>(data_)[i];
  }
  return 0;
}

void Tensor::set(int64_t i, double v) {
  switch (dtype_) {
    case DType::f32:
      static_cast<float*>(data_)[i] = float(v);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(data_)[i] = f32_to_bf16(float(v));
      break;
    case DType::f16:
      static_cast<uint16_t*>(data_)[i] = f32_to_f16(float(v));
      break;
    case DType::i64:
      static_cast<int64_t*>(data_)[i] = int64_t(v);
      break;
    case DType::i32:
      static_cast<int32_t*>(data_)[i] = int32_t(v);
      break;
    case DType::boolean:
      static_cast<uint8_t*>(data_)[i] = v != 0 ? 1 : 0;
      break;
    case DType::i8:  // wraps like the wider integers' conversions do (two's complement)
      static_cast<int8_t*>(data_)[i] = int8_t(uint8_t(int64_t(v)));
      break;
    case DType::u8:
      static_cast<uint8_t*>(data_)[i] = uint8_t(int64_t(v));
      break;
  }
}

std::vector<float> Tensor::to_floats() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); i++) out[i] = float(get(i));
  return out;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, sizes_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::reshaped(Sizes sizes) const {
  if (ubfuse::numel(sizes) != numel()) {
    throw Error("cannot reshape " + sizes_str(sizes_) + " to " + sizes_str(sizes));
  }
  Tensor t = *this;
  t.sizes_ = std::move(sizes);
  return t;
}

std::string Tensor::str(int max_elems) const {
  std::ostringstream os;
  os << "Tensor(" << dtype_name(dtype_) << ", " << sizes_str(sizes_) << ", [";
  for (int64_t i = 0; i < numel() && i < max_elems; i++) os << (i ? ", " : "") << get(i);
  if (numel() > max_elems) os << ", ...";
  os << "])";
  return os.str();
}

}  // namespace ubfuse
