// MatMulNBits (ops.def): a [M, K] f32 times a weight kept as onnxruntime's 4-bit (or 8-bit)
// quantizer packs it, so a model takes an eighth (a quarter) of its f32 weight memory.
// * Up to kDirectRows rows (a decode step, a short prompt): each thread takes a range of columns,
//   unpacks a vector of a column's codes at a time, dequantizes it (code * scale - zero * scale,
//   one FMA; (code - zero) * scale where some zero * scale comes near float's max) and adds its
//   products with up to 4 rows of a, read in the codes' order (a 4-bit byte holds codes 2j and
//   2j + 1: the rows are split into their even and odd elements once per call). The packed
//   weight streams from memory once per 4 rows: a decode step reads bits / 32 of the bytes an
//   f32 weight takes.
// * More rows: the codes are laid out once more, k-major by 64-column panel (a row of a panel's
//   64 codes in 32 bytes, its scales and zero points per block beside it), the first time a call
//   has that many. Each thread then dequantizes a panel into a [K, 64] buffer that stays in L2
//   (four operations per vector of 32 codes) and multiplies it with all the rows through the panel
//   loop the f32 MatMul runs on its packed weights (matmul_small.h), writing its 64 columns of y:
//   the dequantization is one pass per panel however many rows there are.
// clang-format off
#include "kernels/cpu/hwy_targets.h"  // before any Highway header
// clang-format on

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_nbits.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/loops-inl.h"

#ifndef UBFUSE_KERNELS_CPU_MATMUL_NBITS_DETAIL_
#define UBFUSE_KERNELS_CPU_MATMUL_NBITS_DETAIL_
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace ubfuse::cpu::nbits {

// One MatMulNBits call's operands, in onnxruntime's layout.
struct Problem {
  int64_t K = 0, N = 0, bits = 4, bs = 0, blocks = 0, blob = 0, zrow = 0;
  const uint8_t* b = nullptr;      // [N, blocks, blob]
  const float* scales = nullptr;   // [N, blocks]
  const uint8_t* zeros = nullptr;  // [N, zrow] packed, or null: 2^(bits-1)
  // Each block's weights are code * scale + z, z = -zero * scale, with one FMA (fma) where no
  // zero * scale comes near float's max; else (code - z) * scale, z = zero, a subtract and a
  // multiply (8 bits and scales near 1e37, where zero * scale overflows and the weight need not).
  bool fma = true;
  const float* z = nullptr;  // [N, blocks]
  // The k-major layout (see the file's comment): per 64-column panel and k, 64 * bits / 8 bytes
  // (4 bits: byte i holds column i low, column 32 + i high); scales and zero points per block and
  // column of the padded width.
  const uint8_t* kmajor = nullptr;
  const float* scales_t = nullptr;
  const float* z_t = nullptr;
  // Column n's zero point of block blk.
  int zero(int64_t n, int64_t blk) const {
    if (!zeros) return 1 << (bits - 1);
    const uint8_t* z = zeros + n * zrow;
    return bits == 8 ? int(z[blk]) : int(z[blk / 2] >> (4 * (blk % 2))) & 0xF;
  }
};

}  // namespace ubfuse::cpu::nbits
#endif

HWY_BEFORE_NAMESPACE();
namespace ubfuse {
namespace HWY_NAMESPACE {

namespace nb = cpu::nbits;

// y[r * N + n] for the R rows and the C columns from n. rows[r] holds row r in the codes' order,
// zero-padded to blocks * bs: for 4 bits the block's even elements then its odd ones, bs / 2
// each (byte j's low code is element 2j, its high code 2j + 1); for 8 bits the row itself. D's
// lanes divide a block's bytes. Each (column, row) keeps two sums (a 4-bit byte's low and high
// codes; an 8-bit block's even and odd vectors): 2 C R independent FMA chains, where one per row
// waited on the FMA's latency (a decode step at a third of the rate).
// A vector of codes' weights: code * scale + z with z = -zero * scale (kFma), else
// (code - zero) * scale with z = zero.
template <bool kFma, class V>
HWY_INLINE V Dequantize(V code, V scale, V z) {
  if constexpr (kFma) {
    return hn::MulAdd(code, scale, z);
  } else {
    return hn::Mul(hn::Sub(code, z), scale);
  }
}

template <size_t R, size_t C, bool kFma, class D>
HWY_INLINE void ColumnGroup(D d, const nb::Problem& p, const float* const* rows, float* y,
                            int64_t n) {
  using V = hn::VFromD<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> d8;
  const int64_t L = int64_t(hn::Lanes(d)), bytes = p.blob;
  V acc[C][R][2];
  for (size_t c = 0; c < C; c++) {
    for (size_t r = 0; r < R; r++) acc[c][r][0] = acc[c][r][1] = hn::Zero(d);
  }
  const auto mask = hn::Set(du, 15);
  // One block; kPartial: the last one, whose codes past K count for nothing (their rows'
  // elements are 0, but their weights may be infinite, a huge scale, and 0 times that is NaN).
  auto block = [&](int64_t blk, auto partial) HWY_ATTR {
    constexpr bool kPartial = decltype(partial)::value;
    V sv[C], zv[C];
    const uint8_t* q[C];
    for (size_t c = 0; c < C; c++) {
      const int64_t col = n + int64_t(c);
      sv[c] = hn::Set(d, p.scales[col * p.blocks + blk]);
      zv[c] = hn::Set(d, p.z[col * p.blocks + blk]);
      q[c] = p.b + (col * p.blocks + blk) * bytes;
    }
    const int64_t base = blk * p.bs, rem = p.K - base;
    auto valid = [&](int64_t count, int64_t j) {
      return hn::FirstN(d, size_t(std::clamp<int64_t>(count - j, 0, L)));
    };
    if (p.bits == 4) {
      const int64_t half = p.bs / 2;
      for (int64_t j = 0; j < bytes; j += L) {
        V a_lo[R], a_hi[R];
        for (size_t r = 0; r < R; r++) {
          a_lo[r] = hn::LoadU(d, rows[r] + base + j);
          a_hi[r] = hn::LoadU(d, rows[r] + base + half + j);
        }
        for (size_t c = 0; c < C; c++) {
          const auto u = hn::PromoteTo(du, hn::LoadU(d8, q[c] + j));
          V lo =
              Dequantize<kFma>(hn::ConvertTo(d, hn::BitCast(di, hn::And(u, mask))), sv[c], zv[c]);
          V hi = Dequantize<kFma>(hn::ConvertTo(d, hn::BitCast(di, hn::ShiftRight<4>(u))), sv[c],
                                  zv[c]);
          if constexpr (kPartial) {  // elements 2j (low) and 2j + 1 (high) below rem
            lo = hn::IfThenElseZero(valid((rem + 1) / 2, j), lo);
            hi = hn::IfThenElseZero(valid(rem / 2, j), hi);
          }
          for (size_t r = 0; r < R; r++) {
            acc[c][r][0] = hn::MulAdd(lo, a_lo[r], acc[c][r][0]);
            acc[c][r][1] = hn::MulAdd(hi, a_hi[r], acc[c][r][1]);
          }
        }
      }
    } else {
      for (int64_t j = 0; j < bytes; j += L) {
        const size_t h = size_t(j / L) % 2;
        for (size_t c = 0; c < C; c++) {
          const auto u = hn::PromoteTo(du, hn::LoadU(d8, q[c] + j));
          V w = Dequantize<kFma>(hn::ConvertTo(d, hn::BitCast(di, u)), sv[c], zv[c]);
          if constexpr (kPartial) w = hn::IfThenElseZero(valid(rem, j), w);
          for (size_t r = 0; r < R; r++) {
            acc[c][r][h] = hn::MulAdd(w, hn::LoadU(d, rows[r] + base + j), acc[c][r][h]);
          }
        }
      }
    }
  };
  const int64_t whole = p.K / p.bs;
  for (int64_t blk = 0; blk < whole; blk++) block(blk, std::false_type{});
  if (whole < p.blocks) block(whole, std::true_type{});
  for (size_t c = 0; c < C; c++) {
    for (size_t r = 0; r < R; r++) {
      y[int64_t(r) * p.N + n + int64_t(c)] = ReduceSumF(d, hn::Add(acc[c][r][0], acc[c][r][1]));
    }
  }
}

// Columns [n0, n1) for R rows: groups of C (16 / 2R sums: 8 for one row, 2 columns of 4 rows),
// then the rest one at a time.
template <size_t R, class D>
HWY_INLINE void Columns(D d, const nb::Problem& p, const float* const* rows, float* y, int64_t n0,
                        int64_t n1) {
  constexpr size_t C = R == 1 ? 4 : R == 2 ? 4 : 2;
  int64_t n = n0;
  if (p.fma) {
    for (; n + int64_t(C) <= n1; n += int64_t(C)) ColumnGroup<R, C, true>(d, p, rows, y, n);
    for (; n < n1; n++) ColumnGroup<R, 1, true>(d, p, rows, y, n);
  } else {
    for (; n + int64_t(C) <= n1; n += int64_t(C)) ColumnGroup<R, C, false>(d, p, rows, y, n);
    for (; n < n1; n++) ColumnGroup<R, 1, false>(d, p, rows, y, n);
  }
}

template <class D>
HWY_INLINE void ColumnsOfRows(D d, const nb::Problem& p, const float* const* rows, size_t nrows,
                              float* y, int64_t n0, int64_t n1) {
  switch (nrows) {
    case 1:
      return Columns<1>(d, p, rows, y, n0, n1);
    case 2:
      return Columns<2>(d, p, rows, y, n0, n1);
    case 3:
      return Columns<3>(d, p, rows, y, n0, n1);
    default:
      return Columns<4>(d, p, rows, y, n0, n1);
  }
}

// Up to 4 rows (rows[r] as Columns wants them) into y's rows, columns [n0, n1).
void DirectColumns(const nb::Problem& p, const float* const* rows, size_t nrows, float* y,
                   int64_t n0, int64_t n1) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 8> d8;  // a 4-bit block of 16 codes is 8 bytes
  if (p.blob % int64_t(hn::Lanes(d)) == 0) {
    ColumnsOfRows(d, p, rows, nrows, y, n0, n1);
  } else {
    ColumnsOfRows(d8, p, rows, nrows, y, n0, n1);
  }
}

// tile[k * 64 + c] = w[k, 64 panel + c] for every k: one panel of the k-major codes dequantized.
template <bool kFma>
HWY_INLINE void PanelOf(const nb::Problem& p, int64_t panel, float* HWY_RESTRICT tile) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const int64_t L = int64_t(hn::Lanes(d)), row = 64 * p.bits / 8, width = ((p.N + 63) / 64) * 64;
  const uint8_t* codes = p.kmajor + panel * p.K * row;
  for (int64_t k = 0; k < p.K; k++) {
    const int64_t blk = k / p.bs;
    const float* s = p.scales_t + blk * width + panel * 64;
    const float* z = p.z_t + blk * width + panel * 64;
    const uint8_t* q = codes + k * row;
    float* out = tile + k * 64;
    if (p.bits == 4) {
      for (int64_t o = 0; o < 32; o += L) {
        const auto u = hn::PromoteTo(du, hn::LoadU(d8, q + o));
        const auto lo = hn::ConvertTo(d, hn::BitCast(di, hn::And(u, hn::Set(du, 15))));
        const auto hi = hn::ConvertTo(d, hn::BitCast(di, hn::ShiftRight<4>(u)));
        hn::StoreU(Dequantize<kFma>(lo, hn::LoadU(d, s + o), hn::LoadU(d, z + o)), d, out + o);
        hn::StoreU(Dequantize<kFma>(hi, hn::LoadU(d, s + 32 + o), hn::LoadU(d, z + 32 + o)), d,
                   out + 32 + o);
      }
    } else {
      for (int64_t o = 0; o < 64; o += L) {
        const auto code =
            hn::ConvertTo(d, hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, q + o))));
        hn::StoreU(Dequantize<kFma>(code, hn::LoadU(d, s + o), hn::LoadU(d, z + o)), d, out + o);
      }
    }
  }
}

void DequantizePanel(const nb::Problem& p, int64_t panel, float* tile) {
  if (p.fma) {
    PanelOf<true>(p, panel, tile);
  } else {
    PanelOf<false>(p, panel, tile);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/matmul_small.h"

namespace ubfuse {
HWY_EXPORT(DirectColumns);
HWY_EXPORT(DequantizePanel);

namespace cpu {
namespace {

// Rows a call multiplies through the packed weight itself; more go through dequantized panels.
constexpr int64_t kDirectRows = 8;

class MatMulNBitsKernel : public KernelBase {
 public:
  explicit MatMulNBitsKernel(const Node& n) : KernelBase(n) {
    p_.K = n.attr_int("K", 0);
    p_.N = n.attr_int("N", 0);
    p_.bits = n.attr_int("bits", 4);
    p_.bs = n.attr_int("block_size", 0);
    p_.blocks = p_.bs > 0 ? (p_.K + p_.bs - 1) / p_.bs : 0;
    p_.blob = p_.bs * p_.bits / 8;
    p_.zrow = (p_.blocks * p_.bits + 7) / 8;
    // Constant scales and zero points (as importers write them): their products made once.
    auto payload = [&](size_t i) -> const Tensor* {
      if (i >= n.inputs.size()) return nullptr;
      const Node* c = n.inputs[i]->producer;
      return c && c->op == OpKind::Constant && c->payload.defined() ? &c->payload : nullptr;
    };
    const Tensor* scales = payload(2);
    const Tensor* zeros = payload(3);
    if (scales && scales->dtype() == DType::f32 && scales->numel() == p_.N * p_.blocks &&
        (n.inputs.size() < 4 ||
         (zeros && zeros->dtype() == DType::u8 && zeros->numel() == p_.N * p_.zrow))) {
      nbits::Problem p = p_;
      p.scales = scales->data_as<float>();
      p.zeros = zeros ? zeros->data_as<uint8_t>() : nullptr;
      p_.fma = fma_safe(p);
      z_ = zero_terms(p, p_.fma);
      p_.z = z_.data();  // z_ is not touched again: the kernel is neither copied nor moved
      constant_ = payload(1) != nullptr;
    }
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 3, 4, out);
    const Tensor& a = in[0];
    Tensor& y = out[0];
    nbits::Problem p = p_;
    if (a.dtype() != DType::f32 || a.rank() < 1 || a.dim(-1) != p.K || in[1].dtype() != DType::u8 ||
        in[1].numel() != p.N * p.blocks * p.blob || in[2].dtype() != DType::f32 ||
        in[2].numel() != p.N * p.blocks ||
        (in.size() > 3 && (in[3].dtype() != DType::u8 || in[3].numel() != p.N * p.zrow)) ||
        y.dtype() != DType::f32 || y.numel() != a.numel() / std::max<int64_t>(p.K, 1) * p.N) {
      fail("needs a f32 [..., " + std::to_string(p.K) + "], b u8 [" + std::to_string(p.N) + " x " +
           std::to_string(p.blocks) + " x " + std::to_string(p.blob) +
           "], scales f32, zero points u8, got " + tensors_str(in) + " -> " + tensors_str({y}));
    }
    p.b = in[1].data_as<uint8_t>();
    p.scales = in[2].data_as<float>();
    p.zeros = in.size() > 3 ? in[3].data_as<uint8_t>() : nullptr;
    const int64_t M = a.numel() / p.K;
    if (M == 0) return;
    std::vector<float> z;  // scales or zero points given at run time: their terms for this call
    if (!p.z) {
      p.fma = fma_safe(p);
      z = zero_terms(p, p.fma);
      p.z = z.data();
    }
    if (M <= kDirectRows) {
      direct(p, a.data_as<float>(), M, y.data_as<float>(), pool);
    } else {
      dequantized(p, a.data_as<float>(), M, y.data_as<float>(), pool);
    }
  }

 private:
  // a's rows in the codes' order, zero-padded to whole blocks: for 4 bits each block's even
  // elements, then its odd ones (a byte's low and high codes); for 8 bits the row itself.
  static std::vector<float> code_order(const nbits::Problem& p, const float* a, int64_t M) {
    const int64_t padded = p.blocks * p.bs;
    std::vector<float> rows(size_t(M * padded), 0.0f);
    for (int64_t m = 0; m < M; m++) {
      const float* src = a + m * p.K;
      float* dst = rows.data() + m * padded;
      for (int64_t k = 0; k < p.K; k++) {
        const int64_t blk = k / p.bs, i = k % p.bs;
        dst[p.bits == 8 ? k : blk * p.bs + (i % 2) * (p.bs / 2) + i / 2] = src[k];
      }
    }
    return rows;
  }

  void direct(const nbits::Problem& p, const float* a, int64_t M, float* y,
              ThreadPool& pool) const {
    const int64_t padded = p.blocks * p.bs;
    const std::vector<float> rows = code_order(p, a, M);
    // Columns per task: about 256 KiB of packed weight, so a few tasks per thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t(256) << 10) / (p.blocks * p.blob));
    pool.parallel_for(p.N, grain, [&](int64_t n0, int64_t n1, int) {
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const float* rp[4];
        const size_t nr = size_t(std::min<int64_t>(4, M - m0));
        for (size_t r = 0; r < nr; r++) rp[r] = rows.data() + (m0 + int64_t(r)) * padded;
        HWY_DYNAMIC_DISPATCH(DirectColumns)(p, rp, nr, y + m0 * p.N, n0, n1);
      }
    });
  }

  void dequantized(nbits::Problem p, const float* a, int64_t M, float* y, ThreadPool& pool) const {
    KMajor local;  // weights given at run time: laid out for this call only
    const KMajor& km = constant_ ? kmajor(p) : (local = make_kmajor(p));
    p.kmajor = km.codes.data();
    p.scales_t = km.scales.data();
    p.z_t = km.z.data();
    const int64_t panels = (p.N + 63) / 64;
    pool.parallel_for(panels, 1, [&](int64_t lo, int64_t hi, int) {
      thread_local std::vector<float> tile;
      if (tile.size() < size_t(p.K * 64)) tile.resize(size_t(p.K * 64));
      for (int64_t t = lo; t < hi; t++) {
        HWY_DYNAMIC_DISPATCH(DequantizePanel)(p, t, tile.data());
        panel_matmul_f32_one(a, tile.data(), y, M, p.K, p.N, t);
      }
    });
  }

  // The codes k-major by 64-column panel, and the scales and zero points (floats) transposed
  // ([blocks, panels * 64], 0 past N): DequantizePanel's input.
  struct KMajor {
    std::vector<uint8_t> codes;
    std::vector<float> scales, z;
  };

  // Made from the constant weights when a call first needs them (a prompt): decode-only use never
  // keeps the second copy of the codes.
  const KMajor& kmajor(const nbits::Problem& p) const {
    std::call_once(kmajor_once_, [&] { kmajor_ = make_kmajor(p); });
    return kmajor_;
  }

  static KMajor make_kmajor(const nbits::Problem& p) {
    KMajor km;
    const int64_t panels = (p.N + 63) / 64, width = panels * 64, row = 64 * p.bits / 8;
    km.codes.assign(size_t(panels * p.K * row), 0);
    km.scales.assign(size_t(p.blocks * width), 0.0f);
    km.z.assign(size_t(p.blocks * width), 0.0f);
    for (int64_t n = 0; n < p.N; n++) {
      for (int64_t blk = 0; blk < p.blocks; blk++) {
        km.scales[size_t(blk * width + n)] = p.scales[n * p.blocks + blk];
        km.z[size_t(blk * width + n)] = p.z[n * p.blocks + blk];
      }
      const int64_t panel = n / 64, c = n % 64;
      for (int64_t k = 0; k < p.K; k++) {
        const int64_t blk = k / p.bs, i = k % p.bs;
        const uint8_t byte = p.b[(n * p.blocks + blk) * p.blob + (p.bits == 8 ? i : i / 2)];
        uint8_t* dst = km.codes.data() + (panel * p.K + k) * row;
        if (p.bits == 8) {
          dst[c] = byte;
        } else {
          const uint8_t code = (i % 2 ? byte >> 4 : byte) & 0xF;
          dst[c % 32] |= uint8_t(c < 32 ? code : code << 4);
        }
      }
    }
    return km;
  }

  // Whether every |zero * scale| is finite and below float's max by 4x (in double). An infinite
  // or NaN one is not: a zero point of 0 times an infinite scale is NaN in the FMA form, where
  // (code - 0) * inf is the weight's infinity.
  static bool fma_safe(const nbits::Problem& p) {
    const double limit = double(std::numeric_limits<float>::max()) / 4;
    for (int64_t n = 0; n < p.N; n++) {
      for (int64_t blk = 0; blk < p.blocks; blk++) {
        const double zs = double(p.zero(n, blk)) * double(p.scales[n * p.blocks + blk]);
        if (!(std::fabs(zs) < limit)) return false;
      }
    }
    return true;
  }

  // Problem::z: each block's -zero * scale (fma) or zero, [N, blocks], made once for constant
  // weights: one broadcast per block in the loops instead of unpacking the zero point there (a
  // block of 32 4-bit codes is one vector of work).
  static std::vector<float> zero_terms(const nbits::Problem& p, bool fma) {
    std::vector<float> z(size_t(p.N * p.blocks));
    for (int64_t n = 0; n < p.N; n++) {
      for (int64_t blk = 0; blk < p.blocks; blk++) {
        const int64_t i = n * p.blocks + blk;
        z[size_t(i)] = fma ? -float(p.zero(n, blk)) * p.scales[i] : float(p.zero(n, blk));
      }
    }
    return z;
  }

  nbits::Problem p_;
  std::vector<float> z_;   // zero_terms of constant scales and zero points (p_.z, p_.fma)
  bool constant_ = false;  // b, scales and zero points are constants: kmajor_ may be kept
  mutable std::once_flag kmajor_once_;
  mutable KMajor kmajor_;
};

}  // namespace

std::unique_ptr<OpKernel> make_matmul_nbits_kernel(const Node& n) {
  return std::make_unique<MatMulNBitsKernel>(n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
