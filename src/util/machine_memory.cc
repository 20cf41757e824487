#include "util/machine_memory.h"

#include <unistd.h>

namespace ubfuse {

size_t machine_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : size_t(0);
  }();
  return bytes;
}

}  // namespace ubfuse
