// The integer product of MatMulInteger, QLinearMatMul and ConvInteger (int_gemm.cc): oneDNN's
// int8 matmul where the CPU has VNNI, else ubfuse's exact product on i16 pairs (int_gemm_pairs.h);
// constant weights made ready once for either.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/thread_pool.h"
#include "ubfuse/dtype.h"
#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse::cpu {

// Element i of an i8 or u8 buffer.
int32_t load8(const void* p, DType t, int64_t i);

// Whether products run on oneDNN (a CPU with VNNI, and UBFUSE_INT8_NO_ONEDNN unset or not 1).
bool int8_uses_onednn();

// What runs the products, for traces: "oneDNN int8", "int8 pairs" (int_gemm_pairs.h) or, on
// targets without the pairwise product, "int8 loop".
const char* int8_product_impl();

// A constant B (i8 or u8, [K, N] or [K]) made ready for oneDNN once: as s8, its column sums, and
// in oneDNN's layouts for a representative M (a_zero_point: also one in which oneDNN applies A's
// zero point itself). Null fields where oneDNN has no such layout.
struct PreparedB;
std::shared_ptr<const PreparedB> prepare_int_b(const Tensor& b, int64_t rep_m, bool a_zero_point);

// A node's constant B (input b_input: an i8/u8 Constant of rank 1 or 2) made ready once: where
// products run on oneDNN, for a representative M (input 0's rows when its dims are fixed, else
// 256, at most 4096); elsewhere widened to i16 for the exact product (in pair panels where the
// target has them). Empty for any other B.
struct ConstantB {
  std::shared_ptr<const PreparedB> prep;
  Sizes sizes;
  DType dtype = DType::i8;
  // prep, for a run whose B is that constant (same sizes and dtype); else null.
  const PreparedB* ready_for(const Tensor& b) const {
    return prep && b.sizes() == sizes && b.dtype() == dtype ? prep.get() : nullptr;
  }
};
ConstantB prepare_constant_b(const Node& n, size_t b_input, bool a_zero_point);

// C [m, n] (ldc n) = (A - za) (B - zb); A [m, k] row-major (lda k), B [k, n] (ldb n); za has m
// values, zb n, in i32. prep: B made ready beforehand (a constant), or null.
void int_gemm(const void* a, DType ta, const void* b, DType tb, const int32_t* za,
              const int32_t* zb, int32_t* c, int64_t m, int64_t k, int64_t n, ThreadPool& pool,
              const PreparedB* prep = nullptr);

}  // namespace ubfuse::cpu
