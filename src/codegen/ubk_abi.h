// The C ABI between the runtime and a fused kernel (generated C++ or the interpreter): one call
// runs rows [row_begin, row_end) of the group's domain. Embedded into generated sources, so it
// depends on nothing but <stdint.h>; bump UBF_ABI_VERSION when the layout changes.
#pragma once

#include <stdint.h>

#define UBF_ABI_VERSION 1
#define UBF_MAX_ROW_DIMS 8

// Where row `r` of the domain starts in one tensor: mode 0 is `r * stride` (a full tensor:
// stride = cols; a tensor shared by all rows: stride = 0), mode 1 decomposes r over the
// domain's leading dims (numpy broadcasting of leading dims: a stride is 0 where the tensor's
// dim is 1).
struct UbfTensorArg {
  void* data;
  int32_t mode;
  int32_t ndims;
  int64_t stride;
  int64_t sizes[UBF_MAX_ROW_DIMS];    // domain leading dims, outermost first
  int64_t strides[UBF_MAX_ROW_DIMS];  // element stride of each in this tensor
};

struct UbfKernelArgs {
  int64_t rows;
  int64_t cols;
  int32_t use_ub;       // keep crossing values in the UB (1) or re-read the inputs (0)
  int32_t nt_stores;    // column outputs may use non-temporal stores (row starts 64-byte aligned)
  int64_t slot_floats;  // floats per UB slot (cols padded to 16)
  const struct UbfTensorArg* in;
  const struct UbfTensorArg* out;
};

typedef void (*UbfKernelFn)(const struct UbfKernelArgs* args, int64_t row_begin, int64_t row_end,
                            float* ub, int64_t ub_floats);

// Row offsets of one tensor for consecutive rows: `off` is row r's, and ubf_cursor_next moves to
// row r + 1 by counting through the leading dims. Generated loops walk their rows with these, so
// the row loop does no division per row and tensor.
struct UbfRowCursor {
  int64_t off;
  int64_t idx[UBF_MAX_ROW_DIMS];
};

static inline struct UbfRowCursor ubf_cursor_at(const struct UbfTensorArg* t, int64_t r) {
  struct UbfRowCursor c = {0, {0}};
  if (t->mode == 0) {
    c.off = r * t->stride;
    return c;
  }
  for (int32_t k = t->ndims - 1; k >= 0; --k) {
    const int64_t n = t->sizes[k];
    c.idx[k] = r % n;
    c.off += c.idx[k] * t->strides[k];
    r /= n;
  }
  return c;
}

static inline int64_t ubf_row_offset(const struct UbfTensorArg* t, int64_t r) {
  return ubf_cursor_at(t, r).off;
}

// Past the last row the indices wrap to row 0's; callers do not read there.
static inline void ubf_cursor_next(const struct UbfTensorArg* t, struct UbfRowCursor* c) {
  if (t->mode == 0) {
    c->off += t->stride;
    return;
  }
  for (int32_t k = t->ndims - 1; k >= 0; --k) {
    c->off += t->strides[k];
    if (++c->idx[k] < t->sizes[k]) return;
    c->off -= t->sizes[k] * t->strides[k];
    c->idx[k] = 0;
  }
}
