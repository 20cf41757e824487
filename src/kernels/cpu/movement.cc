// Data movement: Reshape (a copy), Transpose, Slice, Expand (one strided-copy engine) and Concat.
//
// strided_copy writes a contiguous output from a source described by element strides per output
// dim (negative for reversed slices, 0 for broadcast). After dropping size-1 dims and merging dims
// that are contiguous in the source too, the innermost dim decides the loop:
//   stride 1 -> memcpy of whole runs;  stride 0 -> fill runs with one value;
//   another dim has stride 1 (a transpose) -> 32x32-element tiles so that both the source reads
//   and the destination writes stay within a few cache lines;   else -> a strided gather loop.
// Work is split over the pool by rows (or tile rows) with at least kMinParallelElems per chunk.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ir/shape_util.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

constexpr int64_t kTile = 32;

struct Dims {
  std::vector<int64_t> size, sstride;  // output sizes and source strides, outermost first
};

// Drops size-1 dims and merges dims that are contiguous in both source and destination.
Dims simplify(const Sizes& sizes, const std::vector<int64_t>& strides) {
  Dims d;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!d.size.empty() && d.sstride.back() == strides[i] * sizes[i]) {
      d.size.back() *= sizes[i];
      d.sstride.back() = strides[i];
      continue;
    }
    d.size.push_back(sizes[i]);
    d.sstride.push_back(strides[i]);
  }
  return d;
}

template <size_t kBytes>
struct Elem {
  unsigned char b[kBytes];
};

// Copies n elements with source stride s (elements) to contiguous dst.
template <typename E>
void gather_run(const E* src, int64_t s, E* dst, int64_t n) {
  for (int64_t k = 0; k < n; ++k) dst[k] = src[k * s];
}
// Copies a contiguous run of n elements. Short runs (a partial rotary's last dims) are copied in
// fixed-size pieces the compiler inlines: a memcpy call per run of a few elements dominated them.
template <typename E>
void copy_run(const E* src, E* dst, int64_t n) {
  if (n > 16) {
    std::memcpy(static_cast<void*>(dst), static_cast<const void*>(src), size_t(n) * sizeof(E));
    return;
  }
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    std::memcpy(static_cast<void*>(dst + i), static_cast<const void*>(src + i), 4 * sizeof(E));
  }
  switch (n - i) {
    case 3:
      dst[i + 2] = src[i + 2];
      [[fallthrough]];
    case 2:
      dst[i + 1] = src[i + 1];
      [[fallthrough]];
    case 1:
      dst[i] = src[i];
      break;
    default:
      break;
  }
}
template <typename E>
void fill_run(const E* src, E* dst, int64_t n) {
  const E v = *src;
  for (int64_t k = 0; k < n; ++k) dst[k] = v;
}

// Mixed-radix walk over `sizes` starting at linear index `start`: keeps the source offset.
struct Walker {
  const std::vector<int64_t>& size;
  const std::vector<int64_t>& stride;
  std::vector<int64_t> idx;
  int64_t off = 0;
  Walker(const std::vector<int64_t>& sz, const std::vector<int64_t>& st, int64_t start)
      : size(sz), stride(st), idx(sz.size(), 0) {
    for (size_t d = sz.size(); d-- > 0;) {
      idx[d] = start % sz[d];
      start /= sz[d];
      off += idx[d] * st[d];
    }
  }
  void next() {
    for (size_t d = size.size(); d-- > 0;) {
      if (++idx[d] < size[d]) {
        off += stride[d];
        return;
      }
      off -= (size[d] - 1) * stride[d];
      idx[d] = 0;
    }
  }
};

template <typename E>
void strided_copy_t(const E* src, const Dims& dm, E* dst, ThreadPool& pool) {
  const size_t r = dm.size.size();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t L = dm.size[r - 1], sL = dm.sstride[r - 1];
  // Transpose case: some outer dim j is contiguous in the source.
  size_t j = r;
  if (sL != 1 && sL != 0) {
    for (size_t k = 0; k + 1 < r; ++k) {
      if (dm.sstride[k] == 1) j = k;
    }
  }
  if (j == r) {
    // Rows of the innermost dim.
    std::vector<int64_t> osz(dm.size.begin(), dm.size.end() - 1);
    std::vector<int64_t> ost(dm.sstride.begin(), dm.sstride.end() - 1);
    int64_t rows = 1;
    for (auto s : osz) rows *= s;
    pool.parallel_for(rows, grain_for(L), [&](int64_t lo, int64_t hi, int) {
      Walker w(osz, ost, lo);
      for (int64_t row = lo; row < hi; ++row, w.next()) {
        E* o = dst + row * L;
        const E* s = src + w.off;
        if (sL == 1) {
          copy_run(s, o, L);
        } else if (sL == 0) {
          fill_run(s, o, L);
        } else {
          gather_run(s, sL, o, L);
        }
      }
    });
    return;
  }
  // Tiled transpose over dims (j, r-1); the other dims form the outer walk.
  std::vector<int64_t> osz, ost;
  int64_t dstride_j = 1;
  for (size_t k = j + 1; k < r; ++k) dstride_j *= dm.size[k];
  std::vector<int64_t> dst_strides(r, 1);
  for (size_t k = r - 1; k-- > 0;) dst_strides[k] = dst_strides[k + 1] * dm.size[k + 1];
  std::vector<int64_t> odst;  // destination strides of the outer dims
  for (size_t k = 0; k + 1 < r; ++k) {
    if (k == j) continue;
    osz.push_back(dm.size[k]);
    ost.push_back(dm.sstride[k]);
    odst.push_back(dst_strides[k]);
  }
  int64_t outer = 1;
  for (auto s : osz) outer *= s;
  const int64_t J = dm.size[j];
  const int64_t jt = (J + kTile - 1) / kTile;
  pool.parallel_for(outer * jt, grain_for(kTile * L), [&](int64_t lo, int64_t hi, int) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t o = item / jt, jb = (item % jt) * kTile;
      int64_t soff = 0, doff = 0;
      int64_t rem = o;
      for (size_t d = osz.size(); d-- > 0;) {
        const int64_t i = rem % osz[d];
        rem /= osz[d];
        soff += i * ost[d];
        doff += i * odst[d];
      }
      const int64_t je = std::min(J, jb + kTile);
      for (int64_t lb = 0; lb < L; lb += kTile) {
        const int64_t le = std::min(L, lb + kTile);
        for (int64_t jj = jb; jj < je; ++jj) {
          const E* s = src + soff + jj;  // source stride of dim j is 1
          E* dd = dst + doff + jj * dstride_j;
          for (int64_t ll = lb; ll < le; ++ll) dd[ll] = s[ll * sL];
        }
      }
    }
  });
}

// Copies the contiguous output `out` from `src` (element size es) starting at element `base`
// with per-output-dim source strides.
void strided_copy(const void* src, int64_t base, const std::vector<int64_t>& strides, void* out,
                  const Sizes& sizes, size_t es, ThreadPool& pool) {
  if (numel(sizes) == 0) return;
  const Dims dm = simplify(sizes, strides);
  const char* s = static_cast<const char*>(src) + base * int64_t(es);
  switch (es) {
    case 1:
      return strided_copy_t(reinterpret_cast<const Elem<1>*>(s), dm, static_cast<Elem<1>*>(out),
                            pool);
    case 2:
      return strided_copy_t(reinterpret_cast<const Elem<2>*>(s), dm, static_cast<Elem<2>*>(out),
                            pool);
    case 4:
      return strided_copy_t(reinterpret_cast<const uint32_t*>(s), dm, static_cast<uint32_t*>(out),
                            pool);
    case 8:
      return strided_copy_t(reinterpret_cast<const uint64_t*>(s), dm, static_cast<uint64_t*>(out),
                            pool);
    default:
      UBF_CHECK(false, "strided_copy: element size " + std::to_string(es));
  }
}

std::vector<int64_t> contiguous_strides(const Sizes& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// The sizes whose dense strides address operand 0: those of the buffer it leads, if any.
const Sizes& storage_of(const Tensor& x, const std::vector<Sizes>& storage) {
  return storage.empty() || storage[0].empty() ? x.sizes() : storage[0];
}

class ReshapeKernel : public KernelBase {
 public:
  using KernelBase::KernelBase;
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 2, out);  // a target shape operand is already in the output's sizes
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    if (x.numel() != y.numel() || x.dtype() != y.dtype()) {
      fail("cannot reshape " + tensors_str({x}) + " to " + tensors_str({y}),
           "the element count must stay the same");
    }
    if (x.data() != y.data()) parallel_copy(y.data(), x.data(), x.nbytes(), pool);
  }
};

class TransposeKernel : public KernelBase {
 public:
  TransposeKernel(const Node& n, std::vector<int64_t> perm)
      : KernelBase(n), perm_(std::move(perm)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    run_pitched(in, {}, out, pool);
  }
  // x may lead a larger buffer (a KV cache's rows): its strides are then the buffer's.
  bool reads_pitched(size_t i, int, int) const override { return i == 0; }
  void run_pitched(const std::vector<Tensor>& in, const std::vector<Sizes>& storage,
                   std::vector<Tensor>& out, ThreadPool& pool) const override {
    check_arity(in, 1, 2, out);
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    const size_t r = size_t(x.rank());
    std::vector<int64_t> perm = perm_;
    if (in.size() == 2) {  // (x, perm): the perm a value operand, read per run
      perm.clear();
      for (int64_t i = 0; i < in[1].numel(); i++) {
        perm.push_back(in[1].dtype() == DType::i64 ? in[1].data_as<int64_t>()[i]
                                                   : int64_t(in[1].get(i)));
      }
      std::vector<bool> seen(r, false);
      bool is_perm = perm.size() == r;
      for (size_t i = 0; is_perm && i < r; i++) {
        is_perm = perm[i] >= 0 && perm[i] < int64_t(r) && !seen[size_t(perm[i])];
        if (is_perm) seen[size_t(perm[i])] = true;
      }
      if (!is_perm) {
        fail("perm " + sizes_str(perm) + " is not a permutation of the axes of " +
             tensors_str({x}));
      }
    } else if (perm.empty()) {
      for (size_t i = r; i-- > 0;) perm.push_back(int64_t(i));
    }
    bool ok = perm.size() == r && size_t(y.rank()) == r && x.dtype() == y.dtype();
    for (size_t i = 0; ok && i < r; ++i) {
      ok = perm[i] >= 0 && perm[i] < int64_t(r) && y.dim(int(i)) == x.dim(int(perm[i]));
    }
    if (!ok) {
      fail("perm " + sizes_str(perm) + " does not map " + tensors_str({x}) + " to " +
           tensors_str({y}));
    }
    const auto xs = contiguous_strides(storage_of(x, storage));
    std::vector<int64_t> st(r);
    for (size_t i = 0; i < r; ++i) st[i] = xs[size_t(perm[i])];
    strided_copy(x.data(), 0, st, y.data(), y.sizes(), dtype_size(x.dtype()), pool);
  }

 private:
  std::vector<int64_t> perm_;
};

class SliceKernel : public KernelBase {
 public:
  SliceKernel(const Node& n, std::vector<int64_t> starts, std::vector<int64_t> ends,
              std::vector<int64_t> axes, std::vector<int64_t> steps)
      : KernelBase(n),
        starts_(std::move(starts)),
        ends_(std::move(ends)),
        axes_(std::move(axes)),
        steps_(std::move(steps)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    if (in.size() == 5) {  // (x, starts, ends, axes, steps) as operands
      std::vector<int64_t> b[4];
      for (size_t k = 0; k < 4; k++) {
        for (int64_t i = 0; i < in[k + 1].numel(); i++) b[k].push_back(int_elem(in[k + 1], i));
        if (b[k].size() != b[0].size()) {
          fail("starts, ends, axes and steps differ in length: " + tensors_str(in));
        }
      }
      slice(in[0], out, b[0], b[1], b[2], b[3], pool);
      return;
    }
    check_arity(in, 1, 1, out);
    slice(in[0], out, starts_, ends_, axes_, steps_, pool);
  }

 private:
  static int64_t int_elem(const Tensor& t, int64_t i) {
    return t.dtype() == DType::i64 ? t.data_as<int64_t>()[i] : int64_t(t.get(i));
  }
  void slice(const Tensor& x, std::vector<Tensor>& out, const std::vector<int64_t>& starts,
             const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
             const std::vector<int64_t>& steps, ThreadPool& pool) const {
    UBF_CHECK(out.size() == 1, who_ + ": bad arity");
    const Tensor& y = out[0];
    const int64_t r = x.rank();
    if (y.rank() != r || y.dtype() != x.dtype()) {
      fail("output " + tensors_str({y}) + " does not match input " + tensors_str({x}));
    }
    const auto xs = contiguous_strides(x.sizes());
    std::vector<int64_t> st = xs;
    int64_t base = 0;
    Sizes want = x.sizes();
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
      if (ax < 0 || ax >= r) fail("axis " + std::to_string(axes[i]) + " out of range");
      const int64_t dim = x.dim(int(ax)), step = steps[i];
      if (step == 0) fail("step must not be 0");
      want[size_t(ax)] = slice_length(dim, starts[i], ends[i], step);
      if (want[size_t(ax)] > 0) base += slice_start(dim, starts[i], step) * xs[size_t(ax)];
      st[size_t(ax)] = xs[size_t(ax)] * step;
    }
    if (want != y.sizes()) {
      fail("slice of " + tensors_str({x}) + " has sizes " + sizes_str(want) + ", output is " +
           sizes_str(y.sizes()));
    }
    strided_copy(x.data(), base, st, y.data(), y.sizes(), dtype_size(x.dtype()), pool);
  }

  std::vector<int64_t> starts_, ends_, axes_, steps_;
};

class ExpandKernel : public KernelBase {
 public:
  using KernelBase::KernelBase;
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    run_pitched(in, {}, out, pool);
  }
  // x may lead a larger buffer (a KV cache's rows, broadcast to grouped-query heads).
  bool reads_pitched(size_t i, int, int) const override { return i == 0; }
  void run_pitched(const std::vector<Tensor>& in, const std::vector<Sizes>& storage,
                   std::vector<Tensor>& out, ThreadPool& pool) const override {
    check_arity(in, 1, 2, out);  // a target shape operand is already in the output's sizes
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    bool ok = x.rank() <= y.rank() && x.dtype() == y.dtype();
    for (int i = 1; ok && i <= x.rank(); ++i) ok = x.dim(-i) == 1 || x.dim(-i) == y.dim(-i);
    if (!ok) {
      fail("cannot expand " + tensors_str({x}) + " to " + tensors_str({y}),
           "sizes must match or be 1 in each dim, aligned from the right");
    }
    std::vector<int64_t> st = broadcast_strides(x.sizes(), y.sizes());
    if (!storage.empty() && !storage[0].empty()) {  // the dims it does not broadcast: the buffer's
      const auto xs = contiguous_strides(storage[0]);
      const size_t lead = size_t(y.rank() - x.rank());
      for (size_t i = 0; i < xs.size(); ++i) {
        if (st[lead + i] != 0) st[lead + i] = xs[i];
      }
    }
    strided_copy(x.data(), 0, st, y.data(), y.sizes(), dtype_size(x.dtype()), pool);
  }
};

class ConcatKernel : public KernelBase {
 public:
  ConcatKernel(const Node& n, int64_t axis) : KernelBase(n), axis_(axis) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    UBF_CHECK(!in.empty() && out.size() == 1, who_ + ": bad arity");
    const Tensor& y = out[0];
    const int64_t r = y.rank();
    const int64_t ax = axis_ < 0 ? axis_ + r : axis_;
    if (ax < 0 || ax >= r) fail("axis " + std::to_string(axis_) + " out of range");
    int64_t total = 0;
    for (const auto& t : in) {
      bool ok = t.rank() == r && t.dtype() == y.dtype();
      for (int64_t i = 0; ok && i < r; ++i) ok = i == ax || t.dim(int(i)) == y.dim(int(i));
      if (!ok) fail("inputs " + tensors_str(in) + " do not concatenate to " + tensors_str({y}));
      total += t.dim(int(ax));
    }
    if (total != y.dim(int(ax))) {
      fail("inputs " + tensors_str(in) + " do not concatenate to " + tensors_str({y}));
    }
    const int64_t es = int64_t(dtype_size(y.dtype()));
    int64_t outer = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= y.dim(int(i));
    const int64_t inner = y.numel() / std::max<int64_t>(1, outer);  // elements per outer row
    // Piece k of each outer row: bytes and offset within the row.
    std::vector<int64_t> bytes, offs;
    int64_t off = 0;
    for (const auto& t : in) {
      const int64_t b = (outer ? t.numel() / outer : 0) * es;
      bytes.push_back(b);
      offs.push_back(off);
      off += b;
    }
    char* py = static_cast<char*>(y.data());
    if (y.numel() == 0) return;
    if (outer == 1) {
      for (size_t k = 0; k < in.size(); ++k) {
        parallel_copy(py + offs[k], in[k].data(), size_t(bytes[k]), pool);
      }
      return;
    }
    // Piece by piece through copy_run: pieces of a few elements (RoPE's interleave stacks
    // [.., n, 1]) are copied inline, where a memcpy call per 4-byte piece ran such a Concat at
    // about 1.5 GB/s.
    auto run = [&](auto tag) {
      using E = decltype(tag);
      pool.parallel_for(outer, grain_for(inner), [&](int64_t lo, int64_t hi, int) {
        E* yo = reinterpret_cast<E*>(py);
        for (size_t k = 0; k < in.size(); ++k) {
          const int64_t n = bytes[k] / es, at = offs[k] / es;
          const E* src = static_cast<const E*>(in[k].data());
          for (int64_t o = lo; o < hi; ++o) copy_run(src + o * n, yo + o * inner + at, n);
        }
      });
    };
    switch (es) {
      case 1:
        return run(uint8_t{});
      case 2:
        return run(uint16_t{});
      case 4:
        return run(uint32_t{});
      case 8:
        return run(uint64_t{});
      default:
        UBF_CHECK(false, who_ + ": element size " + std::to_string(es));
    }
  }

 private:
  int64_t axis_;
};

}  // namespace

std::unique_ptr<OpKernel> make_movement_kernel(const Node& n) {
  if (n.op == OpKind::Reshape) return std::make_unique<ReshapeKernel>(n);
  if (n.op == OpKind::Transpose) {
    return std::make_unique<TransposeKernel>(
        n, n.has_attr("perm") ? n.attr_ints("perm") : std::vector<int64_t>{});
  }
  if (n.op == OpKind::Slice && n.inputs.size() > 1) {
    return std::make_unique<SliceKernel>(n, std::vector<int64_t>{}, std::vector<int64_t>{},
                                         std::vector<int64_t>{}, std::vector<int64_t>{});
  }
  if (n.op == OpKind::Slice) {
    auto starts = n.attr_ints("starts");
    auto ends = n.attr_ints("ends");
    std::vector<int64_t> axes, steps;
    if (n.has_attr("axes")) {
      axes = n.attr_ints("axes");
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    }
    steps = n.has_attr("steps") ? n.attr_ints("steps") : std::vector<int64_t>(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size()) {
      kernel_fail(n.describe(), "starts, ends, axes and steps must have the same length");
    }
    return std::make_unique<SliceKernel>(n, starts, ends, axes, steps);
  }
  if (n.op == OpKind::Concat) return std::make_unique<ConcatKernel>(n, n.attr_int("axis", 0));
  if (n.op == OpKind::Expand) return std::make_unique<ExpandKernel>(n);
  UBF_CHECK(false, "make_movement_kernel: " + n.describe());
  return nullptr;
}

}  // namespace ubfuse::cpu
