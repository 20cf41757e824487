// Parsing a ModelProto without copying its weights. Protobuf copies every bytes field into a
// string of its own; for the main graph's initializers the import would then copy each one again
// into its tensor. Here their raw_data is lifted out of the wire bytes before the parse and read
// in place, from the caller's buffer or the mapped file.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ubfuse::onnx_import {

struct ParsedModel {
  onnx::ModelProto proto;
  // raw_data of proto.graph().initializer(i), lifted out of the proto: a view of the parsed
  // bytes, or nullopt where the initializer has none (or nothing was lifted: then empty).
  std::vector<std::optional<std::string_view>> raw;
};

// Parses `bytes` (which the views in out.raw point into: keep them alive while they are read).
// Throws ubfuse::Error naming `what` when they are no ModelProto.
void parse_model_bytes(std::string_view bytes, const std::string& what, ParsedModel& out);

// A model file's bytes for as long as the object lives: mapped read-only (`populate` maps all
// its pages at once, for a read of the whole file: one call instead of a fault per page), or
// read where it cannot be mapped (a pipe).
class MappedFile {
 public:
  MappedFile(const std::string& path, bool populate);  // throws ubfuse::Error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const;

 private:
  void* data_ = nullptr;  // the mapping, or null
  size_t size_ = 0;
  std::string read_;  // the bytes where there is no mapping
};

}  // namespace ubfuse::onnx_import
