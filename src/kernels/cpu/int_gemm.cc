// The integer product under MatMulInteger, QLinearMatMul and ConvInteger (int_gemm.h):
//   C[m, n] = sum_k (A[m, k] - za[m]) * (B[k, n] - zb[n])   (i32, wrapping)
// with A and B u8 or i8 and the zero points per row of A / per column of B.
//
// * On CPUs with VNNI (AVX512-VNNI, AVX-VNNI, AMX) the product runs on oneDNN 2.6's int8 matmul
//   (u8 or s8 A times s8 B, s32 out), the zero points applied after as rank-1 corrections:
//     C = A.B - zb[n] * rowsum(A)[m] - za[m] * colsum(B)[n] + K * za[m] * zb[n]
//   A u8 B is taken as s8 B - 128 (its zero points shifted by -128 too). Without VNNI oneDNN's u8 x
//   s8 kernels sum pairs of products in saturating 16-bit lanes (vpmaddubsw), which is not exact
//   over the full 8-bit range, so there the plain loop below runs instead.
// * A constant B (weights) is converted to s8, summed per column and reordered into oneDNN's
//   preferred layout once, when the kernel is made (for a representative M; other Ms use the plain
//   s8 copy when oneDNN wants another layout for them).
// * Up to kSplitRows rows of A (short prompts, decode steps) run on one OpenMP thread: waking
//   oneDNN's team costs more than the product. Where the packed B is in 64-column blocks
//   (BA16a64b4a, with AMX or AVX512-VNNI) the pool's threads take runs of those blocks instead,
//   each a oneDNN call on one OpenMP thread; with more rows they take runs of A's rows.
// * With AMX, whose tiles oneDNN runs in blocks of 16 rows of A, 1-4 rows past whole tiles run
//   on the VNNI loop after oneDNN's call for the rest.
// * Elsewhere (and for what oneDNN refuses, or with UBFUSE_INT8_NO_ONEDNN=1, which the tests use to
//   check both paths) the exact product of int_gemm_pairs.h: B as i16 in panels of pairs of K for
//   VPMADDWD (AVX2, AVX-512), packed once for a constant B, B's zero points taken off after it;
//   on other targets a plain loop over rows of A against B as i16.
#include "kernels/cpu/int_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <unordered_map>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/int_gemm_pairs.h"
#include "kernels/cpu/int_gemm_vnni.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {

namespace {

using ddt = dnnl::memory::data_type;

bool cpu_has_vnni() {
  static const bool v = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx2_vnni;
  }();
  return v;
}

// AMX's int8 tiles, which oneDNN's brgemm runs in blocks of 16 rows of A.
bool cpu_has_amx() {
  static const bool v = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  return v;
}

}  // namespace

int32_t load8(const void* p, DType t, int64_t i) {
  return t == DType::i8 ? int32_t(static_cast<const int8_t*>(p)[i])
                        : int32_t(static_cast<const uint8_t*>(p)[i]);
}

namespace {

// The sum of the `len` 8-bit values of type t at p[at...] (exact in i32 for len < 2^23).
int32_t row_sum8(const void* p, DType t, int64_t at, int64_t len) {
  int32_t s = 0;
  if (t == DType::i8) {
    const int8_t* q = static_cast<const int8_t*>(p) + at;
    for (int64_t i = 0; i < len; i++) s += q[i];
  } else {
    const uint8_t* q = static_cast<const uint8_t*>(p) + at;
    for (int64_t i = 0; i < len; i++) s += q[i];
  }
  return s;
}

}  // namespace

// A oneDNN int8 matmul primitive and its memory descriptors. Outside the anonymous namespace:
// PreparedB, declared in int_gemm.h, caches them.
struct IntGemmPrim {
  dnnl::matmul prim;
  dnnl::memory::desc src, wei, dst;
  size_t scratch_bytes = 0;
  bool brgemm = false;  // oneDNN's JIT kernels (brg:...), not its reference loops
  bool src_zp = false;  // takes A's zero point (one for all rows) at run time
};

namespace {

// A oneDNN int8 matmul [m, k] (u8 or s8) x [k, n] (s8, plain or in the layout wmd) -> s32; null
// where oneDNN has none or (wmd) prefers another weights layout for this m.
std::shared_ptr<IntGemmPrim> create_gemm_prim(ddt src_t, int64_t m, int64_t k, int64_t n,
                                              const dnnl::memory::desc* wmd, bool src_zp = false) {
  try {
    dnnl::primitive_attr attr;
    if (src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    auto src = dnnl_plain_md({m, k}, src_t), dst = dnnl_plain_md({m, n}, ddt::s32);
    auto wei = wmd ? *wmd : dnnl_plain_md({k, n}, ddt::s8);
    const auto pd = dnnl_matmul_pd(src, wei, dst, attr);
    if (!pd || (wmd && pd.weights_desc() != *wmd)) return nullptr;
    auto p = std::make_shared<IntGemmPrim>();
    p->prim = dnnl::matmul(pd);
    p->src = src;
    p->wei = wei;
    p->dst = dst;
    p->scratch_bytes = pd.scratchpad_desc().get_size();
    p->brgemm = std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
    p->src_zp = src_zp;
    return p;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// Plain-weights primitives by (src dtype, M, K, N), built once each.
std::shared_ptr<IntGemmPrim> gemm_prim(ddt src_t, int64_t m, int64_t k, int64_t n) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<IntGemmPrim>> cache;
  const std::vector<int64_t> key{int64_t(src_t), m, k, n};
  std::lock_guard<std::mutex> l(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() > 256) cache.clear();  // bound memory for many distinct shapes
  return cache[key] = create_gemm_prim(src_t, m, k, n, nullptr);
}

}  // namespace

// A constant B made ready once per kernel (oneDNN's path): as s8 (u8 shifted by -128), its column
// sums, and, where oneDNN prefers a blocked layout for a representative M, reordered into it.
struct PreparedB {
  int64_t k = 0, n = 0;
  int32_t shift = 0;  // subtracted from B (and its zero points): 128 for u8
  std::vector<int8_t> s8;
  std::vector<int32_t> colsum;
  std::shared_ptr<dnnl::memory> packed;  // null: the plain s8 copy is used
  dnnl::memory::desc packed_md;
  // Packed as BA16a64b4a (oneDNN's layout with AMX and AVX512-VNNI), whose blocks of 64 columns
  // are `block_bytes` apart: a run of blocks is a narrower B of the same layout.
  bool column_blocks = false;
  int64_t block_bytes = 0;
  // Where A has a zero point: B packed for a u8 A whose zero point oneDNN applies itself (the
  // layout carries B's column sums), so no pass over C corrects for it; null where oneDNN has no
  // such layout or its f32 arithmetic would not be exact (prepare_b).
  std::shared_ptr<dnnl::memory> packed_zp;
  dnnl::memory::desc packed_zp_md;
  // Without oneDNN (no VNNI): B as i16, made once, its zero points taken off per call from A's
  // row sums: in pair panels (pack_pair_panels) where the target has them, else plain (widen_b).
  std::vector<int16_t> b16;
  bool b16_pairs = false;
  mutable std::mutex mu;  // primitives for the packed layouts by (src dtype, M, N, zero point)
  mutable std::map<std::tuple<int, int64_t, int64_t, bool>, std::shared_ptr<IntGemmPrim>> prims;
};

namespace {

// B (plain s8) reordered into the layout oneDNN picks for a [rep_m, K] u8 A, with A's zero point
// as a run-time attribute when src_zp; null where that layout is the plain one.
std::shared_ptr<dnnl::memory> pack_b(PreparedB& p, int64_t rep_m, bool src_zp,
                                     dnnl::memory::desc* md) {
  const dnnl::memory::desc any({p.k, p.n}, ddt::s8, dnnl::memory::format_tag::any);
  dnnl::primitive_attr attr;
  if (src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  const auto pd = dnnl_matmul_pd(dnnl_plain_md({rep_m, p.k}, ddt::u8), any,
                                 dnnl_plain_md({rep_m, p.n}, ddt::s32), attr);
  const auto plain = dnnl_plain_md({p.k, p.n}, ddt::s8);
  if (!pd || pd.weights_desc() == plain) return nullptr;
  *md = pd.weights_desc();
  auto packed = std::make_shared<dnnl::memory>(*md, dnnl_cpu_engine());
  dnnl::memory user(plain, dnnl_cpu_engine(), p.s8.data());
  dnnl::stream s(dnnl_cpu_engine());
  dnnl::reorder(user, *packed).execute(s, user, *packed);
  s.wait();
  return packed;
}

// count 8-bit values of dtype t at b, as i16 (the exact loop's B).
std::vector<int16_t> widen_b(const void* b, DType t, int64_t count) {
  std::vector<int16_t> w(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; i++) w[size_t(i)] = int16_t(load8(b, t, i));
  return w;
}

}  // namespace

ConstantB prepare_constant_b(const Node& n, size_t b_input, bool a_zero_point) {
  ConstantB c;
  const Value* bv = n.inputs.at(b_input);
  if (!bv->producer || bv->producer->op != OpKind::Constant) return c;
  const Tensor& bt = bv->producer->payload;
  if (!bt.defined() || !is_int8(bt.dtype()) || bt.rank() < 1 || bt.rank() > 2) return c;
  c.sizes = bt.sizes();
  c.dtype = bt.dtype();
  if (!int8_uses_onednn()) {
    auto p = std::make_shared<PreparedB>();
    p->k = bt.rank() == 1 ? bt.dim(0) : bt.dim(-2);
    p->n = bt.rank() == 1 ? 1 : bt.dim(-1);
    p->b16_pairs = pair_panels_available();
    p->b16 = p->b16_pairs ? pack_pair_panels(bt.data(), bt.dtype(), p->k, p->n)
                          : widen_b(bt.data(), bt.dtype(), bt.numel());
    c.prep = p;
    return c;
  }
  int64_t rep_m = 1;
  for (size_t d = 0; d + 1 < n.inputs[0]->shape.size(); d++) {
    const Dim& dim = n.inputs[0]->shape[d];
    rep_m = dim.is_static() ? rep_m * dim.value() : 256;
  }
  c.prep = prepare_int_b(bt, std::max<int64_t>(1, std::min<int64_t>(rep_m, 4096)), a_zero_point);
  return c;
}

std::shared_ptr<const PreparedB> prepare_int_b(const Tensor& b, int64_t rep_m, bool a_zero_point) {
  auto p = std::make_shared<PreparedB>();
  p->k = b.rank() == 1 ? b.dim(0) : b.dim(-2);
  p->n = b.rank() == 1 ? 1 : b.dim(-1);
  p->shift = b.dtype() == DType::u8 ? 128 : 0;
  p->s8.resize(size_t(b.numel()));
  p->colsum.assign(size_t(p->n), 0);
  for (int64_t i = 0; i < b.numel(); i++) {
    p->s8[size_t(i)] = int8_t(load8(b.data(), b.dtype(), i) - p->shift);
    p->colsum[size_t(i % p->n)] += p->s8[size_t(i)];
  }
  try {
    p->packed = pack_b(*p, rep_m, false, &p->packed_md);
    if (p->packed) {
      const dnnl::memory::desc blocks({p->k, p->n}, ddt::s8, dnnl::memory::format_tag::BA16a64b4a);
      p->column_blocks = p->packed_md == blocks;
      p->block_bytes = p->packed_md.data.format_desc.blocking.strides[1];
    }
  } catch (const dnnl::error&) {
    p->packed = nullptr;
  }
  // oneDNN applies a zero point in f32 after the s32 product (its post-ops), exact while every
  // term is below 2^24: |A B'| and |za colsum| are at most 255 times B's largest column sum of
  // |b'|, so only weights within that bound get the layout ([3072, 768] of the dynamic quantizer's
  // BERT reaches 104K: 26.6M).
  int64_t abs_colsum = 0;
  for (int64_t j = 0; j < p->n && a_zero_point; j++) {
    int64_t sum = 0;
    for (int64_t q = 0; q < p->k; q++) sum += std::abs(int64_t(p->s8[size_t(q * p->n + j)]));
    abs_colsum = std::max(abs_colsum, sum);
  }
  try {
    if (p->packed && a_zero_point && 255 * abs_colsum < (int64_t(1) << 24)) {
      p->packed_zp = pack_b(*p, rep_m, true, &p->packed_zp_md);
    }
  } catch (const dnnl::error&) {
    p->packed_zp = nullptr;
  }
  return p;
}

namespace {

// Rows up to which the product runs on one OpenMP thread per part: split by columns over the
// pool (packed B) or on one thread.
constexpr int64_t kSplitRows = 32;
constexpr int64_t kVnniLoopRows = 4;
constexpr int64_t kAmxTileRows = 16;

// Runs p on C = A W with its own stream and scratchpad, on one OpenMP thread when macs is small.
void execute_prim(const IntGemmPrim& p, const void* a, const void* w, int32_t* c, int64_t macs,
                  int threads, int32_t zp = 0) {
  dnnl::engine& eng = dnnl_cpu_engine();
  dnnl::stream s(eng);
  void* scratch = dnnl_scratchpad(p.scratch_bytes);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(p.src, eng, const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(p.wei, eng, const_cast<void*>(w))},
      {DNNL_ARG_DST, dnnl::memory(p.dst, eng, c)},
  };
  if (p.scratch_bytes) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(dnnl::memory::desc({int64_t(p.scratch_bytes)}, ddt::u8,
                                                 dnnl::memory::format_tag::a),
                              eng, scratch));
  }
  if (p.src_zp) {
    args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
                 dnnl::memory({{1}, ddt::s32, dnnl::memory::format_tag::x}, eng, &zp));
  }
  DnnlThreads t(macs, threads);
  p.prim.execute(s, args);
  s.wait();
}

// The primitive for m rows times n columns of the packed B (n < prep.n: a run of its 64-column
// blocks), cached per (src dtype, m, n); null where oneDNN wants another layout.
std::shared_ptr<IntGemmPrim> packed_prim(const PreparedB& prep, ddt src_t, int64_t m, int64_t n,
                                         bool src_zp = false) {
  std::lock_guard<std::mutex> l(prep.mu);
  auto key = std::make_tuple(int(src_t), m, n, src_zp);
  auto it = prep.prims.find(key);
  if (it == prep.prims.end()) {
    if (prep.prims.size() > 64) prep.prims.clear();
    const dnnl::memory::desc wmd =
        src_zp ? prep.packed_zp_md
        : n == prep.n
            ? prep.packed_md
            : dnnl::memory::desc({prep.k, n}, ddt::s8, dnnl::memory::format_tag::BA16a64b4a);
    it = prep.prims.emplace(key, create_gemm_prim(src_t, m, prep.k, n, &wmd, src_zp)).first;
  }
  return it->second;
}

// C = A B for few rows: each thread of the pool runs oneDNN on one OpenMP thread over a run of
// B's 64-column blocks (a narrower B of the same layout) into its own rows, copied into C's
// columns (oneDNN 2.6's JIT kernels take no row stride for C), so no OpenMP team is woken per
// call. False (nothing done) where oneDNN would run a slice on its reference loops.
bool int_gemm_columns(const void* a, ddt src_t, const PreparedB& prep, int32_t* c, int64_t m,
                      ThreadPool& pool, const int32_t* za_only = nullptr) {
  const int64_t n = prep.n, blocks = (n + 63) / 64;
  const int64_t parts = std::min<int64_t>(pool.size(), blocks);
  auto cols_of = [&](int64_t part, int64_t* n0) {
    const int64_t b0 = blocks * part / parts, b1 = blocks * (part + 1) / parts;
    *n0 = b0 * 64;
    return std::min(n, b1 * 64) - b0 * 64;
  };
  std::vector<std::shared_ptr<IntGemmPrim>> prims(static_cast<size_t>(parts));
  for (int64_t part = 0; part < parts; part++) {
    int64_t n0 = 0;
    prims[size_t(part)] = packed_prim(prep, src_t, m, cols_of(part, &n0));
    if (!prims[size_t(part)] || !prims[size_t(part)]->brgemm) return false;
  }
  const auto* base = static_cast<const int8_t*>(prep.packed->get_data_handle());
  pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi, int) {
    // Kept per thread rather than allocated per call.
    thread_local std::vector<int32_t> own;
    for (int64_t part = lo; part < hi; part++) {
      int64_t n0 = 0;
      const int64_t cols = cols_of(part, &n0);
      own.resize(size_t(m * cols));
      execute_prim(*prims[size_t(part)], a, base + n0 / 64 * prep.block_bytes, own.data(), 0, 1);
      for (int64_t i = 0; i < m; i++) {
        if (!za_only || za_only[i] == 0) {
          std::memcpy(c + i * n + n0, own.data() + i * cols, size_t(cols) * sizeof(int32_t));
          continue;
        }
        // A's zero point, while the part is in cache: c -= za_i colsum[j], in wrapping u32 lanes
        // as correct_zero_points computes it.
        const uint32_t zai = uint32_t(za_only[i]);
        const uint32_t* src = reinterpret_cast<const uint32_t*>(own.data() + i * cols);
        const uint32_t* cs = reinterpret_cast<const uint32_t*>(prep.colsum.data() + n0);
        uint32_t* dst = reinterpret_cast<uint32_t*>(c + i * n + n0);
        for (int64_t j = 0; j < cols; j++) dst[j] = src[j] - zai * cs[j];
      }
    }
  });
  return true;
}

// C = A B for more rows: each thread of the pool runs oneDNN on one OpenMP thread over a run of
// A's rows with all of the packed B, rather than oneDNN's OpenMP team, whose own split is slower
// (bert_stack_int8's products at 512 tokens: 13.3 -> 10.4 ms, Intel Xeon with AMX). False
// (nothing done) where oneDNN would run a part on its reference loops.
bool int_gemm_rows(const void* a, ddt src_t, const PreparedB& prep, int32_t* c, int64_t m,
                   ThreadPool& pool, const int32_t* zp = nullptr) {
  const int64_t parts = std::min<int64_t>(pool.size(), m);  // no empty parts
  auto rows_of = [&](int64_t part, int64_t* r0) {
    *r0 = m * part / parts;
    return m * (part + 1) / parts - *r0;
  };
  std::vector<std::shared_ptr<IntGemmPrim>> prims(static_cast<size_t>(parts));
  for (int64_t part = 0; part < parts; part++) {
    int64_t r0 = 0;
    prims[size_t(part)] = packed_prim(prep, src_t, rows_of(part, &r0), prep.n, zp != nullptr);
    if (!prims[size_t(part)] || !prims[size_t(part)]->brgemm) return false;
  }
  const auto* pa = static_cast<const uint8_t*>(a);  // 1-byte elements, u8 or s8
  pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi, int) {
    for (int64_t part = lo; part < hi; part++) {
      int64_t r0 = 0;
      rows_of(part, &r0);
      const dnnl::memory& w = zp ? *prep.packed_zp : *prep.packed;
      execute_prim(*prims[size_t(part)], pa + r0 * prep.k, w.get_data_handle(), c + r0 * prep.n, 0,
                   1, zp ? *zp : 0);
    }
  });
  return true;
}

// Applies the zero points to C = A B computed on s8 B (B - shift):
//   C -= zb'[n] rowsum(A)[m] + za[m] colsum(B')[n] - K za[m] zb'[n], zb' = zb - shift.
// bs: B as s8 when there is no prep (for its column sums).
void correct_zero_points(const void* a, DType ta, const int8_t* bs, const int32_t* za,
                         const int32_t* zb, int32_t* c, int64_t m, int64_t k, int64_t n,
                         ThreadPool& pool, const PreparedB* prep, int32_t shift_b = 0) {
  const int32_t shift = prep ? prep->shift : shift_b;
  std::vector<int32_t> zb2(zb, zb + n);
  for (int32_t& z : zb2) z -= shift;
  const bool any_zb = std::any_of(zb2.begin(), zb2.end(), [](int32_t z) { return z != 0; });
  const bool any_za = std::any_of(za, za + m, [](int32_t z) { return z != 0; });
  if (!any_za && !any_zb) return;
  std::vector<int32_t> colsum_own;
  const int32_t* colsum = prep ? prep->colsum.data() : nullptr;
  if (any_za && !prep) {
    colsum_own.assign(size_t(n), 0);
    for (int64_t q = 0; q < k; q++)
      for (int64_t j = 0; j < n; j++) colsum_own[size_t(j)] += bs[q * n + j];
    colsum = colsum_own.data();
  }
  // c[i, j] -= zb'[j] (rowsum_i - K za_i) + za_i colsum[j], in wrapping u32 lanes (vectorized).
  std::vector<uint32_t> zbu(zb2.begin(), zb2.end()), csu(size_t(n), 0);
  if (any_za) csu.assign(colsum, colsum + n);
  auto rows = [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; i++) {
      const uint32_t zai = uint32_t(za[i]);
      const uint32_t ri = any_zb ? uint32_t(row_sum8(a, ta, i * k, k)) - uint32_t(k) * zai : 0u;
      uint32_t* ci = reinterpret_cast<uint32_t*>(c + i * n);
      const uint32_t* zbp = zbu.data();
      const uint32_t* csp = csu.data();
      if (any_za) {
        for (int64_t j = 0; j < n; j++) ci[j] -= zbp[j] * ri + zai * csp[j];
      } else {
        for (int64_t j = 0; j < n; j++) ci[j] -= zbp[j] * ri;
      }
    }
  };
  // A few rows (a short prompt) on this thread: waking a worker costs more than the pass.
  if (m * (n + k) < (int64_t(1) << 20)) {
    rows(0, m, 0);
  } else {
    pool.parallel_for(m, grain_for(n + k), rows);
  }
}

}  // namespace

bool int8_uses_onednn() {
  const char* off = std::getenv("UBFUSE_INT8_NO_ONEDNN");
  return cpu_has_vnni() && !(off && *off == '1');
}

const char* int8_product_impl() {
  return int8_uses_onednn() ? "oneDNN int8" : pair_panels_available() ? "int8 pairs" : "int8 loop";
}

// C [m, n] (ldc n) = (A - za) (B - zb); A [m, k] row-major (lda k), B [k, n] (ldb n); za has m
// values, zb n. prep: B made ready beforehand (a constant), or null.
void int_gemm(const void* a, DType ta, const void* b, DType tb, const int32_t* za,
              const int32_t* zb, int32_t* c, int64_t m, int64_t k, int64_t n, ThreadPool& pool,
              const PreparedB* prep) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(c, 0, size_t(m * n) * 4);
    return;
  }
  if (int8_uses_onednn()) {
    // A B made ready for the loop (UBFUSE_INT8_NO_ONEDNN was set when it was prepared) holds
    // nothing oneDNN reads: B as given instead.
    if (prep && !prep->b16.empty()) prep = nullptr;
    const ddt src_t = ta == DType::i8 ? ddt::s8 : ddt::u8;
    // Up to 4 rows of u8 A (decode steps): AVX512-VNNI dot products straight over the packed
    // blocks. From 8 rows on, oneDNN's AMX tiles were faster where the CPU has them (16 x 768 x
    // 3072 in 0.15 against 0.19 ms per chain, Xeon); at 1 row this loop took 0.03-0.08 against
    // 0.10 ms.
    if (prep && prep->column_blocks && m <= kVnniLoopRows && ta == DType::u8 &&
        vnni_loop_available()) {
      vnni_gemm_packed(static_cast<const uint8_t*>(a),
                       static_cast<const int8_t*>(prep->packed->get_data_handle()),
                       prep->block_bytes, c, m, k, n, pool);
      correct_zero_points(a, ta, nullptr, za, zb, c, m, k, n, pool, prep);
      return;
    }
    // A tail of up to kVnniLoopRows rows past whole AMX tiles (ViT's 513 tokens: 512 + 1) runs on
    // that loop: in oneDNN's parts it cost its part about one more pass (ViT's [513,768] x
    // [768,3072] split by rows: 257 rows took 1.05 ms, 256 rows 0.67, Intel Xeon with AMX).
    const int64_t tail = m % kAmxTileRows;
    if (prep && prep->column_blocks && m > kSplitRows && tail <= kVnniLoopRows && tail > 0 &&
        ta == DType::u8 && cpu_has_amx() && vnni_loop_available()) {
      const int64_t mh = m - tail;  // whole tiles: no tail in the call below
      int_gemm(a, ta, b, tb, za, zb, c, mh, k, n, pool, prep);
      const auto* at = static_cast<const uint8_t*>(a) + mh * k;
      vnni_gemm_packed(at, static_cast<const int8_t*>(prep->packed->get_data_handle()),
                       prep->block_bytes, c + mh * n, tail, k, n, pool);
      correct_zero_points(at, ta, nullptr, za + mh, zb, c + mh * n, tail, k, n, pool, prep);
      return;
    }
    if (prep && prep->column_blocks && m <= kSplitRows && prep->n >= 128 && pool.size() > 1) {
      // B's zero points all at the shift (s8 weights with 0, u8 with 128): only A's is left,
      // applied as each part is copied out.
      const bool za_only = std::all_of(zb, zb + n, [&](int32_t z) { return z == prep->shift; });
      if (int_gemm_columns(a, src_t, *prep, c, m, pool, za_only ? za : nullptr)) {
        if (!za_only) correct_zero_points(a, ta, nullptr, za, zb, c, m, k, n, pool, prep);
        return;
      }
    }
    // One zero point for all of A's rows and none left on B (s8 weights with zero point 0, u8
    // with 128): oneDNN applies it in the product, from the column sums its layout carries.
    if (prep && prep->packed_zp && src_t == ddt::u8 && m > kSplitRows &&
        std::all_of(za, za + m, [&](int32_t z) { return z == za[0]; }) &&
        std::all_of(zb, zb + n, [&](int32_t z) { return z == prep->shift; }) &&
        int_gemm_rows(a, src_t, *prep, c, m, pool, za)) {
      return;
    }
    if (prep && prep->packed && m > kSplitRows && pool.size() > 1 &&
        int_gemm_rows(a, src_t, *prep, c, m, pool)) {
      correct_zero_points(a, ta, nullptr, za, zb, c, m, k, n, pool, prep);
      return;
    }
    std::shared_ptr<IntGemmPrim> p;
    if (prep && prep->packed) p = packed_prim(*prep, src_t, m, prep->n);
    const bool packed = p != nullptr;
    if (!p) p = gemm_prim(src_t, m, k, n);
    if (p) {
      // B as s8 (u8 shifted by -128); correct_zero_points shifts its zero points alike.
      std::vector<int8_t> b8;
      const int8_t* bs = prep ? prep->s8.data() : static_cast<const int8_t*>(b);
      if (!prep && tb == DType::u8) {
        b8.resize(size_t(k * n));
        const uint8_t* bu = static_cast<const uint8_t*>(b);
        for (size_t i = 0; i < b8.size(); i++) b8[i] = int8_t(int32_t(bu[i]) - 128);
        bs = b8.data();
      }
      const void* wdata = packed ? prep->packed->get_data_handle() : bs;
      // A few rows on one OpenMP thread: waking its team costs more than the second core gains.
      execute_prim(*p, a, wdata, c, m <= kSplitRows ? 0 : m * k * n, pool.size());
      correct_zero_points(a, ta, bs, za, zb, c, m, k, n, pool, prep, tb == DType::u8 ? 128 : 0);
      return;
    }
  }
  // The exact product, B's zero points taken off afterwards: (A - za)(B - zb) = (A - za) B - zb
  // sum(A - za), the same bits in uint32's wrapping arithmetic. On pair panels (a constant B packed
  // once, prep->b16; any other per call) where the target has them.
  const bool ready = prep && !prep->b16.empty() && prep->k == k && prep->n == n;
  if (pair_panels_available()) {
    std::vector<int16_t> own;
    if (!ready || !prep->b16_pairs) own = pack_pair_panels(b, tb, k, n);
    pair_panel_gemm(a, ta, za, zb, own.empty() ? prep->b16.data() : own.data(), c, m, k, n, pool);
    return;
  }
  // Else a loop over each row of A - za against B as i16 (a constant B widened once).
  const bool widened = ready && !prep->b16_pairs;
  std::vector<int16_t> bz;
  if (!widened) bz = widen_b(b, tb, k * n);
  const int16_t* bw = widened ? prep->b16.data() : bz.data();
  pool.parallel_for(m, grain_for(n * k), [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; i++) {
      uint32_t* ci = reinterpret_cast<uint32_t*>(c + i * n);
      std::fill(ci, ci + n, 0u);
      uint32_t asum = 0;
      for (int64_t q = 0; q < k; q++) {
        const int32_t av = load8(a, ta, i * k + q) - za[i];
        asum += uint32_t(av);
        const int16_t* bq = bw + q * n;
        for (int64_t j = 0; j < n; j++) ci[j] += uint32_t(av * int32_t(bq[j]));
      }
      for (int64_t j = 0; j < n; j++) ci[j] -= asum * uint32_t(zb[j]);
    }
  });
}

}  // namespace ubfuse::cpu
