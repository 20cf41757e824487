// If as a kernel: each branch is compiled once, with the outer model's options, into a model of
// its own; a run reads the condition and runs the taken branch straight into the If's outputs.
#pragma once

#include <memory>

#include "runtime/kernel.h"
#include "ubfuse/compile.h"

namespace ubfuse {

// The kernel for an If node (null for other nodes): compiles both branches with `options`
// (minus the gear options, which name the outer graph's inputs) and the outer progress callback.
std::unique_ptr<Kernel> make_if_kernel(const Node& n, const Options& options,
                                       const CompileProgressFn& on_progress = {});

}  // namespace ubfuse
