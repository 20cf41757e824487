// The "ubfuse ops and ONNX" table of docs/onnx.md, from ops.def: onnx_conformance_test.cc writes
// it (UBFUSE_WRITE_ONNX_DOC), op_spec_test.cc checks that the page has it.
#pragma once

#include <string>

#include "ubfuse/op.h"

namespace ubfuse::testing {

inline std::string onnx_op_table() {
  std::string s =
      "## ubfuse ops and ONNX\n\n"
      "Every ubfuse op (include/ubfuse/ops.def) with the ONNX op that imports to it: `direct` "
      "ones through the generic 1:1 converter, `converter` ones through one of their own "
      "(src/import/onnx); the others say why no ONNX op maps to them.\n\n"
      "| ubfuse op | ONNX op | import |\n"
      "| --- | --- | --- |\n";
  for (int k = 0; k < kNumOps; k++) {
    const OpInfo& i = op_info(OpKind(k));
    const bool none = i.onnx == OnnxImport::None;
    s += "| " + std::string(i.name) + " | " + (none ? "-" : "`" + std::string(i.onnx_name) + "`") +
         " | " +
         (none                           ? std::string(i.onnx_name)
          : i.onnx == OnnxImport::Direct ? std::string("direct")
                                         : std::string("converter")) +
         " |\n";
  }
  return s;
}

}  // namespace ubfuse::testing
