// Reading ubfuse's UBFUSE_* switches from the environment.
#pragma once

#include <cstdlib>
#include <string_view>

namespace ubfuse {

// True when the variable is set to anything but "" or "0" (UBFUSE_DUMP_KERNELS=1, ...).
inline bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

}  // namespace ubfuse
