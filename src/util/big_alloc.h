// Tensor storage. Large blocks go on transparent huge pages where the kernel allows them
// (madvise mode): on the VMs here a first touch costs a page fault per 4 KiB, and loading a
// 180 MB model spent most of its time in those faults.
#pragma once

#include <cstddef>

namespace ubfuse {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// `bytes` (> 0) of memory aligned to 64 bytes (to a huge page when it is placed on huge pages),
// or nullptr when there is none. Free it with std::free.
void* alloc_tensor_bytes(size_t bytes);

}  // namespace ubfuse
