// compile(graph, options) -> CompiledModel, and running it.
//
//   ubfuse::CompiledModel m = ubfuse::compile(g, {{"ge.exec.enableOperatorFusion", "1"}});
//   auto outs = m.run({{"x", x}, {"residual", r}});
//
// Eager mode is the same runtime with fusion switched off: one kernel per op.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ubfuse/decision.h"
#include "ubfuse/graph.h"
#include "ubfuse/model.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// Options as a string map; keys use the GE names users already write plus native names.
// See docs/options.md. Unknown keys and bad values throw Error listing the valid ones.
using Options = std::map<std::string, std::string>;

// Compiles a copy of `g`; `g` itself is not changed.
CompiledModel compile(const Graph& g, const Options& options = {});

// The same, calling `on_progress` on this thread while the generated kernels are built (before,
// as compilers finish, every ~100 ms while they run, and when done). An exception thrown from it
// cancels the compile: the compiler processes are killed and compile() rethrows it. Option
// `progress` still decides whether the stderr line is printed as well.
using CompileProgressFn = std::function<void(const CompileProgress&)>;
CompiledModel compile(const Graph& g, const Options& options, const CompileProgressFn& on_progress);

// Convenience: compile with fusion off and run once.
std::map<std::string, Tensor> run_eager(const Graph& g,
                                        const std::map<std::string, Tensor>& inputs);

}  // namespace ubfuse
