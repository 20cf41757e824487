#include "util/big_alloc.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace ubfuse {

void* alloc_tensor_bytes(size_t bytes) {
  if (bytes > SIZE_MAX - kHugePageBytes) return nullptr;  // the roundings below would wrap
  // On huge pages when the rounding to whole huge pages wastes at most 1/8 of the block.
  const size_t huge = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (bytes >= kHugePageBytes && huge - bytes <= bytes / 8) {
    if (void* p = std::aligned_alloc(kHugePageBytes, huge)) {
      // Advice only: where THP is off (or the call fails) the block stays on small pages.
      ::madvise(p, huge, MADV_HUGEPAGE);
      return p;
    }
  }
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}

}  // namespace ubfuse
