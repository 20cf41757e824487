// Pad (ONNX Pad: constant, reflect, edge; negative pads crop) on bytes, so every dtype takes the
// same path. Each output row (the last axis) reads one input row, or is all fill value where an
// outer axis is in constant mode's padding; within a row the input's part is one memcpy and the
// pads on either side are element copies (reflect and edge) or the fill value.
#include <cstring>

#include "ir/shape_util.h"
#include "kernels/cpu/kernel_util.h"

namespace ubfuse::cpu {
namespace {

// Writes n copies of the es-byte element at `elem` to dst, doubling the copied run.
void fill_elems(char* dst, int64_t n, const char* elem, size_t es) {
  if (n <= 0) return;
  std::memcpy(dst, elem, es);
  for (int64_t done = 1; done < n;) {
    const int64_t k = std::min(done, n - done);
    std::memcpy(dst + size_t(done) * es, dst, size_t(k) * es);
    done += k;
  }
}

class PadKernel : public KernelBase {
 public:
  PadKernel(const Node& n, std::vector<int64_t> pads, PadMode mode)
      : KernelBase(n), pads_(std::move(pads)), mode_(mode) {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 3, out);
    std::vector<int64_t> pads = pads_;
    if (in.size() == 3) {  // (x, value, pads): the pads a value operand, read per run
      pads.clear();
      for (int64_t i = 0; i < in[2].numel(); i++) {
        pads.push_back(in[2].dtype() == DType::i64 ? in[2].data_as<int64_t>()[i]
                                                   : int64_t(in[2].get(i)));
      }
    }
    const Tensor& x = in[0];
    const Tensor& y = out[0];
    const int64_t r = x.rank();
    if (int64_t(pads.size()) != 2 * r) {
      fail("pads " + sizes_str(pads) + " do not have two values per axis of " + tensors_str({x}));
    }
    Sizes want(size_t(r), 0);
    for (int64_t a = 0; a < r; a++) {
      want[size_t(a)] = x.dim(int(a)) + pads[size_t(a)] + pads[size_t(r + a)];
      if (want[size_t(a)] < 0) {
        fail("pads " + sizes_str(pads) + " crop axis " + std::to_string(a) + " of " +
             tensors_str({x}) + " below 0");
      }
      if (mode_ != PadMode::Constant && x.dim(int(a)) == 0 && want[size_t(a)] > 0) {
        fail("cannot pad the empty axis " + std::to_string(a) + " of " + tensors_str({x}) +
                 " by reflecting or repeating its edge",
             "constant mode pads an empty axis");
      }
    }
    if (y.sizes() != want || y.dtype() != x.dtype()) {
      fail("output " + tensors_str({y}) + " does not match " + tensors_str({x}) + " padded by " +
           sizes_str(pads));
    }
    const size_t es = dtype_size(x.dtype());
    std::vector<char> fill(es, 0);
    if (in.size() > 1) {
      const Tensor& v = in[1];
      if (v.numel() != 1 || v.dtype() != x.dtype()) {
        fail("the fill value must be one element of the input's dtype, got " + tensors_str({v}));
      }
      std::memcpy(fill.data(), v.data(), es);
    }
    if (y.numel() == 0) return;
    const char* px = static_cast<const char*>(x.data());
    char* py = static_cast<char*>(y.data());
    if (r == 0) {
      std::memcpy(py, px, es);
      return;
    }
    const int64_t L = x.dim(-1), Lo = y.dim(-1), b = pads[size_t(r - 1)];
    const int64_t rows = y.numel() / Lo;
    // Rows of x per step along each outer axis.
    std::vector<int64_t> xrows(size_t(r), 1);
    for (int64_t a = r - 2; a > 0; a--) xrows[size_t(a - 1)] = xrows[size_t(a)] * x.dim(int(a));
    // The part of an output row that the input row fills in place: [j0, j1).
    const int64_t j0 = std::clamp<int64_t>(b, 0, Lo), j1 = std::clamp<int64_t>(L + b, j0, Lo);
    pool.parallel_for(rows, grain_for(Lo), [&](int64_t lo, int64_t hi, int) {
      for (int64_t row = lo; row < hi; row++) {
        int64_t t = row, src_row = 0;
        bool filled = false;
        for (int64_t a = r - 2; a >= 0; a--) {
          const int64_t c = t % want[size_t(a)];
          t /= want[size_t(a)];
          const int64_t s = pad_source(c - pads[size_t(a)], x.dim(int(a)), mode_);
          if (s < 0) {
            filled = true;
            break;
          }
          src_row += s * xrows[size_t(a)];
        }
        char* dst = py + size_t(row * Lo) * es;
        if (filled) {
          fill_elems(dst, Lo, fill.data(), es);
          continue;
        }
        const char* src = px + size_t(src_row * L) * es;
        auto edge = [&](int64_t from, int64_t to) {
          if (mode_ == PadMode::Constant)
            return fill_elems(dst + size_t(from) * es, to - from, fill.data(), es);
          for (int64_t j = from; j < to; j++) {
            std::memcpy(dst + size_t(j) * es, src + size_t(pad_source(j - b, L, mode_)) * es, es);
          }
        };
        edge(0, j0);
        if (j1 > j0)
          std::memcpy(dst + size_t(j0) * es, src + size_t(j0 - b) * es, size_t(j1 - j0) * es);
        edge(j1, Lo);
      }
    });
  }

 private:
  std::vector<int64_t> pads_;
  PadMode mode_;
};

}  // namespace

std::unique_ptr<OpKernel> make_pad_kernel(const Node& n) {
  UBF_CHECK(n.op == OpKind::Pad, "make_pad_kernel: " + n.describe());
  const std::string mode = n.attr_str("mode", "constant");
  auto pm = parse_pad_mode(mode);
  if (!pm)
    kernel_fail(n.describe(), "mode must be constant, reflect or edge, got \"" + mode + "\"");
  return std::make_unique<PadKernel>(
      n, n.has_attr("pads") ? n.attr_ints("pads") : std::vector<int64_t>{}, *pm);
}

}  // namespace ubfuse::cpu
