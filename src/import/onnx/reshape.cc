// NodeCtx::reshape_to: ubfuse's Reshape takes static sizes, 0 (keep the input's dim at that
// position, symbols included) and one -1 (inferred, possibly a product of symbols). A target
// whose symbols sit elsewhere (Unsqueeze(x[b,s], 0) -> [1,b,s]) is reached by moving the symbolic
// dims to the front with a Transpose, reshaping the static rest, and transposing back.
#include <numeric>

#include "import/onnx/context.h"

namespace ubfuse::onnx_import {

namespace {

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); i++) {
    if (perm[i] != int64_t(i)) return false;
  }
  return true;
}

}  // namespace

Value* NodeCtx::reshape_to(Value* x, const Shape& target) {
  const Shape& in = x->shape;
  // 1. Direct encoding.
  std::vector<int64_t> attr;
  bool ok = true, neg_used = false;
  for (size_t i = 0; i < target.size() && ok; i++) {
    const Dim& d = target[i];
    if (d.is_static()) {
      if (d.value() == 0) {
        ok = i < in.size() && in[i] == d;  // 0 means "copy", so a real 0 must sit over a 0
        attr.push_back(0);
      } else {
        attr.push_back(d.value());
      }
    } else if (i < in.size() && in[i] == d) {
      attr.push_back(0);
    } else if (!neg_used) {
      attr.push_back(-1);
      neg_used = true;
    } else {
      ok = false;
    }
  }
  if (ok) {
    Value* y = emit(OpKind::Reshape, {x}, {{"shape", attr}});
    if (y->shape == target) return y;
  }
  // 2. Symbols to the front, reshape the static rest, transpose back.
  std::vector<Dim> sym_in, sym_out;
  std::vector<int64_t> perm1, static_in;
  for (size_t i = 0; i < in.size(); i++) {
    if (!in[i].is_static()) {
      sym_in.push_back(in[i]);
      perm1.push_back(int64_t(i));
    }
  }
  for (size_t i = 0; i < in.size(); i++) {
    if (in[i].is_static()) perm1.push_back(int64_t(i));
  }
  std::vector<int64_t> attr2;
  for (auto& d : target) {
    if (!d.is_static()) sym_out.push_back(d);
  }
  if (sym_in != sym_out) needs_static(target, "reshaping to " + shape_str(target));
  size_t k = sym_in.size();
  attr2.assign(k, 0);
  std::vector<int64_t> perm2(target.size());
  size_t si = 0, st = 0;
  for (size_t p = 0; p < target.size(); p++) {
    if (!target[p].is_static()) {
      perm2[p] = int64_t(si++);
    } else {
      if (target[p].value() == 0) unsupported("reshaping symbolic tensors to zero-size dims");
      attr2.push_back(target[p].value());
      perm2[p] = int64_t(k + st++);
    }
  }
  Value* y = x;
  if (!is_identity(perm1)) y = emit(OpKind::Transpose, {y}, {{"perm", perm1}});
  y = emit(OpKind::Reshape, {y}, {{"shape", attr2}});
  if (!is_identity(perm2)) y = emit(OpKind::Transpose, {y}, {{"perm", perm2}});
  UBF_CHECK(y->shape == target, where() + ": reshape_to reached " + shape_str(y->shape) +
                                    " instead of " + shape_str(target));
  return y;
}

}  // namespace ubfuse::onnx_import
