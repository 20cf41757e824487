// Building generated C++ into a loaded shared object, with an on-disk cache.
//
// The cache key hashes the source, the flags, the compiler's version, the CPU (model and
// feature flags: -march=native code is only valid there) and the embedded headers. Files are
// written to a temporary name and renamed, so concurrent processes never see half a file.
// Cache dir: the cache_dir argument (option cache_dir), else user_cache_dir() (util/cache_dir.h:
// $UBFUSE_CACHE_DIR, else $XDG_CACHE_HOME/ubfuse, else ~/.cache/ubfuse), else /tmp.
// UBFUSE_DUMP_KERNELS=1 prints each generated source to stderr.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ubfuse/model.h"

namespace ubfuse::cpp {

struct Toolchain {
  std::string compiler;  // path of the C++ compiler
  std::string version;   // its `--version` first line
  bool available = false;
  std::string why_not;  // when not available
};

// The compiler generated kernels are built with: $UBFUSE_CXX, else the one that built ubfuse.
const Toolchain& toolchain();

// `cache_dir` if not empty, else the environment's choice (above).
std::string kernel_cache_dir(const std::string& cache_dir);

// One translation unit: its source, the groups it holds (for error messages) and how many
// kernels (for progress).
struct UnitSource {
  std::string source;
  std::string what;
  int kernels = 1;
};

// Called on the calling thread: once before compiling, after units finish (about every 100 ms
// while compilers run) and once when finished. Throwing cancels: the running compilers are
// killed and build_libraries rethrows.
using BuildProgress = CompileProgress;
using BuildProgressFn = std::function<void(const BuildProgress&)>;

// Compiles each unit (or finds it in the cache) and dlopens it; the handles close with their
// last reference. Up to `jobs` compilers run at once; `*final_state`, when given, gets the last
// progress. Throws Error with the compiler's message when one fails; the unit's `what` names its
// groups there.
std::vector<std::shared_ptr<void>> build_libraries(const std::vector<UnitSource>& units,
                                                   const std::string& cache_dir, int jobs,
                                                   const BuildProgressFn& progress,
                                                   BuildProgress* final_state);
// One unit, one job, no progress.
std::shared_ptr<void> build_library(const std::string& source, const std::string& cache_dir,
                                    const std::string& what);

// The address of `symbol` in a library from build_library; throws Error when missing.
void* library_symbol(const std::shared_ptr<void>& lib, const std::string& symbol);

// Counters for tests and the trace: compiler runs and cache hits in this process.
struct BuildCounters {
  int compiles = 0;
  int cache_hits = 0;
};
BuildCounters build_counters();

}  // namespace ubfuse::cpp
