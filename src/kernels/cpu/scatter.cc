// Ops that address data through index tuples or per-element indices:
// * GatherND: each tuple along `indices`' last axis names a slice of data (after `batch_dims`
//   leading dims that data and indices share) to copy out;
// * ScatterND: each tuple names a slice of the output, a copy of data, that the matching slice of
//   updates overwrites or is combined into;
// * ScatterElements: each element of updates goes to its own position with the axis coordinate
//   replaced by its index.
// Every index is checked before anything is written; negative ones wrap once (ONNX). Updates apply
// in index order, so a repeated index keeps the last update (reduction none) or combines them all,
// one rounding per update, as ONNX Runtime does.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/axis_view.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

enum class Reduction { None, Add, Mul, Max, Min };

Reduction parse_reduction(const Node& n) {
  const std::string r = n.attr_str("reduction", "none");
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  UBF_CHECK(r == "none", n.describe() + ": reduction '" + r + "' passed shape inference");
  return Reduction::None;
}

template <typename T>
T combine(Reduction r, T a, T b) {
  switch (r) {
    case Reduction::None:
      return b;
    case Reduction::Add:
      return T(a + b);
    case Reduction::Mul:
      return T(a * b);
    case Reduction::Max:
    case Reduction::Min:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return T(NAN);  // as the Max and Min ops
      }
      return (r == Reduction::Max ? a > b : a < b) ? a : b;
  }
  return b;
}

// For each (dst, src) pair that `each` hands over, in order: y[dst] = combine(y[dst], u[src]) at
// y's dtype. Floats compute in double and round once per update; integers add and multiply
// unsigned, so overflow wraps.
template <typename Each>
void apply_updates(Reduction red, Tensor& y, const Tensor& u, Each each) {
  auto run = [&](auto load, auto store) {
    each([&](int64_t d, int64_t s) { store(d, combine(red, load(y, d), load(u, s))); });
  };
  const bool order = red == Reduction::Max || red == Reduction::Min;  // signed compares
  switch (y.dtype()) {
    case DType::f32:
      return run([](const Tensor& t, int64_t i) { return double(t.data_as<float>()[i]); },
                 [&](int64_t i, double v) { y.data_as<float>()[i] = float(v); });
    case DType::bf16:
      return run(
          [](const Tensor& t, int64_t i) { return double(bf16_to_f32(t.data_as<uint16_t>()[i])); },
          [&](int64_t i, double v) { y.data_as<uint16_t>()[i] = f32_to_bf16(float(v)); });
    case DType::f16:
      return run(
          [](const Tensor& t, int64_t i) { return double(f16_to_f32(t.data_as<uint16_t>()[i])); },
          [&](int64_t i, double v) { y.data_as<uint16_t>()[i] = f32_to_f16(float(v)); });
    case DType::i64:
      if (order) {
        return run([](const Tensor& t, int64_t i) { return t.data_as<int64_t>()[i]; },
                   [&](int64_t i, int64_t v) { y.data_as<int64_t>()[i] = v; });
      }
      return run([](const Tensor& t, int64_t i) { return uint64_t(t.data_as<int64_t>()[i]); },
                 [&](int64_t i, uint64_t v) { y.data_as<int64_t>()[i] = int64_t(v); });
    case DType::i32:
      if (order) {
        return run([](const Tensor& t, int64_t i) { return t.data_as<int32_t>()[i]; },
                   [&](int64_t i, int32_t v) { y.data_as<int32_t>()[i] = v; });
      }
      return run([](const Tensor& t, int64_t i) { return uint32_t(t.data_as<int32_t>()[i]); },
                 [&](int64_t i, uint32_t v) { y.data_as<int32_t>()[i] = int32_t(v); });
    case DType::boolean:  // reduction none only (shape inference): a copy
    case DType::i8:
    case DType::u8:
      return run([](const Tensor& t, int64_t i) { return t.data_as<uint8_t>()[i]; },
                 [&](int64_t i, uint8_t v) { y.data_as<uint8_t>()[i] = v; });
  }
}

// The coordinates of flat element i of a tensor of sizes s, as "[1,0,2]".
std::string coords_str(const Sizes& s, int64_t i) {
  Sizes c(s.size(), 0);
  for (size_t d = s.size(); d-- > 0;) {
    if (s[d] == 0) continue;
    c[d] = i % s[d];
    i /= s[d];
  }
  return sizes_str(c);
}

// Shared by GatherND and ScatterND: index tuples into data.
class TupleKernel : public KernelBase {
 public:
  using KernelBase::KernelBase;

 protected:
  // The element offset in data, within one batch (dims from `first` on), of each tuple along the
  // last axis of idx, which index dims [first, first + m) of data; throws naming the first index
  // out of range.
  std::vector<int64_t> tuple_offsets(const Tensor& data, const Tensor& idx, int64_t first) const {
    const int64_t m = idx.dim(-1), r = data.rank();
    const int64_t tuples = numel(Sizes(idx.sizes().begin(), idx.sizes().end() - 1));
    std::vector<int64_t> stride(size_t(m), 1);
    for (int64_t i = 0; i < m; i++) {
      for (int64_t d = first + i + 1; d < r; d++) stride[size_t(i)] *= data.dim(int(d));
    }
    std::vector<int64_t> off(size_t(tuples), 0);
    for (int64_t t = 0; t < tuples; t++) {
      int64_t o = 0;
      for (int64_t i = 0; i < m; i++) {
        const int64_t dim = data.dim(int(first + i)), v = index_at(idx, t * m + i);
        if (v < -dim || v >= dim) {
          fail("index " + std::to_string(v) + " at indices" + coords_str(idx.sizes(), t * m + i) +
                   " is out of range for dim " + std::to_string(first + i) + " (size " +
                   std::to_string(dim) + ") of data; inputs " + tensors_str({data, idx}),
               "an index into a dim of size n lies in [-n, n)");
        }
        o += (v < 0 ? v + dim : v) * stride[size_t(i)];
      }
      off[size_t(t)] = o;
    }
    return off;
  }
};

class GatherNDKernel : public TupleKernel {
 public:
  explicit GatherNDKernel(const Node& n) : TupleKernel(n), batch_(n.attr_int("batch_dims", 0)) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 2, 2, out);
    const Tensor &data = in[0], &idx = in[1];
    Tensor& y = out[0];
    const int64_t r = data.rank(), q = idx.rank(), b = batch_;
    const int64_t m = q > 0 ? idx.dim(-1) : -1;
    bool ok = q > b && r > b && m >= 1 && b + m <= r && y.dtype() == data.dtype();
    Sizes want;
    if (ok) {
      want.assign(idx.sizes().begin(), idx.sizes().end() - 1);
      want.insert(want.end(), data.sizes().begin() + b + m, data.sizes().end());
      for (int64_t d = 0; d < b; d++) ok = ok && idx.dim(int(d)) == data.dim(int(d));
    }
    if (!ok || want != y.sizes()) {
      fail("output " + tensors_str({y}) + " does not match GatherND (batch_dims " +
           std::to_string(b) + ") of " + tensors_str({data, idx}));
    }
    const std::vector<int64_t> off = tuple_offsets(data, idx, b);
    if (y.numel() == 0) return;
    int64_t batches = 1, slice = 1;
    for (int64_t d = 0; d < b; d++) batches *= data.dim(int(d));
    for (int64_t d = b + m; d < r; d++) slice *= data.dim(int(d));
    const int64_t per_batch = int64_t(off.size()) / batches, batch_elems = data.numel() / batches;
    const size_t item = dtype_size(data.dtype()), bytes = size_t(slice) * item;
    const char* pd = static_cast<const char*>(data.data());
    char* py = static_cast<char*>(y.data());
    pool.parallel_for(int64_t(off.size()), grain_for(slice), [&](int64_t lo, int64_t hi, int) {
      for (int64_t t = lo; t < hi; t++) {
        const int64_t src = (t / per_batch) * batch_elems + off[size_t(t)];
        std::memcpy(py + size_t(t) * bytes, pd + size_t(src) * item, bytes);
      }
    });
  }

 private:
  int64_t batch_;
};

class ScatterNDKernel : public TupleKernel {
 public:
  explicit ScatterNDKernel(const Node& n) : TupleKernel(n), red_(parse_reduction(n)) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 3, 3, out);
    const Tensor &data = in[0], &idx = in[1], &upd = in[2];
    Tensor& y = out[0];
    const int64_t r = data.rank(), q = idx.rank();
    const int64_t m = q > 0 ? idx.dim(-1) : -1;
    Sizes want;
    if (m >= 0 && m <= r) {
      want.assign(idx.sizes().begin(), idx.sizes().end() - 1);
      want.insert(want.end(), data.sizes().begin() + m, data.sizes().end());
    }
    if (m < 0 || m > r || upd.sizes() != want || upd.dtype() != data.dtype() ||
        y.sizes() != data.sizes() || y.dtype() != data.dtype()) {
      fail("output " + tensors_str({y}) + " does not match ScatterND of " +
               tensors_str({data, idx, upd}),
           "updates must be indices.shape[:-1] + data.shape[indices.shape[-1]:]");
    }
    const std::vector<int64_t> off = tuple_offsets(data, idx, 0);
    if (y.data() != data.data()) parallel_copy(y.data(), data.data(), data.nbytes(), pool);
    int64_t slice = 1;
    for (int64_t d = m; d < r; d++) slice *= data.dim(int(d));
    if (slice == 0 || off.empty()) return;
    // Workers split the positions within a slice: two tuples' slices are equal or disjoint, so
    // no element is written by two workers, and each applies the tuples in order.
    pool.parallel_for(slice, grain_for(int64_t(off.size())), [&](int64_t lo, int64_t hi, int) {
      apply_updates(red_, y, upd, [&](auto&& update) {
        for (size_t t = 0; t < off.size(); t++) {
          for (int64_t e = lo; e < hi; e++) update(off[t] + e, int64_t(t) * slice + e);
        }
      });
    });
  }

 private:
  Reduction red_;
};

class ScatterElementsKernel : public KernelBase {
 public:
  explicit ScatterElementsKernel(const Node& n)
      : KernelBase(n), axis_(n.attr_int("axis", 0)), red_(parse_reduction(n)) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 3, 3, out);
    const Tensor &data = in[0], &idx = in[1], &upd = in[2];
    Tensor& y = out[0];
    const int64_t r = data.rank();
    bool ok = axis_ >= 0 && axis_ < r && idx.rank() == r && upd.sizes() == idx.sizes() &&
              upd.dtype() == data.dtype() && y.sizes() == data.sizes() && y.dtype() == data.dtype();
    for (int64_t d = 0; ok && d < r; d++) {
      ok = d == axis_ || idx.dim(int(d)) <= data.dim(int(d));
    }
    if (!ok) {
      fail("output " + tensors_str({y}) + " does not match ScatterElements along axis " +
               std::to_string(axis_) + " of " + tensors_str({data, idx, upd}),
           "indices and updates have one shape, of data's rank, no larger than data's off the "
           "axis");
    }
    const int64_t dim = data.dim(int(axis_));
    for (int64_t i = 0; i < idx.numel(); i++) {
      const int64_t v = index_at(idx, i);
      if (v < -dim || v >= dim) {
        fail("index " + std::to_string(v) + " at indices" + coords_str(idx.sizes(), i) +
                 " is out of range for axis " + std::to_string(axis_) + " (size " +
                 std::to_string(dim) + "); inputs " + tensors_str({data, idx, upd}),
             "an index into a dim of size n lies in [-n, n)");
      }
    }
    if (y.data() != data.data()) parallel_copy(y.data(), data.data(), data.nbytes(), pool);
    if (idx.numel() == 0) return;
    // Updates at different positions before the axis never meet: those outer slabs run in
    // parallel, each in index order.
    const AxisView iv(idx.sizes(), axis_);
    std::vector<int64_t> ds(size_t(r), 1);  // data's strides
    for (int64_t d = r - 2; d >= 0; d--) ds[size_t(d)] = ds[size_t(d) + 1] * data.dim(int(d) + 1);
    pool.parallel_for(iv.outer, grain_for(iv.len * iv.inner), [&](int64_t lo, int64_t hi, int) {
      apply_updates(red_, y, upd, [&](auto&& update) {
        for (int64_t i = lo * iv.len * iv.inner; i < hi * iv.len * iv.inner; i++) {
          int64_t rest = i, dst = 0;
          for (int64_t d = r - 1; d >= 0; d--) {
            const int64_t c = rest % idx.dim(int(d));
            rest /= idx.dim(int(d));
            if (d == axis_) {
              const int64_t v = index_at(idx, i);
              dst += (v < 0 ? v + dim : v) * ds[size_t(d)];
            } else {
              dst += c * ds[size_t(d)];
            }
          }
          update(dst, i);
        }
      });
    });
  }

 private:
  int64_t axis_;
  Reduction red_;
};

}  // namespace

std::unique_ptr<OpKernel> make_scatter_kernel(const Node& n) {
  if (n.op == OpKind::GatherND) return std::make_unique<GatherNDKernel>(n);
  if (n.op == OpKind::ScatterND) return std::make_unique<ScatterNDKernel>(n);
  UBF_CHECK(n.op == OpKind::ScatterElements, "make_scatter_kernel: " + n.describe());
  return std::make_unique<ScatterElementsKernel>(n);
}

}  // namespace ubfuse::cpu
