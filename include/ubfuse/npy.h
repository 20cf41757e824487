// NumPy .npy files: the tensor format `ubfuse run` reads inputs from and writes outputs to, so
// users compare with numpy or PyTorch directly.
//
// Supported: format versions 1, 2 and 3; C order only; little-endian descrs
//   '<f4' f32, '<f2' f16, '<i8' i64, '<i4' i32, '|b1' bool,
//   '<u2' bf16 -- numpy has no bfloat16, so ubfuse stores bf16 as its raw bits in uint16
//                 (read back in numpy with `(a.astype(np.uint32) << 16).view(np.float32)`),
//   '<f8' read only: converted to f32 (numpy's default float dtype).
// Errors name the file and the field at fault.
#pragma once

#include <string>

#include "ubfuse/tensor.h"

namespace ubfuse {

// Parses .npy bytes; `what` (usually the path) names the source in errors.
Tensor parse_npy(const std::string& bytes, const std::string& what);
Tensor read_npy(const std::string& path);

// Serializes `t` (any ubfuse dtype; bf16 as '<u2' bits) in format version 1, or 2 when the header
// is too long for version 1.
std::string to_npy_bytes(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);

// The descr ubfuse writes for a dtype ('<f4', '<u2' for bf16, ...).
std::string npy_descr(DType t);

}  // namespace ubfuse
