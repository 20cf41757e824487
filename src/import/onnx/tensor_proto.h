// ONNX TensorProto <-> ubfuse Tensor: element types, raw and typed data fields, external data.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ubfuse/tensor.h"

namespace ubfuse::onnx_import {

// The ubfuse dtype of an ONNX TensorProto.DataType; throws OnnxUnsupportedError naming `what`
// for types ubfuse has no dtype for (double is accepted only where `allow_f64`).
DType dtype_from_onnx(int32_t t, const std::string& what);
std::string onnx_type_name(int32_t t);

struct TensorReadOptions {
  std::string base_dir;  // external data files are looked up here and may not leave it
  std::vector<std::string>* notes = nullptr;  // receives "f64 converted to f32" notes
};

// Converts a TensorProto, checking every size, index and enum. `what` names it in errors.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what,
                         const TensorReadOptions& o);

}  // namespace ubfuse::onnx_import
