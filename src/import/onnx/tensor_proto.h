// ONNX TensorProto <-> ubfuse Tensor: element types, raw and typed data fields, external data.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <string_view>
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
// `lifted_raw`, where given, is the tensor's raw_data, lifted out of the proto before it was
// parsed (model_parse.h).
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& what,
                         const TensorReadOptions& o,
                         const std::optional<std::string_view>& lifted_raw = std::nullopt);

}  // namespace ubfuse::onnx_import
