// Where ubfuse keeps what it measures or builds once per machine: generated kernels, the
// profiler's bandwidth, the cost model's calibration.
#pragma once

#include <string>

namespace ubfuse {

// $UBFUSE_CACHE_DIR, else $XDG_CACHE_HOME/ubfuse, else $HOME/.cache/ubfuse; "" when none is set.
std::string user_cache_dir();

}  // namespace ubfuse
