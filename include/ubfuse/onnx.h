// ONNX import: an .onnx model (opsets 13 to 18) becomes a ubfuse Graph.
//
//   ubfuse::Graph g = ubfuse::import_onnx("layer.onnx");
//   ubfuse::CompiledModel m = ubfuse::compile(g, {{"ge.exec.enableOperatorFusion", "1"}});
//
// Initializers and Constant nodes become Constant nodes; shape arithmetic (Shape, Gather, Concat,
// Unsqueeze, Range, ConstantOfShape, ...) is folded at import, symbolically where a graph input
// has a dim_param (which becomes a symbolic Dim, so one import serves every batch and sequence
// length). ONNX ops without a ubfuse op of their own are lowered to existing ops (Gemm -> MatMul +
// Add, Unsqueeze -> Reshape, Split -> Slices, Trilu -> Where on a constant mask, ...).
// docs/onnx.md lists the supported ops and their conformance results.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ubfuse/error.h"
#include "ubfuse/graph.h"
#include "ubfuse/shape.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// The model uses an op, attribute value or dtype that ubfuse does not support. The message names
// the node, op and attribute; for an unknown op it lists the supported ones.
class OnnxUnsupportedError : public Error {
 public:
  using Error::Error;
};

// The model computes a shape from a symbolic dim in a way ubfuse cannot keep symbolic (e.g. a
// Range over the sequence length). Binding the named symbols to sizes at import
// (ImportOptions::static_dims, `ubfuse run --dim`) makes it static.
class OnnxNeedsStaticDimsError : public OnnxUnsupportedError {
 public:
  OnnxNeedsStaticDimsError(const std::string& msg, std::vector<std::string> symbols)
      : OnnxUnsupportedError(msg), symbols(std::move(symbols)) {}
  std::vector<std::string> symbols;
};

struct ImportOptions {
  // Symbols fixed to sizes at import: graph-input dims named here become static.
  SymbolBindings static_dims;
  // Where external data files are looked up when importing from bytes (a path import uses the
  // model's folder). External data may not leave this folder.
  std::string external_data_dir;
  // Graph inputs frozen to these values (as if they were initializers): lets shape-like inputs
  // (a Reshape's shape, Slice bounds, axes) fold at import.
  std::map<std::string, Tensor> constant_inputs;
};

struct OnnxModel {
  Graph graph;
  int64_t opset = 0;               // the default domain's opset
  std::string producer;            // e.g. "pytorch 1.13.1"
  std::vector<std::string> notes;  // conversions worth knowing (f64 initializers -> f32, ...)
};

// Throws OnnxUnsupportedError for what ubfuse cannot run, ubfuse::Error for a malformed file.
OnnxModel import_onnx_model(const std::string& path, const ImportOptions& options = {});
OnnxModel import_onnx_model_from_bytes(const std::string& bytes, const ImportOptions& options = {});
inline Graph import_onnx(const std::string& path, const ImportOptions& options = {}) {
  return std::move(import_onnx_model(path, options).graph);
}
inline Graph import_onnx_from_bytes(const std::string& bytes, const ImportOptions& options = {}) {
  return std::move(import_onnx_model_from_bytes(bytes, options).graph);
}

// The ONNX op types the importer accepts, sorted.
std::vector<std::string> onnx_supported_ops();
// The op types of onnxruntime's contrib domain com.microsoft it accepts (those onnxruntime's graph
// optimizer writes into the models it saves), sorted.
std::vector<std::string> onnx_supported_microsoft_ops();

// Reads a serialized TensorProto (.pb, as in the ONNX backend test data); `name` receives its
// name. External data is resolved relative to the file's folder.
Tensor load_onnx_tensor(const std::string& path, std::string* name = nullptr);

}  // namespace ubfuse

namespace ubfuse {

// The op types a model's graph uses, sorted and deduplicated, read without importing it (so it
// works for models ubfuse cannot run).
std::vector<std::string> onnx_model_op_types(const std::string& path);

// A model's graph inputs (initializers excluded) as import would declare them, without importing.
struct OnnxInputInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;  // dim_param -> symbol, as import_onnx makes it
};
std::vector<OnnxInputInfo> onnx_model_inputs(const std::string& path,
                                             const ImportOptions& options = {});

}  // namespace ubfuse
