#include "codegen/row_args.h"

#include <algorithm>

#include "ubfuse/error.h"

namespace ubfuse {

namespace {

[[noreturn]] void fail(const kir::Program& p, const std::string& what) {
  throw Error("fused kernel " + p.name + ": " + what +
              "; hint: the tensors bound at run time do not broadcast to the group's domain");
}

// Row map of a tensor whose dims before the row are `lead` (row length `inner`) over the
// domain's leading dims L; with `perm` (kir::Input::row_perm) the tensor is read through a
// Transpose that keeps the last axis: domain dim k walks the tensor's dim perm[k].
UbfTensorArg row_map(const kir::Program& p, const std::string& name, Sizes lead, int64_t inner,
                     const Sizes& L, const std::vector<int64_t>& perm, void* data) {
  UbfTensorArg t{};
  t.data = data;
  Sizes own_stride(lead.size());
  for (size_t k = lead.size(), s = size_t(inner); k-- > 0; s *= size_t(lead[k])) {
    own_stride[k] = int64_t(s);
  }
  bool permuted = false;
  if (!perm.empty()) {
    if (perm.size() != lead.size()) {
      fail(p, "'" + name + "' has " + std::to_string(lead.size()) +
                  " leading dims, its Transpose permutes " + std::to_string(perm.size()));
    }
    const Sizes sizes = lead, strides = own_stride;
    for (size_t k = 0; k < perm.size(); k++) {
      lead[k] = sizes[size_t(perm[k])];
      own_stride[k] = strides[size_t(perm[k])];
      permuted = permuted || perm[k] != int64_t(k);
    }
  }
  if (lead.size() > L.size()) {
    for (size_t i = 0; i < lead.size() - L.size(); i++) {
      if (lead[i] != 1) fail(p, "'" + name + "' has more leading dims than the domain");
    }
  }
  std::vector<int64_t> st(L.size(), 0);
  bool any = false;
  // Walk inner to outer; `exact` stays true when the tensor has exactly the domain's rows.
  bool exact = !permuted;
  for (size_t j = 0; j < L.size(); j++) {
    size_t k = L.size() - 1 - j;  // domain dim
    int64_t dom = L[k];
    if (j < lead.size()) {
      int64_t mine = lead[lead.size() - 1 - j];
      if (mine != dom && mine != 1) {
        fail(p, "'" + name + "' dim of size " + std::to_string(mine) +
                    " does not broadcast to the domain's " + std::to_string(dom));
      }
      if (mine == dom) {
        st[k] = dom == 1 ? 0 : own_stride[lead.size() - 1 - j];
        any = any || st[k] != 0;
      } else {
        exact = false;
      }
    } else if (dom != 1) {
      exact = false;
    }
  }
  t.mode = 0;
  if (!any) {
    t.stride = 0;
    return t;
  }
  if (exact) {
    t.stride = inner;
    return t;
  }
  // General broadcast: coalesce (size, stride) pairs, dropping size-1 dims.
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t k = 0; k < L.size(); k++) {
    if (L[k] == 1) continue;
    if (!dims.empty()) {
      auto& [ps, pst] = dims.back();
      if (pst == st[k] * L[k]) {
        ps *= L[k];
        pst = st[k];
        continue;
      }
    }
    dims.push_back({L[k], st[k]});
  }
  if (dims.size() > UBF_MAX_ROW_DIMS) {
    fail(p, "'" + name + "' broadcasts over more than " + std::to_string(UBF_MAX_ROW_DIMS) +
                " independent leading dims");
  }
  t.mode = 1;
  t.ndims = int32_t(dims.size());
  for (size_t i = 0; i < dims.size(); i++) {
    t.sizes[i] = dims[i].first;
    t.strides[i] = dims[i].second;
  }
  return t;
}

}  // namespace

RowReads row_reads(const kir::Program& p) {
  RowReads r;
  r.drop.assign(p.inputs.size(), -1);
  r.columns.assign(p.inputs.size(), 0);
  for (size_t e = 0; e < p.exprs.size(); e++) {
    const kir::Expr& x = p.exprs[e];
    if (x.op != kir::Op::Load || !p.needed[e]) continue;
    r.drop[size_t(x.arg)] = x.align == kir::Align::RowDrop ? 1 : 0;
    if (kir::reads_row_columns(x.align)) {
      r.columns[size_t(x.arg)] = 1;
      if (r.col_input < 0) r.col_input = x.arg;
    }
    if (kir::is_rotation(x.align)) r.rot_columns = std::max(r.rot_columns, int64_t(x.imm));
  }
  return r;
}

void make_row_args(const kir::Program& p, const RowReads& r, const std::vector<Tensor>& in,
                   const std::vector<Tensor>& out, RowArgs& ra) {
  UBF_CHECK(
      in.size() == p.inputs.size() && out.size() == p.outputs.size() && r.drop.size() == in.size(),
      "fused kernel " + p.name + ": tensor count");
  const size_t n = size_t(p.domain_rank);
  const std::vector<int8_t>& drop = r.drop;
  const int col_input = r.col_input;
  // The domain: a column output has its sizes; else row outputs give the leading dims and a
  // column input the row length.
  Sizes& D = ra.domain;
  D.clear();
  bool have = false;
  for (size_t o = 0; o < out.size() && !have; o++) {
    if (!p.exprs[size_t(p.outputs[o].expr)].row) {
      D = out[o].sizes();
      have = true;
    }
  }
  if (!have && n > 0) {
    for (size_t o = 0; o < out.size() && !have; o++) {
      const Sizes& s = out[o].sizes();
      D.assign(s.begin(), s.begin() + int64_t(std::min(s.size(), n - 1)));
      have = true;
    }
    int64_t cols = 1;
    if (col_input >= 0 && in[size_t(col_input)].rank() > 0) cols = in[size_t(col_input)].dim(-1);
    D.push_back(cols);
  }
  if (D.size() != n) {
    fail(p, "output sizes " + sizes_str(out.empty() ? Sizes{} : out[0].sizes()) +
                " do not have the domain's rank " + std::to_string(n));
  }
  const int64_t cols = n ? D.back() : 1;
  if (cols < r.rot_columns) {
    fail(p, "rows of " + std::to_string(cols) + " columns are shorter than the " +
                std::to_string(r.rot_columns) + " a rotation reads");
  }
  const Sizes L = n ? Sizes(D.begin(), D.end() - 1) : Sizes{};
  const int64_t rows = numel(L);
  ra.in.assign(in.size(), UbfTensorArg{});
  ra.out.assign(out.size(), UbfTensorArg{});
  for (size_t i = 0; i < in.size(); i++) {
    const Tensor& t = in[i];
    const std::string& name = p.inputs[i].value->name;
    if (drop[i] < 0) {
      ra.in[i].data = t.data();
      continue;
    }
    Sizes lead = t.sizes();
    int64_t inner = 1;
    if (drop[i] == 0 && !lead.empty()) {
      inner = lead.back();
      lead.pop_back();
      const bool col = r.columns[i] != 0;
      if (col && inner != cols && n > 0) {
        fail(p, "input '" + name + "' " + sizes_str(t.sizes()) + " has rows of " +
                    std::to_string(inner) + " but the domain " + sizes_str(D) + " has " +
                    std::to_string(cols));
      }
      if (!col && inner != 1) {
        fail(p, "input '" + name + "' " + sizes_str(t.sizes()) + " should have last dim 1");
      }
    }
    ra.in[i] = row_map(p, name, lead, inner, L, p.inputs[i].row_perm, t.data());
  }
  for (size_t o = 0; o < out.size(); o++) {
    const Tensor& t = out[o];
    bool row = p.exprs[size_t(p.outputs[o].expr)].row;
    if (row ? t.numel() != rows : t.sizes() != D) {
      fail(p, "output '" + p.outputs[o].value->name + "' is " + sizes_str(t.sizes()) +
                  " for the domain " + sizes_str(D));
    }
    ra.out[o].data = t.data();
    ra.out[o].mode = 0;
    ra.out[o].stride = row ? 1 : cols;
  }
  ra.args = UbfKernelArgs{};
  ra.args.rows = rows;
  ra.args.cols = cols;
  ra.args.use_ub = 1;
  ra.args.slot_floats = kir::slot_floats(cols);
  ra.args.in = ra.in.data();
  ra.args.out = ra.out.data();
}

}  // namespace ubfuse
