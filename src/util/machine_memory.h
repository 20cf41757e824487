// The machine's physical memory, for the checks and reports that need it.
#pragma once

#include <cstddef>

namespace ubfuse {

// Physical memory in bytes (0 if the system does not say); read once.
size_t machine_memory_bytes();

}  // namespace ubfuse
