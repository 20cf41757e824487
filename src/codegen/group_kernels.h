// FusedGroup -> Kernel: the codegen stage of graph mode.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpp_compile.h"
#include "fusion/group.h"
#include "kernels/cpu/node_kernel.h"
#include "runtime/kernel.h"

namespace ubfuse {

// What the codegen stage reads.
struct CodegenConfig {
  std::string engine = "cpp";     // cpp (generated C++) | interpreter (the tile interpreter)
  std::string cache_dir;          // generated kernels; "" -> user_cache_dir()
  OwnKernelFn own_kernel;         // the compiler's kernels for nodes that run graphs (If)
  int jobs = 1;                   // compiler processes at once
  cpp::BuildProgressFn progress;  // see build_libraries
  CompileProgress* report = nullptr;  // the build's final state, when set
};

// Bytes of UB one row of `cols` columns needs for what the group keeps between its phases
// (0 for groups that keep nothing): decided by the lowering, which chooses what it keeps.
int64_t ub_bytes_per_row(const FusedGroup& g, int64_t cols);

// One Kernel per group, in the given (launch) order. Single groups use the eager kernel;
// the others are generated C++ (distinct kernels spread over up to `jobs` translation units,
// compiled in parallel) or the tile interpreter.
std::vector<std::unique_ptr<Kernel>> make_group_kernels(const std::vector<FusedGroup>& groups,
                                                        const CodegenConfig& config);

}  // namespace ubfuse
