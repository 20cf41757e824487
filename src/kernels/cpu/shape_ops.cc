// Shape values' ops: Shape (an input's sizes), Range and ConstantOfShape. They run while a plan is
// built when a shape depends on them (plan/plan.h), or as ordinary kernels on data (a Range of
// positions feeding a rotary embedding).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/shape_util.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/op_kernel.h"

namespace ubfuse::cpu {

namespace {

// Element k of a one-element or vector operand as int64 (i64, i32 or integral floats).
int64_t int_at(const Tensor& t, int64_t k) {
  if (t.dtype() == DType::i64) return t.data_as<int64_t>()[k];
  return int64_t(t.get(k));
}

class ShapeKernel : public KernelBase {
 public:
  ShapeKernel(const Node& n) : KernelBase(n), start_(n.attr_int("start", 0)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out, ThreadPool&) const override {
    // Reads only its input's sizes: while a plan is built the input has no data yet.
    UBF_CHECK(in.size() == 1 && out.size() == 1 && out[0].defined(),
              who_ + ": kernel needs one input and one allocated output");
    const int64_t r = in[0].rank();
    const int64_t a = std::clamp<int64_t>(start_ < 0 ? start_ + r : start_, 0, r);
    Tensor& y = out[0];
    if (y.dtype() != DType::i64 || y.rank() != 1 || a + y.dim(0) > r) {
      fail("output " + tensors_str({y}) + " does not hold the sizes of " + tensors_str({in[0]}));
    }
    for (int64_t i = 0; i < y.dim(0); i++) y.data_as<int64_t>()[i] = in[0].dim(int(a + i));
  }

 private:
  int64_t start_;
};

class RangeKernel : public KernelBase {
 public:
  using KernelBase::KernelBase;
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out, ThreadPool&) const override {
    check_arity(in, 3, 3, out);
    Tensor& y = out[0];
    for (const auto& t : in) {
      if (t.numel() != 1) fail("start, limit and delta must be scalars, got " + tensors_str(in));
    }
    if (is_float(y.dtype())) {
      const double start = in[0].get(0), delta = in[2].get(0);
      for (int64_t i = 0; i < y.numel(); i++) y.set(i, start + double(i) * delta);
      return;
    }
    const int64_t start = int_at(in[0], 0), delta = int_at(in[2], 0);
    if (y.dtype() == DType::i64) {
      for (int64_t i = 0; i < y.numel(); i++) y.data_as<int64_t>()[i] = start + i * delta;
      return;
    }
    for (int64_t i = 0; i < y.numel(); i++) y.set(i, double(start + i * delta));
  }
};

class ConstantOfShapeKernel : public KernelBase {
 public:
  ConstantOfShapeKernel(const Node& n) : KernelBase(n), fill_(n.payload) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ThreadPool& pool) const override {
    check_arity(in, 1, 1, out);
    Tensor& y = out[0];
    if (y.dtype() != fill_.dtype() || y.rank() != in[0].numel()) {
      fail("output " + tensors_str({y}) + " does not match the shape " + tensors_str({in[0]}));
    }
    const size_t es = dtype_size(y.dtype());
    const auto* v = static_cast<const char*>(fill_.data());
    auto* p = static_cast<char*>(y.data());
    // Each part writes its first element, then copies what it has written onto what follows,
    // doubling: a few memcpy calls instead of one per element.
    pool.parallel_for(y.numel(), grain_for(1), [&](int64_t lo, int64_t hi, int) {
      if (lo >= hi) return;
      char* part = p + size_t(lo) * es;
      const size_t bytes = size_t(hi - lo) * es;
      std::memcpy(part, v, es);
      for (size_t done = es; done < bytes; done *= 2) {
        std::memcpy(part + done, part, std::min(done, bytes - done));
      }
    });
  }

 private:
  Tensor fill_;
};

// AxesShape: the shape vector an axes-taking op makes, its values checked (ir/shape_util.h).
class AxesShapeKernel : public KernelBase {
 public:
  AxesShapeKernel(const Node& n)
      : KernelBase(n), mode_(n.attr_str("mode", "")), axis_(n.attr_int("axis", 0)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out, ThreadPool&) const override {
    check_arity(in, 2, 2, out);
    Shape s;
    std::vector<int64_t> v;
    for (int64_t i = 0; i < in[0].numel(); i++) s.emplace_back(int_at(in[0], i));
    for (int64_t i = 0; i < in[1].numel(); i++) v.push_back(int_at(in[1], i));
    std::string why;
    auto got = axes_shape(mode_, s, v, axis_, &why);
    if (!got) fail(why);
    Tensor& y = out[0];
    if (y.dtype() != DType::i64 || y.numel() != int64_t(got->size())) {
      fail("output " + tensors_str({y}) + " cannot hold " + shape_str(*got));
    }
    for (size_t i = 0; i < got->size(); i++) y.data_as<int64_t>()[i] = (*got)[i].value();
  }

 private:
  std::string mode_;
  int64_t axis_;
};

}  // namespace

std::unique_ptr<OpKernel> make_shape_value_kernel(const Node& n) {
  if (n.op == OpKind::AxesShape) return std::make_unique<AxesShapeKernel>(n);
  if (n.op == OpKind::Shape) return std::make_unique<ShapeKernel>(n);
  if (n.op == OpKind::Range) return std::make_unique<RangeKernel>(n);
  if (n.op == OpKind::ConstantOfShape) return std::make_unique<ConstantOfShapeKernel>(n);
  UBF_CHECK(false, "make_shape_value_kernel: " + n.describe());
  return nullptr;
}

}  // namespace ubfuse::cpu
