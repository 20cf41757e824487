// The in-place KV cache's buffer arithmetic (model.h, KvCache): a cache buffer holds, per index of
// the dims before its axis, max_length rows of the dims after it; the rows so far lead each block.
#pragma once

#include <optional>

#include "runtime/thread_pool.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// How a kernel operand of sizes `view` (present itself, or a view of it such as an Unsqueeze)
// addresses a buffer of sizes `buffer` whose first `rows` rows along `axis` are valid: the sizes
// whose dense strides address it (view's sizes with one dim at the buffer's row count) and that
// dim. None when the view mixes the rows with the dims around them.
struct PitchedView {
  Sizes storage;
  int axis = -1;
};
std::optional<PitchedView> pitched_view(const Sizes& buffer, int axis, int64_t rows,
                                        const Sizes& view);

// Both copy over `pool` when given, else on the calling thread.
// Writes `rows` (the buffer's sizes but `n` along axis) at row `at` of each block of `buffer`.
void append_rows(const Tensor& buffer, int axis, int64_t at, const Tensor& rows, ThreadPool* pool);
// The first `rows` rows of each block of `buffer`, into dense (the buffer's sizes but `rows`).
void copy_rows(const Tensor& buffer, int axis, int64_t rows, const Tensor& dense, ThreadPool* pool);

}  // namespace ubfuse
