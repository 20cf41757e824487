#include "kernels/cpu/store_policy.h"
#include "ubfuse/profiler.h"

namespace ubfuse {

std::string store_profile_name() { return cpu::store_profile().name; }

}  // namespace ubfuse
