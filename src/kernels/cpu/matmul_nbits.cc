// MatMulNBits (ops.def): a [M, K] f32 times a weight kept as onnxruntime's 4-bit (or 8-bit)
// quantizer packs it, so a model takes an eighth (a quarter) of its f32 weight memory.
// * Up to kDirectRows rows (a decode step, a short prompt): each thread takes a range of columns,
//   unpacks a vector of a column's codes at a time, dequantizes it with one FMA
//   ((code - zero) * scale = code * scale - zero * scale) and adds its products with up to 4 rows
//   of a, read in the codes' order (a 4-bit byte holds codes 2j and 2j + 1: the rows are split into
//   their even and odd elements once per call). The packed weight streams from memory once per 4
//   rows: a decode step reads bits / 32 of the bytes an f32 weight takes.
// * More rows: the columns go in panels of kPanel, each thread dequantizing one into a buffer
//   that stays in L2 and multiplying it there with all the rows by oneDNN (one thread each), as
//   onnxruntime's blocked int4 GEMM does: the weight is read once, in its packed form. The rows
//   are put in the codes' order first (as above), so a panel dequantizes without shuffles.
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

namespace ubfuse::cpu::nbits {

// One MatMulNBits call's operands, in onnxruntime's layout.
struct Problem {
  int64_t K = 0, N = 0, bits = 4, bs = 0, blocks = 0, blob = 0, zrow = 0;
  const uint8_t* b = nullptr;      // [N, blocks, blob]
  const float* scales = nullptr;   // [N, blocks]
  const uint8_t* zeros = nullptr;  // [N, zrow] packed, or null: 2^(bits-1)
  const float* zs = nullptr;       // [N, blocks]: -zero(n, blk) * scale, made once per call
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
template <size_t R, size_t C, class D>
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
  for (int64_t blk = 0; blk < p.blocks; blk++) {
    V sv[C], zs[C];
    const uint8_t* q[C];
    for (size_t c = 0; c < C; c++) {
      const int64_t col = n + int64_t(c);
      sv[c] = hn::Set(d, p.scales[col * p.blocks + blk]);
      zs[c] = hn::Set(d, p.zs[col * p.blocks + blk]);
      q[c] = p.b + (col * p.blocks + blk) * bytes;
    }
    const int64_t base = blk * p.bs;
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
          const V lo =
              hn::MulAdd(hn::ConvertTo(d, hn::BitCast(di, hn::And(u, mask))), sv[c], zs[c]);
          const V hi =
              hn::MulAdd(hn::ConvertTo(d, hn::BitCast(di, hn::ShiftRight<4>(u))), sv[c], zs[c]);
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
          const V w = hn::MulAdd(hn::ConvertTo(d, hn::BitCast(di, u)), sv[c], zs[c]);
          for (size_t r = 0; r < R; r++) {
            acc[c][r][h] = hn::MulAdd(w, hn::LoadU(d, rows[r] + base + j), acc[c][r][h]);
          }
        }
      }
    }
  }
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
  for (; n + int64_t(C) <= n1; n += int64_t(C)) ColumnGroup<R, C>(d, p, rows, y, n);
  for (; n < n1; n++) ColumnGroup<R, 1>(d, p, rows, y, n);
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

// wp[(n - n0) * blocks * bs + e] = the weight of column n at element e of the codes' order (as
// Columns reads the rows), for columns [n0, n1): a panel dequantized, one column per row.
template <class D>
HWY_INLINE void PanelOf(D d, const nb::Problem& p, float* HWY_RESTRICT wp, int64_t n0, int64_t n1) {
  using V = hn::VFromD<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> d8;
  const size_t L = hn::Lanes(d);
  const int64_t ld = p.blocks * p.bs;
  for (int64_t n = n0; n < n1; n++) {
    const uint8_t* col = p.b + n * p.blocks * p.blob;
    float* out = wp + (n - n0) * ld;
    for (int64_t blk = 0; blk < p.blocks; blk++) {
      const V sv = hn::Set(d, p.scales[n * p.blocks + blk]);
      const V zs = hn::Set(d, p.zs[n * p.blocks + blk]);
      const uint8_t* q = col + blk * p.blob;
      float* o = out + blk * p.bs;
      for (int64_t j = 0; j < p.blob; j += int64_t(L)) {
        const auto u = hn::PromoteTo(du, hn::LoadU(d8, q + j));
        if (p.bits == 4) {
          const V lo = hn::ConvertTo(d, hn::BitCast(di, hn::And(u, hn::Set(du, 15))));
          const V hi = hn::ConvertTo(d, hn::BitCast(di, hn::ShiftRight<4>(u)));
          hn::StoreU(hn::MulAdd(lo, sv, zs), d, o + j);
          hn::StoreU(hn::MulAdd(hi, sv, zs), d, o + p.bs / 2 + j);
        } else {
          hn::StoreU(hn::MulAdd(hn::ConvertTo(d, hn::BitCast(di, u)), sv, zs), d, o + j);
        }
      }
    }
  }
}

void DequantizePanel(const nb::Problem& p, float* wp, int64_t n0, int64_t n1) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 8> d8;  // a 4-bit block of 16 codes is 8 bytes
  if (p.blob % int64_t(hn::Lanes(d)) == 0) {
    PanelOf(d, p, wp, n0, n1);
  } else {
    PanelOf(d8, p, wp, n0, n1);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace ubfuse
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse {
HWY_EXPORT(DirectColumns);
HWY_EXPORT(DequantizePanel);

namespace cpu {
namespace {

// Rows a call multiplies through the packed weight itself; more go through dequantized panels of
// kPanel columns (a panel of K = 4096 is 2 MiB).
constexpr int64_t kDirectRows = 8;
constexpr int64_t kPanel = 128;

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
      zs_ = zero_times_scale(p);
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
    std::vector<float> zs;  // when scales or zero points come at run time
    if (zs_.empty()) zs = zero_times_scale(p);
    p.zs = zs_.empty() ? zs.data() : zs_.data();
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

  void dequantized(const nbits::Problem& p, const float* a, int64_t M, float* y,
                   ThreadPool& pool) const {
    const int64_t padded = p.blocks * p.bs;
    const std::vector<float> rows = code_order(p, a, M);
    const int64_t panels = (p.N + kPanel - 1) / kPanel;
    pool.parallel_for(panels, 1, [&](int64_t lo, int64_t hi, int) {
      thread_local std::vector<float> panel;
      if (panel.size() < size_t(kPanel * padded)) panel.resize(size_t(kPanel * padded));
      dnnl::engine& eng = dnnl_cpu_engine();
      dnnl::stream s(eng);
      DnnlThreads one(0, 1);  // the pool's threads run a panel each
      for (int64_t t = lo; t < hi; t++) {
        const int64_t n0 = t * kPanel, nc = std::min(kPanel, p.N - n0);
        HWY_DYNAMIC_DISPATCH(DequantizePanel)(p, panel.data(), n0, n0 + nc);
        const std::shared_ptr<const Prim> pr = prim(M, nc);
        dnnl::memory src(pr->src, eng, const_cast<float*>(rows.data())),
            wei(pr->wei, eng, panel.data()), dst(pr->dst, eng, y + n0);
        pr->prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
        s.wait();
      }
    });
  }

  struct Prim {
    dnnl::matmul prim;
    dnnl::memory::desc src, wei, dst;
  };

  // oneDNN's product of M rows (in the codes' order, blocks * bs long) by a panel of nc columns
  // (B = the panel transposed: [padded, nc] read with strides {1, padded}) into nc columns of y
  // (rows N apart), made once per (M, nc).
  std::shared_ptr<const Prim> prim(int64_t M, int64_t nc) const {
    std::lock_guard<std::mutex> l(mu_);
    const std::pair<int64_t, int64_t> key{M, nc};
    auto it = prims_.find(key);
    if (it != prims_.end()) return it->second;
    if (prims_.size() > 64) prims_.clear();  // bound memory for many distinct lengths
    auto pr = std::make_shared<Prim>();
    using dt = dnnl::memory::data_type;
    const int64_t padded = p_.blocks * p_.bs;
    pr->src = dnnl_plain_md({M, padded}, dt::f32);
    pr->wei = dnnl::memory::desc({padded, nc}, dt::f32, dnnl::memory::dims{1, padded});
    pr->dst = dnnl::memory::desc({M, nc}, dt::f32, dnnl::memory::dims{p_.N, 1});
    dnnl::matmul::desc d(pr->src, pr->wei, pr->dst);
    pr->prim = dnnl::matmul(dnnl::matmul::primitive_desc(d, dnnl_cpu_engine()));
    prims_[key] = pr;
    return pr;
  }

  // Each block's zero point times its scale, [N, blocks]: one broadcast per block in the loops
  // instead of unpacking the zero point there (a block of 32 4-bit codes is one vector of work).
  static std::vector<float> zero_times_scale(const nbits::Problem& p) {
    std::vector<float> zs(size_t(p.N * p.blocks));
    for (int64_t n = 0; n < p.N; n++) {
      for (int64_t blk = 0; blk < p.blocks; blk++) {
        const int64_t i = n * p.blocks + blk;
        zs[size_t(i)] = -float(p.zero(n, blk)) * p.scales[i];
      }
    }
    return zs;
  }

  nbits::Problem p_;
  std::vector<float> zs_;  // zero_times_scale of constant scales and zero points
  mutable std::mutex mu_;
  mutable std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const Prim>> prims_;
};

}  // namespace

std::unique_ptr<OpKernel> make_matmul_nbits_kernel(const Node& n) {
  return std::make_unique<MatMulNBitsKernel>(n);
}

}  // namespace cpu
}  // namespace ubfuse
#endif  // HWY_ONCE
