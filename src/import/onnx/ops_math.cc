// Elementwise arithmetic, comparisons, logic, casts: mostly one ubfuse op each. Integer vectors
// that carry symbolic dims (shape arithmetic) are combined here symbolically where they can be.
// The unary math ops that import 1:1 need no converter here (ops.def's Onnx column Direct,
// registry.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "import/onnx/registry.h"

namespace ubfuse::onnx_import {

namespace {

// Broadcast two rank-0/1 dims vectors; nullopt when their lengths clash.
bool broadcast_dims(const std::vector<Dim>& a, const std::vector<Dim>& b, size_t* n) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return false;
  *n = std::max(a.size(), b.size());
  return true;
}

// Whether input i is known element by element at import: a shape vector or a constant.
bool known_ints(NodeCtx& c, int i) { return bool(c.input(i).dims) || c.is_const(i); }

const Dim& at(const std::vector<Dim>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; }

// Shape arithmetic on vectors holding symbolic dims. Returns false when no input is symbolic.
bool dims_binary(NodeCtx& c, OpKind k) {
  if (!c.input(0).dims && !c.input(1).dims) return false;
  // With a run-time operand it is ordinary arithmetic on the materialized vector.
  if (!known_ints(c, 0) || !known_ints(c, 1)) return false;
  auto a = c.dims_input(0, "shape operand"), b = c.dims_input(1, "shape operand");
  size_t n = 0;
  if (!broadcast_dims(a, b, &n)) c.invalid("shape operands of lengths that do not broadcast");
  bool scalar = c.rank(0) == 0 && c.rank(1) == 0;
  std::vector<Dim> out;
  for (size_t i = 0; i < n; i++) {
    const Dim& x = at(a, i);
    const Dim& y = at(b, i);
    if (x.is_static() && y.is_static()) {
      int64_t p = x.value(), q = y.value();
      if (k == OpKind::Add) {
        out.push_back(Dim(p + q));
      } else if (k == OpKind::Sub) {
        out.push_back(Dim(p - q));
      } else if (k == OpKind::Mul) {
        out.push_back(Dim(p * q));
      } else if (k == OpKind::Div) {
        if (q == 0) c.invalid("division by zero in shape arithmetic");
        out.push_back(Dim(p / q));
      } else {
        c.needs_static(a, "this shape computation");
      }
    } else if (k == OpKind::Add) {
      out.push_back(Dim::add(x, y));
    } else if (k == OpKind::Sub) {
      out.push_back(Dim::sub(x, y));
    } else if (k == OpKind::Mul) {
      out.push_back(Dim::mul(x, y));
    } else if (auto q = k == OpKind::Div && y.is_static() && y.value() > 0
                            ? Dim::floordiv(x, y.value())
                            : std::nullopt;
               q && Dim::mul(*q, y) == x) {
      out.push_back(*q);  // exact, so ONNX's truncating division agrees with the floor
    } else {
      std::vector<Dim> both = a;
      both.insert(both.end(), b.begin(), b.end());
      c.needs_static(both, "this shape computation");
    }
  }
  c.set_output_dims(0, out, scalar, c.dtype(0));
  return true;
}

// True when d > 0 or d < 0 for every value >= 0 of its symbols (sizes are never negative): its
// coefficients all share the sign of a nonzero constant term.
bool never_zero(const Dim& d) {
  auto terms = d.terms();
  if (terms.empty() || !terms.back().factors.empty()) return false;  // needs a constant term
  int64_t sign = terms.back().coef > 0 ? 1 : -1;
  for (auto& t : terms) {
    if ((t.coef > 0 ? 1 : -1) != sign) return false;
  }
  return true;
}

// Equal on symbolic shape vectors: decidable when the dims are the same polynomial or their
// difference is never zero (seq+1 vs seq, seq vs -1).
bool dims_equal(NodeCtx& c) {
  if (!c.input(0).dims && !c.input(1).dims) return false;
  auto a = c.dims_input(0, "shape operand"), b = c.dims_input(1, "shape operand");
  size_t n = 0;
  if (!broadcast_dims(a, b, &n)) c.invalid("shape operands of lengths that do not broadcast");
  Tensor t(DType::boolean, c.rank(0) == 0 && c.rank(1) == 0 ? Sizes{} : Sizes{int64_t(n)});
  for (size_t i = 0; i < n; i++) {
    const Dim& x = at(a, i);
    const Dim& y = at(b, i);
    bool eq;
    if (x == y) {
      eq = true;
    } else if (x.is_static() && y.is_static()) {
      eq = false;
    } else if (never_zero(Dim::sub(x, y))) {
      eq = false;
    } else {
      c.needs_static({x, y}, "comparing shape values");
    }
    t.data_as<uint8_t>()[i] = eq;
  }
  c.set_output_const(0, t);
  return true;
}

// The second operand of a binary op. Opsets before 7 broadcast only where the node says so:
// with `broadcast` = 1, B's dims match a run of A's that starts at `axis` (when given) or ends
// with A's last; without it, A and B have one shape. Returns B reshaped to that alignment, or
// null from opset 7 on (numpy's rules: no attributes).
Value* legacy_operand_b(NodeCtx& c) {
  if (c.opset() >= 7) return nullptr;
  const int64_t ra = c.rank(0), rb = c.rank(1);
  const Shape &a = c.shape(0), &b = c.shape(1);
  const bool axis_given = c.has_attr("axis");
  const int64_t axis = axis_given ? c.norm_axis(c.attr_int("axis", 0), ra, "axis") : ra - rb;
  if (c.attr_int("broadcast", 0) == 0) {
    if (axis_given) c.invalid("has 'axis' but not 'broadcast' = 1");
    bool differ = ra != rb;
    for (int64_t i = 0; !differ && i < ra; i++) {
      differ = a[size_t(i)].is_static() && b[size_t(i)].is_static() && a[size_t(i)] != b[size_t(i)];
    }
    if (differ) {
      c.invalid("inputs of shapes " + shape_str(a) + " and " + shape_str(b) +
                " differ; hint: opsets before 7 broadcast only with attribute broadcast = 1");
    }
    return c.value(1);
  }
  if (axis < 0 || axis + rb > ra) {
    c.invalid("B " + shape_str(b) + " does not fit A " + shape_str(a) + " from axis " +
              std::to_string(axis));
  }
  for (int64_t i = 0; i < rb; i++) {
    const Dim &x = a[size_t(axis + i)], &y = b[size_t(i)];
    if (!(y.is_static() && y.value() == 1) && x != y) {
      c.invalid("B " + shape_str(b) + " does not match A " + shape_str(a) + " from axis " +
                std::to_string(axis) + " (dim " + std::to_string(i) + ")");
    }
  }
  Shape target = b;
  while (int64_t(target.size()) < ra - axis) target.emplace_back(1);
  return target == b ? c.value(1) : c.reshape_to(c.value(1), target);
}

template <OpKind K>
void arith(NodeCtx& c) {
  Value* b = legacy_operand_b(c);
  if (!b && dims_binary(c, K)) return;
  if (c.dtype(0) == DType::boolean) c.unsupported("arithmetic on bool tensors");
  c.set_output(0, c.emit(K, {c.value(0), b ? b : c.value(1)}));
}

template <OpKind K, bool kNegate>
void compare(NodeCtx& c) {
  Value* b = legacy_operand_b(c);
  if (K == OpKind::Equal && !kNegate && !b && dims_equal(c)) return;
  Value* v = c.emit(K, {c.value(0), b ? b : c.value(1)});
  if (kNegate) v = c.emit(OpKind::Not, {v});  // a <= b as !(a > b): differs only for NaN
  c.set_output(0, v);
}

void require_bool(NodeCtx& c) {
  for (int i = 0; i < c.num_inputs(); i++) {
    if (c.dtype(i) != DType::boolean) c.invalid("inputs must be bool");
  }
}

Value* operand_b(NodeCtx& c) {
  Value* b = legacy_operand_b(c);
  return b ? b : c.value(1);
}

void logical_and(NodeCtx& c) {
  require_bool(c);
  Value* a = c.value(0);
  Value* b = operand_b(c);
  c.set_output(0, c.emit(OpKind::Where, {a, b, c.scalar(0, DType::boolean)}));
}

void logical_or(NodeCtx& c) {
  require_bool(c);
  Value* a = c.value(0);
  Value* b = operand_b(c);
  c.set_output(0, c.emit(OpKind::Where, {a, c.scalar(1, DType::boolean), b}));
}

void logical_xor(NodeCtx& c) {
  require_bool(c);
  Value* eq = c.emit(OpKind::Equal, {c.value(0), operand_b(c)});
  c.set_output(0, c.emit(OpKind::Not, {eq}));
}

template <OpKind K>
void variadic(NodeCtx& c) {
  if (c.num_inputs() < 1) c.invalid("needs at least one input");
  Value* acc = c.value(0);
  for (int i = 1; i < c.num_inputs(); i++) acc = c.emit(K, {acc, c.value(i)});
  if (c.num_inputs() == 1) acc = c.reshape_to(acc, acc->shape);  // a copy, not an alias
  c.set_output(0, acc);
}

void mean(NodeCtx& c) {
  require_float(c, 0);
  if (c.num_inputs() < 1) c.invalid("needs at least one input");
  Value* acc = c.value(0);
  for (int i = 1; i < c.num_inputs(); i++) acc = c.emit(OpKind::Add, {acc, c.value(i)});
  c.set_output(0, c.emit(OpKind::Div, {acc, scalar_like(c, c.num_inputs(), acc)}));
}

void where(NodeCtx& c) {
  // Where over shape vectors (PyTorch's expand/reshape prologues): select element-wise.
  if (c.is_const(0) && (c.input(1).dims || c.input(2).dims) && known_ints(c, 1) &&
      known_ints(c, 2)) {
    const Tensor& cond = c.const_input(0, "condition");
    auto a = c.dims_input(1, "shape operand"), b = c.dims_input(2, "shape operand");
    if (cond.rank() <= 1) {
      size_t n = std::max({size_t(cond.numel()), a.size(), b.size()});
      std::vector<Dim> out;
      for (size_t i = 0; i < n; i++) {
        bool s = cond.numel() == 1 ? cond.get(0) != 0 : cond.get(int64_t(i)) != 0;
        out.push_back(s ? at(a, i) : at(b, i));
      }
      c.set_output_dims(0, out, cond.rank() == 0 && c.rank(1) == 0 && c.rank(2) == 0, c.dtype(1));
      return;
    }
  }
  if (c.dtype(0) != DType::boolean) c.invalid("condition must be bool");
  c.set_output(0, c.emit(OpKind::Where, {c.value(0), c.value(1), c.value(2)}));
}

void cast_to(NodeCtx& c, DType to) {
  const IValue& x = c.input(0);
  if (x.dtype == to) {
    c.set_output_like(0, x);
    return;
  }
  if (x.dims && (to == DType::i64 || to == DType::i32)) {
    c.set_output_dims(0, *x.dims, x.shape.empty(), to);
    return;
  }
  c.set_output(0, c.emit(OpKind::Cast, {c.value(0)}, {{"to", std::string(dtype_name(to))}}));
}

void cast(NodeCtx& c) {
  int64_t to = c.attr_int("to", -1);
  if (to < 0) c.invalid("attribute 'to' is required");
  if (c.has_attr("saturate")) c.attr_int("saturate", 1);
  cast_to(c, dtype_from_onnx(int32_t(to), c.where() + ": attribute 'to'"));
}

void cast_like(NodeCtx& c) { cast_to(c, c.dtype(1)); }

// A constant exponent of one value for every element that does not widen the base: ubfuse's
// Pow (a scalar attribute, the form the canonicalize pass reads: x^2 in a norm's variance).
std::optional<double> scalar_exponent(NodeCtx& c) {
  const IValue& e = c.input(1);
  if (!is_float(c.dtype(0)) || !e.konst.defined()) return std::nullopt;
  double v = e.konst.numel() ? e.konst.get(0) : 1.0;
  for (int64_t i = 1; i < e.konst.numel(); i++) {
    if (e.konst.get(i) != v) return std::nullopt;
  }
  const Shape& xs = c.shape(0);
  if (e.konst.rank() > int64_t(xs.size())) return std::nullopt;
  for (int i = 0; i < e.konst.rank(); i++) {
    int64_t d = e.konst.sizes()[size_t(e.konst.rank() - 1 - i)];
    const Dim& xd = xs[xs.size() - 1 - size_t(i)];
    if (d != 1 && !(xd.is_static() && xd.value() == d)) return std::nullopt;
  }
  return v;
}

// Pow(x, y): the result has x's dtype, y may have another (ONNX's T and T1); ubfuse's PowTensor
// takes one. Two dtypes, one of them float, compute in f32 and cast to x's: a float x rounds
// once, as PowTensor of its own dtype does (an integer y is exact below 2^24, and larger powers
// of anything but +-1 are 0 or inf anyway); an integer x truncates, as ONNX's reference (numpy's
// power in float64, then a cast) does, exact where x and the power are below 2^24. Integers of
// two widths: y is cast to x's.
void pow(NodeCtx& c) {
  const DType xt = c.dtype(0), yt = c.dtype(1);
  if (xt == DType::boolean || yt == DType::boolean) c.unsupported("Pow on bool tensors");
  Value* legacy_y = legacy_operand_b(c);
  if (auto e = scalar_exponent(c)) {
    c.set_output(0, c.emit(OpKind::Pow, {c.value(0)}, {{"exponent", *e}}));
    return;
  }
  Value* x = c.value(0);
  Value* y = legacy_y ? legacy_y : c.value(1);
  Value* out;
  if (xt == yt) {
    out = c.emit(OpKind::PowTensor, {x, y});
  } else if (is_float(xt) || is_float(yt)) {
    Value* p =
        c.emit(OpKind::PowTensor, {cast_value(c, x, DType::f32), cast_value(c, y, DType::f32)});
    out = cast_value(c, p, xt);
  } else {
    out = c.emit(OpKind::PowTensor, {x, cast_value(c, y, xt)});  // integers of two widths
  }
  c.set_output(0, out);
}

// Mod(a, b, fmod): fmod=0 is Mod (the sign of b; ONNX allows it for integers only, numpy's mod
// for floats), fmod=1 Fmod (the sign of a, C's fmod and %).
void mod(NodeCtx& c) {
  const int64_t f = c.attr_int("fmod", 0);
  if (f != 0 && f != 1) c.invalid("attribute 'fmod' must be 0 or 1, got " + std::to_string(f));
  if (c.dtype(0) == DType::boolean) c.unsupported("Mod on bool tensors");
  c.set_output(0, c.emit(f ? OpKind::Fmod : OpKind::Mod, {c.value(0), c.value(1)}));
}

// IsInf(x, detect_positive, detect_negative): ubfuse's IsInf detects both; one sign alone is
// Equal(x, +-inf), and neither Equal(x, NaN), false everywhere.
void is_inf(NodeCtx& c) {
  require_float(c, 0);
  const bool pos = c.attr_int("detect_positive", 1) != 0;
  const bool neg = c.attr_int("detect_negative", 1) != 0;
  Value* x = c.value(0);
  if (pos && neg) {
    c.set_output(0, c.emit(OpKind::IsInf, {x}));
    return;
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double v = pos ? inf : neg ? -inf : std::numeric_limits<double>::quiet_NaN();
  c.set_output(0, c.emit(OpKind::Equal, {x, scalar_like(c, v, x)}));
}

void clip(NodeCtx& c) {
  Value* x = c.value(0);
  if (c.dtype(0) == DType::boolean) c.unsupported("Clip on bool");
  Value* lo = nullptr;
  Value* hi = nullptr;
  if (c.opset() < 11) {
    if (c.has_attr("min")) lo = scalar_like(c, c.attr_float("min", 0), x);
    if (c.has_attr("max")) hi = scalar_like(c, c.attr_float("max", 0), x);
  } else {
    if (c.has_input(1)) lo = c.value(1);
    if (c.has_input(2)) hi = c.value(2);
  }
  if (lo && !lo->shape.empty() && !(lo->shape.size() == 1 && lo->shape[0] == Dim(1))) {
    c.invalid("'min' must be a scalar");
  }
  if (hi && !hi->shape.empty() && !(hi->shape.size() == 1 && hi->shape[0] == Dim(1))) {
    c.invalid("'max' must be a scalar");
  }
  Value* y = x;
  if (lo) y = c.emit(OpKind::Max, {y, lo});
  if (hi) y = c.emit(OpKind::Min, {y, hi});
  if (y == x) y = c.reshape_to(x, x->shape);
  c.set_output(0, y);
}

// HannWindow, HammingWindow, BlackmanWindow(size): a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
// for n < size, N = size (periodic) or size - 1, computed in f32 from a Range over the size, which
// may arrive at run time.
template <int kWindow>  // 0 Hann, 1 Hamming, 2 Blackman
void window(NodeCtx& c) {
  if (c.dtype(0) != DType::i64 && c.dtype(0) != DType::i32)
    c.invalid("size must be int32 or int64");
  const DType out = dtype_from_onnx(int32_t(c.attr_int("output_datatype", 1)),
                                    c.where() + ": attribute 'output_datatype'");
  if (!is_float(out)) c.unsupported("output_datatype " + std::string(dtype_name(out)));
  const bool periodic = c.attr_int("periodic", 1) != 0;
  Value* size = c.value(0);
  if (!size->shape.empty()) size = c.reshape_to(size, {});
  const DType it = size->dtype;
  Value* n =
      cast_value(c, c.emit(OpKind::Range, {c.scalar(0, it), size, c.scalar(1, it)}), DType::f32);
  Value* len = cast_value(c, size, DType::f32);
  if (!periodic) len = c.emit(OpKind::Sub, {len, c.scalar(1, DType::f32)});
  Value* angle =
      c.emit(OpKind::Mul,
             {n, c.emit(OpKind::Div, {c.scalar(2 * 3.14159265358979323846, DType::f32), len})});
  const double a0 = kWindow == 0 ? 0.5 : kWindow == 1 ? 25.0 / 46 : 0.42;
  const double a1 = kWindow == 0 ? 0.5 : kWindow == 1 ? 21.0 / 46 : 0.5;
  auto term = [&](double a, Value* v) {
    return c.emit(OpKind::Mul, {c.scalar(a, DType::f32), c.emit(OpKind::Cos, {v})});
  };
  Value* y = c.emit(OpKind::Sub, {c.scalar(a0, DType::f32), term(a1, angle)});
  if (kWindow == 2) {
    y = c.emit(OpKind::Add, {y, term(0.08, c.emit(OpKind::Add, {angle, angle}))});
  }
  c.set_output(0, cast_value(c, y, out));
}

// Det of [..., M, M] for M up to 3, by its cofactor expansion over the matrix's elements (Slices):
// exact arithmetic on a handful of products, where a factorization would bring pivoting.
void det(NodeCtx& c) {
  require_float(c, 0);
  Value* x = c.value(0);
  const Shape s = x->shape;
  const size_t r = s.size();
  if (r < 2 || s[r - 1] != s[r - 2] || !s[r - 1].is_static()) {
    c.invalid("X must be [..., M, M] with a fixed M, got " + shape_str(s));
  }
  const int64_t m = s[r - 1].value();
  if (m < 1 || m > 3) {
    c.unsupported("Det of " + std::to_string(m) + "x" + std::to_string(m) +
                  " matrices (1x1 to 3x3 are supported)");
  }
  const int64_t rows = int64_t(r) - 2, cols = int64_t(r) - 1;
  auto e = [&](int64_t i, int64_t j) {
    return slice_axis(c, slice_axis(c, x, rows, i, i + 1), cols, j, j + 1);
  };
  auto mul = [&](Value* a, Value* b) { return c.emit(OpKind::Mul, {a, b}); };
  auto minor2 = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {  // a d - b c
    return c.emit(OpKind::Sub, {mul(e(i0, j0), e(i1, j1)), mul(e(i0, j1), e(i1, j0))});
  };
  Value* d = nullptr;
  if (m == 1) {
    d = x;
  } else if (m == 2) {
    d = minor2(0, 1, 0, 1);
  } else {
    d = c.emit(
        OpKind::Add,
        {c.emit(OpKind::Sub, {mul(e(0, 0), minor2(1, 2, 1, 2)), mul(e(0, 1), minor2(1, 2, 0, 2))}),
         mul(e(0, 2), minor2(1, 2, 0, 1))});
  }
  c.set_output(0, c.reshape_to(d, Shape(s.begin(), s.end() - 2)));
}

}  // namespace

void add_math_ops(ConverterMap& m) {
  m["Det"] = det;
  m["HannWindow"] = window<0>;
  m["HammingWindow"] = window<1>;
  m["BlackmanWindow"] = window<2>;
  m["Add"] = arith<OpKind::Add>;
  m["Sub"] = arith<OpKind::Sub>;
  m["Mul"] = arith<OpKind::Mul>;
  m["Div"] = arith<OpKind::Div>;
  m["Equal"] = compare<OpKind::Equal, false>;
  m["Less"] = compare<OpKind::Less, false>;
  m["Greater"] = compare<OpKind::Greater, false>;
  m["LessOrEqual"] = compare<OpKind::Greater, true>;
  m["GreaterOrEqual"] = compare<OpKind::Less, true>;
  m["And"] = logical_and;
  m["Or"] = logical_or;
  m["Xor"] = logical_xor;
  m["Max"] = variadic<OpKind::Max>;
  m["Min"] = variadic<OpKind::Min>;
  m["Sum"] = variadic<OpKind::Add>;
  m["Mean"] = mean;
  m["Where"] = where;
  m["Cast"] = cast;
  m["CastLike"] = cast_like;
  m["Pow"] = pow;
  m["Mod"] = mod;
  m["IsInf"] = is_inf;
  m["Clip"] = clip;
}

}  // namespace ubfuse::onnx_import
