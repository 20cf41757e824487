// Kernel IR -> C++. One function per group with the UbfKernelFn ABI; inside, one loop per pass
// over the row's columns with the whole elementwise chain in vector registers (Highway, static
// target, the math of kernels/cpu/vecmath.h), tensors read and written directly, the next row
// prefetched in the first pass, non-temporal stores for large outputs, and a masked tail step.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace ubfuse::cpp {

struct RenderedKernel {
  std::string symbol;  // "ubk_<hash of the body>": equal groups share one function
  std::string code;    // the definitions (no includes)
};

// Whether render_kernel emits the software-pipelined UB variant (UbfKernelArgs::use_ub == 2):
// groups with 2+ passes that keep values in the UB. It needs twice the slots.
bool has_pipelined_variant(const kir::Schedule& ub);

RenderedKernel render_kernel(const kir::Program& p, const kir::Schedule& ub,
                             const kir::Schedule& reread);

// The one header a translation unit includes (written next to the embedded headers, with a
// precompiled version), and its text.
extern const char* const kPreludeHeader;
extern const char* const kPreludeText;

// A whole translation unit: includes, then the kernels (duplicates by symbol dropped).
std::string render_unit(const std::vector<RenderedKernel>& kernels);

}  // namespace ubfuse::cpp
