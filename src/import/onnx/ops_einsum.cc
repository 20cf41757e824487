// Einsum in the forms exporters write: one operand (a transpose) or two operands whose letters
// are batch (in both and the output), contracted (in both, not the output) or free (in one and
// the output). Two operands lower to Transposes, Reshapes and one MatMul, or a broadcast Mul
// when nothing is contracted (PyTorch's outer product "i,j->ij" of rotary positions).
#include <algorithm>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

struct Equation {
  std::vector<std::string> in;
  std::string out;
};

Equation parse(NodeCtx& c, std::string eq, int operands) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos) c.unsupported("equation '" + eq + "' uses '...'");
  Equation e;
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  for (size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1) {
    e.in.push_back(lhs.substr(start, comma - start));
  }
  e.in.push_back(lhs.substr(start));
  if (int(e.in.size()) != operands) {
    c.invalid("equation '" + eq + "' names " + std::to_string(e.in.size()) + " operands for " +
              std::to_string(operands) + " inputs");
  }
  if (arrow != std::string::npos) {
    e.out = eq.substr(arrow + 2);
  } else {  // implicit output: the letters used once, in alphabetical order
    std::string all;
    for (auto& s : e.in) all += s;
    for (char ch = 'A'; ch <= 'z'; ch++) {
      if (std::count(all.begin(), all.end(), ch) == 1) e.out += ch;
    }
  }
  for (size_t i = 0; i < e.in.size(); i++) {
    const std::string& s = e.in[i];
    for (char ch : s) {
      if (!std::isalpha(static_cast<unsigned char>(ch))) {
        c.invalid("equation '" + eq + "': '" + std::string(1, ch) + "' is not a letter");
      }
      if (std::count(s.begin(), s.end(), ch) > 1) {
        c.unsupported("equation '" + eq + "' repeats '" + std::string(1, ch) +
                      "' in one operand (a diagonal)");
      }
    }
    if (int64_t(s.size()) != c.rank(int(i))) {
      c.invalid("equation '" + eq + "': operand " + std::to_string(i) + " has " +
                std::to_string(s.size()) + " letters but rank " + std::to_string(c.rank(int(i))));
    }
  }
  for (char ch : e.out) {
    bool found = false;
    for (auto& s : e.in) found = found || s.find(ch) != std::string::npos;
    if (!found)
      c.invalid("equation '" + eq + "': output letter '" + std::string(1, ch) +
                "' is in no operand");
  }
  return e;
}

std::vector<int64_t> perm_of(const std::string& from, const std::string& to) {
  std::vector<int64_t> p;
  for (char ch : to) p.push_back(int64_t(from.find(ch)));
  return p;
}

Value* transpose_labels(NodeCtx& c, Value* x, const std::string& from, const std::string& to) {
  if (from == to) return x;
  return c.emit(OpKind::Transpose, {x}, {{"perm", perm_of(from, to)}});
}

Dim product(const Shape& s, const std::string& letters, const std::string& order) {
  Dim p(int64_t(1));
  for (char ch : letters) p = Dim::mul(p, s[order.find(ch)]);
  return p;
}

void einsum(NodeCtx& c) {
  const int n = c.num_inputs();
  if (n != 1 && n != 2)
    c.unsupported("takes " + std::to_string(n) + " operands; 1 or 2 are supported");
  for (int i = 0; i < n; i++) require_float(c, i);
  Equation e = parse(c, c.attr_str("equation", ""), n);
  if (n == 1) {
    if (e.in[0].size() != e.out.size()) {
      c.unsupported("equation sums letters of its one operand; only transposes are supported");
    }
    c.set_output(0, transpose_labels(c, c.value(0), e.in[0], e.out));
    return;
  }
  if (c.dtype(0) != c.dtype(1)) c.invalid("operands have different dtypes");
  const std::string &a = e.in[0], &b = e.in[1], &o = e.out;
  std::string batch, contr, fa, fb;
  for (char ch : a) {
    bool in_b = b.find(ch) != std::string::npos, in_o = o.find(ch) != std::string::npos;
    if (in_b && in_o)
      batch += ch;
    else if (in_b)
      contr += ch;
    else if (in_o)
      fa += ch;
    else
      c.unsupported("letter '" + std::string(1, ch) + "' is summed within operand 0");
  }
  for (char ch : b) {
    if (a.find(ch) != std::string::npos) continue;
    if (o.find(ch) == std::string::npos) {
      c.unsupported("letter '" + std::string(1, ch) + "' is summed within operand 1");
    }
    fb += ch;
  }
  const Shape &sa = c.shape(0), &sb = c.shape(1);
  for (char ch : batch + contr) {
    if (sa[a.find(ch)] != sb[b.find(ch)]) {
      c.unsupported("letter '" + std::string(1, ch) + "' has sizes " + sa[a.find(ch)].str() +
                    " and " + sb[b.find(ch)].str() + "; broadcasting in Einsum is not supported");
    }
  }
  // A as [batch..., M, K], B as [batch..., K, N]; the product is [batch..., M, N].
  Shape bs;
  for (char ch : batch) bs.push_back(sa[a.find(ch)]);
  Dim m = product(sa, fa, a), k = product(sa, contr, a), nn = product(sb, fb, b);
  Value* x = transpose_labels(c, c.value(0), a, batch + fa + contr);
  Value* w = transpose_labels(c, c.value(1), b, batch + contr + fb);
  Shape sx = bs, sw = bs;
  sx.push_back(m);
  sx.push_back(k);
  sw.push_back(k);
  sw.push_back(nn);
  x = c.reshape_to(x, sx);
  w = c.reshape_to(w, sw);
  Value* y = contr.empty() ? c.emit(OpKind::Mul, {x, w})  // [.., M, 1] * [.., 1, N]
                           : c.emit(OpKind::MatMul, {x, w});
  Shape sy = bs;
  for (char ch : fa) sy.push_back(sa[a.find(ch)]);
  for (char ch : fb) sy.push_back(sb[b.find(ch)]);
  y = c.reshape_to(y, sy);
  c.set_output(0, transpose_labels(c, y, batch + fa + fb, o));
}

}  // namespace

void add_einsum_ops(ConverterMap& m) { m["Einsum"] = einsum; }

}  // namespace ubfuse::onnx_import
