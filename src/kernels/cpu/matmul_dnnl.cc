// MatMul on oneDNN 2.6 (numpy semantics: batched, broadcast batch dims, 1-D operands).
//
// * When B has no batch dims (or only 1s), A's batch dims fold into M: one 2-D GEMM
//   [batch*M, K] x [K, N], the fast case of transformer projections.
// * A constant B (produced by a Constant node) is prepacked once, at make_op_kernel time, into the
//   layout oneDNN prefers (format_tag::any) for a representative M (matmul_weights.h); run() uses
//   the packed weights whenever oneDNN accepts that layout for the concrete M (else the plain
//   copy).
// * f32 runs in f32; bf16 x bf16 runs natively (AVX512-BF16 / AMX when present, f32 accumulate,
//   bf16 output); f16 (and bf16 where the CPU lacks a bf16 kernel) converts through f32.
// * f32 with few rows of A (panel_matmul_applies: up to 32, or 160 with a large B) times a
//   constant B that oneDNN packed in 64-column panels (16a64b, its choice on AVX-512) runs our
//   own loop over those panels (matmul_small.h): it streams them faster than oneDNN's kernel does
//   at such M.
// * f32 with more rows times such packed B runs split over the pool (by runs of panels or of A's
//   rows), each part a oneDNN call on one OpenMP thread: waking and joining oneDNN's OpenMP team
//   costs more than the second core gains at small sizes, and its own split is slower at large.
// * f32 with at most kSmallMatMulRows rows of A (decode steps) and an unbatched B runs our own
//   loop (matmul_small.h) instead: oneDNN's per-call setup would cost more than the product; so
//   do small batched products of a few rows each (a decode step's attention in eager mode).
// * oneDNN runs on at most the model's threads, one for small products (DnnlThreads).
// * Primitives are cached per concrete shape under a mutex; each call has its own stream and a
//   user-provided scratchpad, so concurrent run() calls are safe.
// oneDNN threads with its own OpenMP runtime (Debian's build), not with the ThreadPool.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/matmul_info.h"
#include "kernels/cpu/matmul_small.h"
#include "kernels/cpu/matmul_weights.h"

namespace ubfuse::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

dnnl::engine& cpu_engine() { return dnnl_cpu_engine(); }

// Products of packed f32 weights past panel_matmul_applies run split over the pool, by runs of
// B's panels up to kSplitColumnsMacs multiply-adds where there are kSplitPanelsPerPart panels per
// thread, else by runs of A's rows. Measured on 2 threads (Intel Xeon with AMX): by columns wins
// at few rows and big B ([40,768]x[768,3072] 649 -> 595 us) but copies its columns and loses past
// 2^27 ([512,768]x[768,3072] 5.81 -> 5.97 ms; by rows 5.64); fewer panels make uneven runs
// ([128,1152]x[1152,288], 5 panels: 266 us by columns, 204 by rows).
constexpr int64_t kSplitColumnsMacs = int64_t(1) << 27;
constexpr int64_t kSplitPanelsPerPart = 4;
constexpr int64_t kPanelTailRows = 4;
dnnl::memory::desc plain_md(const dims& d, dt t) { return dnnl_plain_md(d, t); }

// Shapes of one call after numpy normalization.
struct Geometry {
  dims a, b, c;  // oneDNN dims (same rank >= 2)
  bool two_d = false;
};

// Computes the oneDNN shapes for A (sa) x B (sb) -> out; throws via fail on mismatch.
template <class Fail>
Geometry geometry(const Sizes& sa_in, const Sizes& sb_in, const Sizes& out, Fail&& fail) {
  Sizes sa = sa_in, sb = sb_in;
  if (sa.empty() || sb.empty()) fail("operands must have at least 1 dim");
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t K = sa.back(), M = sa[sa.size() - 2], N = sb.back();
  if (sb[sb.size() - 2] != K) {
    fail("inner dims differ: " + std::to_string(K) + " vs " + std::to_string(sb[sb.size() - 2]));
  }
  Geometry g;
  bool b_batched = false;
  for (size_t i = 0; i + 2 < sb.size(); ++i) b_batched = b_batched || sb[i] != 1;
  int64_t batch_a = 1;
  for (size_t i = 0; i + 2 < sa.size(); ++i) batch_a *= sa[i];
  // Expected output element count: batch dims broadcast.
  const size_t R = std::max(sa.size(), sb.size());
  Sizes pa(R - sa.size(), 1), pb(R - sb.size(), 1);
  pa.insert(pa.end(), sa.begin(), sa.end());
  pb.insert(pb.end(), sb.begin(), sb.end());
  Sizes full;
  for (size_t i = 0; i + 2 < R; ++i) {
    if (pa[i] != pb[i] && pa[i] != 1 && pb[i] != 1) {
      fail("batch dims do not broadcast: " + sizes_str(sa_in) + " x " + sizes_str(sb_in));
    }
    full.push_back(pa[i] == 1 ? pb[i] : pa[i]);  // numpy: 1 broadcasts, 0 stays 0
  }
  full.push_back(M);
  full.push_back(N);
  if (numel(full) != numel(out)) {
    fail("output " + sizes_str(out) + " does not match " + sizes_str(sa_in) + " x " +
         sizes_str(sb_in));
  }
  if (!b_batched) {
    g.two_d = true;
    g.a = {batch_a * M, K};
    g.b = {K, N};
    g.c = {batch_a * M, N};
    return g;
  }
  g.a.assign(pa.begin(), pa.end());
  g.b.assign(pb.begin(), pb.end());
  g.c.assign(full.begin(), full.end());
  return g;
}

struct Prim {
  dnnl::matmul prim;
  dnnl::memory::desc src, wei, dst;
  size_t scratch_bytes = 0;
  bool packed = false;  // uses the prepacked weights
  std::string impl;     // oneDNN's implementation name
};

class MatMulKernel : public KernelBase {
 public:
  explicit MatMulKernel(const Node& n) : KernelBase(n) {
    const Value* bv = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
    if (bv && bv->producer && bv->producer->op == OpKind::Constant &&
        bv->producer->payload.defined()) {
      w_ = pack_matmul_weights(n, bv->producer->payload);
    }
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 2, out);
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    const Tensor& y = out[0];
    const DType dta = a.dtype();
    if (!is_float(dta) || b.dtype() != dta || y.dtype() != dta) {
      fail("needs float operands and output of one dtype, got " + tensors_str({a, b, y}),
           "Cast the operands to f32 or bf16");
    }
    auto f = [&](const std::string& m) { fail(m + " (operands " + tensors_str({a, b}) + ")"); };
    const Geometry g = geometry(a.sizes(), b.sizes(), y.sizes(), f);
    if (y.numel() == 0) return;
    if (g.a[g.a.size() - 1] == 0) {  // K == 0: zeros
      std::memset(y.data(), 0, y.nbytes());
      return;
    }
    if (panels(g, dta, b.sizes())) {
      panel_matmul_f32(a.data_as<float>(), static_cast<const float*>(w_.f32->get_data_handle()),
                       w_.panel_stride, y.data_as<float>(), g.a[0], g.a[1], g.b[1], pool);
      return;
    }
    if (own(g, dta, b.sizes())) {
      own_panel_matmul_f32(a.data_as<float>(), w_.own_panels.get(), y.data_as<float>(), g.a[0],
                           g.a[1], g.b[1], pool);
      return;
    }
    if (small(g, dta)) {
      small_matmul_f32(a.data_as<float>(), b.data_as<float>(), y.data_as<float>(), g.a[0], g.a[1],
                       g.b[1], pool);
      return;
    }
    if (small_batched(g, dta)) {
      run_small_batched(g, a.data_as<float>(), b.data_as<float>(), y.data_as<float>(), pool);
      return;
    }
    if (split(g, dta, b.sizes(), pool.size()) &&
        run_split(a.data_as<float>(), y.data_as<float>(), g.a[0], g.a[1], g.b[1], pool)) {
      return;
    }
    std::shared_ptr<Prim> p = select(g, dta, b.sizes());
    if (!p) fail("oneDNN has no matmul for " + tensors_str({a, b}));
    const bool f32_path = p->src.data_type() == dt::f32;
    // Operands in the compute dtype.
    const void* pa = a.data();
    const void* pb = b.data();
    void* pc = y.data();
    if (f32_path && dta != DType::f32) {
      float* a32 = dnnl_staging(0, a.numel());
      convert_floats(dta, a.data(), DType::f32, a32, a.numel(), pool);
      pa = a32;
      if (!p->packed) {
        float* b32 = dnnl_staging(1, b.numel());
        convert_floats(dta, b.data(), DType::f32, b32, b.numel(), pool);
        pb = b32;
      }
      pc = dnnl_staging(2, y.numel());
    }
    if (p->packed) pb = (f32_path ? w_.f32 : w_.bf16)->get_data_handle();
    dnnl::engine& eng = cpu_engine();
    dnnl::stream s(eng);
    void* scratch = dnnl_scratchpad(p->scratch_bytes);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, dnnl::memory(p->src, eng, const_cast<void*>(pa))},
        {DNNL_ARG_WEIGHTS, dnnl::memory(p->wei, eng, const_cast<void*>(pb))},
        {DNNL_ARG_DST, dnnl::memory(p->dst, eng, pc)},
    };
    if (p->scratch_bytes) {
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(dnnl::memory::desc({int64_t(p->scratch_bytes)}, dt::u8,
                                                   dnnl::memory::format_tag::a),
                                eng, scratch));
    }
    {
      DnnlThreads threads(y.numel() * g.a.back(), pool.size());
      p->prim.execute(s, args);
      s.wait();
    }
    if (pc != y.data()) convert_floats(DType::f32, pc, dta, y.data(), y.numel(), pool);
  }

  bool run_rows_then(const Tensor& a, const Tensor& b, Tensor& y, ThreadPool& pool,
                     const RowsDone& done) const {
    if (a.dtype() != DType::f32 || b.dtype() != DType::f32 || y.dtype() != DType::f32) return false;
    auto f = [&](const std::string& m) { fail(m + " (operands " + tensors_str({a, b}) + ")"); };
    const Geometry g = geometry(a.sizes(), b.sizes(), y.sizes(), f);
    // split() excludes what run() takes before it: the panel loop's few rows (and with them the
    // small loop's), batched products.
    static_assert(kSmallMatMulRows <= kPanelMatMulRows, "the small loop's rows are panel rows");
    if (y.numel() == 0 || g.a.back() == 0 || !split(g, DType::f32, b.sizes(), pool.size()) ||
        by_columns(g.a[0], g.a[1], g.b[1], pool.size())) {
      return false;
    }
    return run_split(a.data_as<float>(), y.data_as<float>(), g.a[0], g.a[1], g.b[1], pool, &done);
  }

  MatMulCallInfo call_info(const Sizes& sa, const Sizes& sb, DType dt, int threads) const {
    Sizes out = sa;
    if (!out.empty()) out.back() = sb.empty() ? 1 : sb.back();
    auto f = [&](const std::string& m) {
      fail(m + " (operands " + sizes_str(sa) + " x " + sizes_str(sb) + ")");
    };
    const Geometry g = geometry(sa, sb, out, f);
    MatMulCallInfo info;
    if (panels(g, dt, sb)) {
      info.impl = "ubfuse:panels_f32";
      return info;
    }
    if (own(g, dt, sb)) {
      info.impl = "ubfuse:own_panels_f32";
      return info;
    }
    if (small(g, dt) || small_batched(g, dt)) {
      info.impl = "ubfuse:small_rows_f32";
      return info;
    }
    std::shared_ptr<Prim> p = select(g, dt, sb);
    if (!p) fail("oneDNN has no matmul for " + sizes_str(sa) + " x " + sizes_str(sb));
    info.impl = p->impl;
    if (split(g, dt, sb, threads)) {
      info.impl += std::string(" split by ") +
                   (by_columns(g.a[0], g.a[1], g.b[1], threads) ? "columns" : "rows") + " over " +
                   std::to_string(threads) + " threads";
    }
    info.repacks_weights = p->impl.rfind("gemm:", 0) == 0;
    return info;
  }

 private:
  // f32 products by the constant B packed in 64-column panels, past the rows panel_matmul_f32
  // takes: split over the pool, each part a oneDNN call on one OpenMP thread, rather than run on
  // oneDNN's OpenMP team, whose wake-up and join cost more than the second core gains at small
  // sizes ([128,288]x[288,288]: 112 us on two threads, 92 on one, 51 split) and whose own split is
  // a few percent slower at large ones ([512,768]x[768,768] 1.46 -> 1.37 ms).
  bool split(const Geometry& g, DType dt, const Sizes& sb, int threads) const {
    return dt == DType::f32 && g.two_d && w_.panel_tag && sb == w_.sizes && threads > 1 &&
           !panel_matmul_applies(g.a[0], g.a[1], g.b[1]);
  }
  static bool by_columns(int64_t M, int64_t K, int64_t N, int threads) {
    return M * K * N <= kSplitColumnsMacs && (N + 63) / 64 >= kSplitPanelsPerPart * threads;
  }

  // C = A B with the pool's threads each running oneDNN on a part (by_columns): a run of B's
  // panels (a narrower B of the same layout: B is read once in all) into a buffer of its own,
  // then copied to C's columns (oneDNN 2.6 runs a strided destination on its reference loops), or
  // a run of A's rows, reading all of B, then calling *done (when given) for those rows on the
  // part's thread. False (nothing done) where oneDNN would run a part on other than a JIT kernel
  // with the packed weights.
  bool run_split(const float* a, float* c, int64_t M, int64_t K, int64_t N, ThreadPool& pool,
                 const RowsDone* done = nullptr) const {
    // With *done, by rows always: a run of columns has no whole rows (the rows before a tail may
    // be few enough for columns where all of M was not).
    const bool columns = !done && by_columns(M, K, N, pool.size());
    // Runs of at least kSplitPanelsPerPart panels, or of at least one row: no part is empty.
    const int64_t panels = (N + 63) / 64,
                  parts = columns ? pool.size() : std::min<int64_t>(pool.size(), M);
    // By rows, 1-4 rows past parts of whole 16-row blocks (ViT's 513 tokens: 2 x 256 + 1) run on
    // the panel loop after them: as a part's tail they made that part 4-7% slower than the
    // others ([257,768] x [768,3072] 8.28 ms against 7.80 for 256 rows, run side by side; Intel
    // Xeon), and vit_encoder at 1 x 513 went 120.8-122.5 -> 115.5-117.1 ms without.
    const int64_t tail = columns ? 0 : M % (16 * parts);
    if (tail > 0 && tail <= kPanelTailRows && M - tail >= 16 * parts) {
      if (!run_split(a, c, M - tail, K, N, pool, done)) return false;
      panel_matmul_f32(a + (M - tail) * K, static_cast<const float*>(w_.f32->get_data_handle()),
                       w_.panel_stride, c + (M - tail) * N, tail, K, N, pool);
      if (done) (*done)(M - tail, M, 0);  // the pool is idle again: the caller is worker 0
      return true;
    }
    // Part q's first row or column and its count.
    auto range_of = [&](int64_t q, int64_t* first) {
      if (!columns) {
        *first = M * q / parts;
        return M * (q + 1) / parts - *first;
      }
      *first = panels * q / parts * 64;
      return std::min(N, panels * (q + 1) / parts * 64) - *first;
    };
    std::vector<std::shared_ptr<Prim>> prims(static_cast<size_t>(parts));
    for (int64_t q = 0; q < parts; q++) {
      int64_t first = 0;
      const int64_t count = range_of(q, &first);
      std::shared_ptr<Prim>& p = prims[size_t(q)];
      p = columns ? column_prim(M, K, count) : get_prim(rows_geometry(count, K, N), dt::f32, true);
      if (!p || !p->packed || p->impl.rfind("brg", 0) != 0) return false;
    }
    const auto* w = static_cast<const float*>(w_.f32->get_data_handle());
    pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi, int worker) {
      dnnl::engine& eng = cpu_engine();
      dnnl::stream s(eng);
      for (int64_t q = lo; q < hi; q++) {
        int64_t first = 0;
        const int64_t count = range_of(q, &first);
        const Prim& p = *prims[size_t(q)];
        const float* pa = columns ? a : a + first * K;
        const float* pw = columns ? w + first / 64 * w_.panel_stride : w;
        float* pc = columns ? dnnl_staging(3, M * count) : c + first * N;
        std::unordered_map<int, dnnl::memory> args = {
            {DNNL_ARG_SRC, dnnl::memory(p.src, eng, const_cast<float*>(pa))},
            {DNNL_ARG_WEIGHTS, dnnl::memory(p.wei, eng, const_cast<float*>(pw))},
            {DNNL_ARG_DST, dnnl::memory(p.dst, eng, pc)},
        };
        if (p.scratch_bytes) {
          args.emplace(DNNL_ARG_SCRATCHPAD,
                       dnnl::memory(dnnl::memory::desc({int64_t(p.scratch_bytes)}, dt::u8,
                                                       dnnl::memory::format_tag::a),
                                    eng, dnnl_scratchpad(p.scratch_bytes)));
        }
        {
          DnnlThreads one(0, 1);
          p.prim.execute(s, args);
          s.wait();
        }
        if (!columns) {
          if (done) (*done)(first, first + count, worker);
          continue;
        }
        for (int64_t i = 0; i < M; i++) {
          std::memcpy(c + i * N + first, pc + i * count, size_t(count) * sizeof(float));
        }
      }
    });
    return true;
  }

  static Geometry rows_geometry(int64_t M, int64_t K, int64_t N) {
    Geometry g;
    g.two_d = true;
    g.a = {M, K};
    g.b = {K, N};
    g.c = {M, N};
    return g;
  }

  // The primitive for M rows of A times `cols` columns of the packed B (a run of its panels);
  // null where oneDNN wants another layout.
  std::shared_ptr<Prim> column_prim(int64_t M, int64_t K, int64_t cols) const {
    std::lock_guard<std::mutex> l(mu_);
    const std::pair<int64_t, int64_t> key{M, cols};
    auto it = column_cache_.find(key);
    if (it != column_cache_.end()) return it->second;
    const dnnl::memory::desc wei({K, cols}, dt::f32, dnnl::memory::format_tag::BA16a64b);
    std::shared_ptr<Prim> p = create(rows_geometry(M, K, cols), dt::f32, &wei);
    if (column_cache_.size() > 256) column_cache_.clear();
    column_cache_[key] = p;
    return p;
  }

  // A few f32 rows times the constant B packed in 64-column panels: our own loop over oneDNN's
  // packed weights (matmul_small.h), which streams them faster than oneDNN's kernel at such M.
  bool panels(const Geometry& g, DType dt, const Sizes& sb) const {
    return dt == DType::f32 && g.two_d && w_.panel_stride > 0 && sb == w_.sizes &&
           panel_matmul_applies(g.a[0], g.a[1], g.b[1]);
  }

  // 2 to kOwnPanelMaxRows f32 rows times the constant B that ubfuse packed itself, where oneDNN
  // would copy B into its panels inside the call (matmul_small.h). One row keeps the small loop,
  // whose two chains of sums per row multiply faster than one pass's two registers.
  bool own(const Geometry& g, DType dt, const Sizes& sb) const {
    return dt == DType::f32 && g.two_d && w_.own_panels && sb == w_.sizes && g.a[0] >= 2 &&
           g.a[0] <= kOwnPanelMaxRows;
  }

  // A few f32 rows times an unbatched B: our own loop (matmul_small.h), not oneDNN.
  static bool small(const Geometry& g, DType dt) {
    return dt == DType::f32 && g.two_d && small_matmul_applies(g.a[0], g.a[1], g.b[1]);
  }

  // Batched products of a few rows each (attention scores of a decode step, [b, h, 1, d] x
  // [b, h, d, past]), small in all: one small loop per matrix, batch dims broadcast.
  static bool small_batched(const Geometry& g, DType dt) {
    if (dt != DType::f32 || g.two_d) return false;
    const size_t r = g.c.size();
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < r; i++) batch *= g.c[i];
    const int64_t M = g.a[r - 2], K = g.a[r - 1], N = g.b[r - 1];
    return small_matmul_applies(M, K, N) && batch * M * K * N < kDnnlOneThreadMacs;
  }

  static void run_small_batched(const Geometry& g, const float* a, const float* b, float* c,
                                ThreadPool& pool) {
    const size_t r = g.c.size();
    const int64_t M = g.a[r - 2], K = g.a[r - 1], N = g.b[r - 1];
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < r; i++) batch *= g.c[i];
    for (int64_t t = 0; t < batch; t++) {
      // The operands' matrix indices for output matrix t (a dim of 1 broadcasts).
      int64_t ia = 0, ib = 0, rest = t, sa = 1, sb = 1;
      for (size_t i = r - 2; i-- > 0;) {
        const int64_t x = rest % g.c[i];
        rest /= g.c[i];
        ia += (g.a[i] == 1 ? 0 : x) * sa;
        ib += (g.b[i] == 1 ? 0 : x) * sb;
        sa *= g.a[i];
        sb *= g.b[i];
      }
      small_matmul_f32(a + ia * M * K, b + ib * K * N, c + t * M * N, M, K, N, pool);
    }
  }

  // The primitive a call with geometry g, dtype dta and B of sizes sb runs: the prepacked weights
  // where they apply, bf16 where oneDNN has a bf16 kernel, else f32; null if none.
  std::shared_ptr<Prim> select(const Geometry& g, DType dta, const Sizes& sb) const {
    const bool use_packed = w_.in_onednn_layout() && g.two_d && sb == w_.sizes;
    std::shared_ptr<Prim> p;
    if (dta == DType::bf16) p = get_prim(g, dt::bf16, use_packed && w_.bf16);
    if (!p) p = get_prim(g, dt::f32, use_packed && w_.f32);
    return p;
  }

  // Builds (or finds) the primitive for geometry g in compute dtype cdt; null if unsupported.
  std::shared_ptr<Prim> get_prim(const Geometry& g, dt cdt, bool packed) const {
    std::vector<int64_t> key{int64_t(cdt), packed ? 1 : 0, int64_t(g.a.size())};
    key.insert(key.end(), g.a.begin(), g.a.end());
    key.insert(key.end(), g.b.begin(), g.b.end());
    key.insert(key.end(), g.c.begin(), g.c.end());
    std::lock_guard<std::mutex> l(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::shared_ptr<Prim> p;
    const dnnl::memory::desc* wpacked =
        packed ? (cdt == dt::f32 ? &w_.f32_md : &w_.bf16_md) : nullptr;
    p = create(g, cdt, wpacked);
    if (!p && wpacked) p = create(g, cdt, nullptr);
    if (cache_.size() > 256) cache_.clear();  // bound memory for many distinct shapes
    cache_[key] = p;
    return p;
  }

  static std::shared_ptr<Prim> create(const Geometry& g, dt cdt, const dnnl::memory::desc* wmd) {
    try {
      const auto src = plain_md(g.a, cdt);
      const auto dst = plain_md(g.c, cdt);
      const auto wei = wmd ? *wmd : plain_md(g.b, cdt);
      const auto pd = dnnl_matmul_pd(src, wei, dst);
      if (!pd) return nullptr;
      if (wmd && pd.weights_desc() != *wmd) return nullptr;
      auto p = std::make_shared<Prim>();
      p->prim = dnnl::matmul(pd);
      p->src = src;
      p->wei = pd.weights_desc();
      p->dst = dst;
      p->scratch_bytes = pd.scratchpad_desc().get_size();
      p->packed = wmd != nullptr;
      p->impl = pd.impl_info_str();
      return p;
    } catch (const dnnl::error&) {
      return nullptr;
    }
  }

  PackedWeights w_;  // a constant B made ready once
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<Prim>> cache_;
  // column_prim's, by (M, columns)
  mutable std::map<std::pair<int64_t, int64_t>, std::shared_ptr<Prim>> column_cache_;
};

}  // namespace

MatMulCallInfo matmul_call_info(const OpKernel& matmul, const Sizes& a, const Sizes& b, DType dtype,
                                int threads) {
  const auto* k = dynamic_cast<const MatMulKernel*>(&matmul);
  UBF_CHECK(k != nullptr, "matmul_call_info: not a MatMul kernel");
  return k->call_info(a, b, dtype, threads);
}

bool matmul_rows_then(const OpKernel& matmul, const Tensor& a, const Tensor& b, Tensor& c,
                      ThreadPool& pool, const RowsDone& done) {
  const auto* k = dynamic_cast<const MatMulKernel*>(&matmul);
  return k != nullptr && k->run_rows_then(a, b, c, pool, done);
}

std::unique_ptr<OpKernel> make_matmul_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::MatMul, "make_matmul_kernel: " + n.describe());
  return std::make_unique<MatMulKernel>(n);
}

}  // namespace ubfuse::cpu
