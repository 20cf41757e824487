// Lowering of a FusedGroup to the kernel IR: every member node becomes a few primitive
// expressions over the group's domain; row ops are decomposed (see kernel_ir.h). Anything the IR
// cannot express (integer dtypes, shapes that are neither the domain nor its per-row form) makes
// lowering fail with a reason, and the group then runs op by op.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include "codegen/kernel_ir.h"
#include "fusion/group.h"
#include "ir/views.h"

namespace ubfuse::kir {

namespace {

// The least x - max for which ExpInRangeIf may skip exp's range test (ExpInRangeF, vecmath.h).
constexpr float kExpInRangeMin = -87.0f;

// The norms' second statistics, for rows whose sum of squares passes 2^100, are taken on values
// scaled by this: every |x - c| of finite x and c (below 2^129) then has a square below 2^98, so
// rows of up to 2^30 columns cannot overflow, and a row's sum of squares past 2^100 stays a
// normal float (2^-60 and up). 2^-64 overflowed for rows spread near FLT_MAX.
constexpr double kRescueScale = 0x1p-80;

// How a shape relates to the domain.
// RowAny: all dims 1 (or none), the same value for every row and column.
enum class Form { Col, RowKeep, RowDrop, RowAny, Other };

struct Fail {
  std::string why;
};

class Lowerer {
 public:
  explicit Lowerer(const FusedGroup& g) : g_(g), dom_(g.domain) {}

  std::unique_ptr<Program> run() {
    prog_ = std::make_unique<Program>();
    prog_->name = g_.name;
    prog_->domain_rank = int(dom_.size());
    for (const Value* v : g_.inputs) {
      if (!int32_cast_input(v) && !head_operand(v)) check_dtype(v, "input");
      prog_->inputs.push_back({v, v->dtype, is_vector(v->shape), false, {}});
    }
    for (const Node* n : g_.nodes) {
      prog_->node_ops.emplace_back(op_name(n->op));
      // A MatMul's (Conv's, DynamicQuantMatMul's) output is computed by its own kernel and read as
      // one more input.
      if (fusion::heads_epilogue(n)) {
        const Value* m = n->out();
        const std::string what = "the " + std::string(op_name(n->op)) + " output";
        if (form(m->shape) != Form::Col) throw Fail{what + " is not the domain"};
        check_dtype(m, what.c_str());
        prog_->inputs.push_back({m, m->dtype, false, true, {}});
        Expr e;
        e.op = Op::Load;
        e.arg = int(prog_->inputs.size()) - 1;
        e.note = n->name;
        val_[m] = add(e);
        continue;
      }
      lower_node(*n);
    }
    for (const Value* v : g_.outputs) {
      auto it = val_.find(v);
      if (it == val_.end()) throw Fail{"output '" + v->name + "' is not computed by the group"};
      check_dtype(v, "output");
      const Expr& e = prog_->exprs[size_t(it->second)];
      Shape keep = dom_, drop;
      if (!dom_.empty()) {
        keep.back() = Dim(int64_t(1));
        drop.assign(dom_.begin(), dom_.end() - 1);
      }
      bool exact = e.row ? (v->shape == keep || v->shape == drop) : v->shape == dom_;
      if (dom_.empty()) exact = v->shape.empty();
      if (!exact) {
        throw Fail{"output '" + v->name + "' has shape " + shape_str(v->shape) +
                   ", neither the domain " + shape_str(dom_) + " nor its per-row form"};
      }
      prog_->outputs.push_back({v, v->dtype, it->second});
    }
    canonicalize_order(*prog_);
    analyze(*prog_);
    return std::move(prog_);
  }

 private:
  // Read only by the group's MatMul (Conv, DynamicQuantMatMul...), whose own kernel reads it (int8
  // weights), never the generated code.
  bool head_operand(const Value* v) const {
    bool any = false;
    for (const Node* n : g_.nodes) {
      for (const Value* in : n->inputs) {
        if (in != v) continue;
        if (!fusion::heads_epilogue(n)) return false;
        any = true;
      }
    }
    return any;
  }

  // An i32 input that the group only casts to f32 (MatMulInteger's output rescaled in its
  // epilogue): loaded with the conversion, which rounds as the Cast does, so the Cast is free.
  bool int32_cast_input(const Value* v) const {
    if (v->dtype != DType::i32) return false;
    for (const Node* n : g_.nodes) {
      for (const Value* in : n->inputs) {
        if (in == v && !(n->op == OpKind::Cast && n->out()->dtype == DType::f32)) return false;
      }
    }
    return true;
  }

  void check_dtype(const Value* v, const char* what) {
    if (!is_float(v->dtype) && v->dtype != DType::boolean) {
      throw Fail{std::string(what) + " '" + v->name + "' is " + std::string(dtype_name(v->dtype)) +
                 "; fused kernels compute f32, bf16, f16, bool"};
    }
  }

  Form form(const Shape& s) const {
    if (dom_.empty()) return s.empty() ? Form::Col : Form::Other;
    if (s == dom_) return Form::Col;
    Shape keep = dom_;
    keep.back() = Dim(int64_t(1));
    if (s == keep) return Form::RowKeep;
    if (s == Shape(dom_.begin(), dom_.end() - 1)) return Form::RowDrop;
    // A value that broadcasts to the domain (a member computed on broadcast inputs) is computed
    // at the domain's granularity: per element, per row, or once.
    if (s.size() > dom_.size()) return Form::Other;
    bool ones = true;
    for (size_t i = 0; i < s.size(); i++) {
      const Dim& a = s[s.size() - 1 - i];
      const Dim& b = dom_[dom_.size() - 1 - i];
      bool one = a.is_static() && a.value() == 1;
      if (!(a == b || one)) return Form::Other;
      ones = ones && one;
    }
    if (ones) return Form::RowAny;
    bool last_one = s.back().is_static() && s.back().value() == 1;
    return last_one ? Form::RowKeep : Form::Col;
  }

  // Statically the same data for every row: all dims but the last are 1 (or absent).
  static bool is_vector(const Shape& s) {
    for (size_t i = 0; i + 1 < s.size(); i++) {
      if (!(s[i].is_static() && s[i].value() == 1)) return false;
    }
    return true;
  }

  int add(const Expr& e) {
    auto key =
        std::make_tuple(int(e.op), e.row, e.a, e.b, e.c, e.arg, int(e.align), e.imm, e.guard);
    auto it = cse_.find(key);
    if (it != cse_.end()) return it->second;
    prog_->exprs.push_back(e);
    int id = int(prog_->exprs.size()) - 1;
    cse_[key] = id;
    return id;
  }

  int mk(Op op, bool row, int a, int b = -1, int c = -1, float imm = 0, int guard = -1) {
    Expr e;
    e.op = op;
    e.row = row;
    e.a = a;
    e.b = b;
    e.c = c;
    e.imm = imm;
    e.guard = guard;
    e.note = note_;
    // A column op whose operands are all row scalars still yields a column value (the row's
    // scalar splatted); a row op never takes column operands.
    for (int x : {a, b, c}) {
      if (x >= 0 && row && !is_reduction(op) && !prog_->exprs[size_t(x)].row) {
        throw Fail{"a per-row value of '" + note_ + "' depends on a full row"};
      }
    }
    // A row scalar reaches a reduction only where the domain has one column (operand() allows
    // nothing else), and the sum or max of one element is that element. Keeping it a row value
    // keeps every reduction's operand a column, which the pass schedule relies on.
    if (is_reduction(op) && prog_->exprs[size_t(a)].row) {
      if (op == Op::RowSumSq) return mk(Op::Mul, true, a, a);
      return op == Op::RowMaxAbs ? mk(Op::Abs, true, a) : a;  // RowMax, RowMin: a itself
    }
    return add(e);
  }
  int cnst(double v) { return mk(Op::Const, true, -1, -1, -1, float(v)); }
  int cols() { return mk(Op::Cols, true, -1); }

  // Whether e is known only after some pass over the row (a reduction is in its cone).
  bool after_reduction(int e) {
    if (e < 0) return false;
    if (reduced_.size() < prog_->exprs.size()) reduced_.resize(prog_->exprs.size(), -1);
    if (reduced_[size_t(e)] >= 0) return reduced_[size_t(e)] != 0;
    const Expr x = prog_->exprs[size_t(e)];
    bool r =
        is_reduction(x.op) || after_reduction(x.a) || after_reduction(x.b) || after_reduction(x.c);
    reduced_[size_t(e)] = r ? 1 : 0;
    return r;
  }

  // The row scalar e takes at column floor(frac * (cols - 1)) (e's cone with column loads
  // replaced by Sample loads), or -1 when e reads a MatMul block. For e before any reduction.
  int sample_of(int e, float frac) {
    const Expr x = prog_->exprs[size_t(e)];  // a copy: the vector grows below
    if (x.row) return e;
    if (x.op == Op::Load) {
      if (x.align != Align::Col || p_input(x.arg).matmul) return -1;
      Expr s = x;
      s.row = true;
      s.align = Align::Sample;
      s.imm = frac;
      return add(s);
    }
    int ops[3] = {x.a, x.b, x.c};
    for (int& o : ops) {
      if (o >= 0 && (o = sample_of(o, frac)) < 0) return -1;
    }
    return mk(x.op, true, ops[0], ops[1], ops[2], x.imm);
  }

  // A value near the row's bulk, known before the first pass: the median of e at the row's
  // first, middle and last column (one outlier among them does not move it). -1 as sample_of.
  int row_pivot(int e) {
    int a = sample_of(e, 0.0f), b = sample_of(e, 0.5f), c = sample_of(e, 1.0f);
    if (a < 0 || b < 0 || c < 0) return -1;
    auto row = [&](Op op, int u, int v) { return mk(op, true, u, v); };
    return row(Op::Max, row(Op::Min, a, b), row(Op::Min, row(Op::Max, a, b), c));
  }
  const Input& p_input(int arg) const { return prog_->inputs[size_t(arg)]; }
  // The index of v among the group's inputs, or -1.
  int input_index(const Value* v) const {
    auto it = std::find(g_.inputs.begin(), g_.inputs.end(), v);
    return it == g_.inputs.end() ? -1 : int(it - g_.inputs.begin());
  }

  // Reduction `op` of column value x, taken only where row scalar `guard` is nonzero (-1: always;
  // a row scalar x folds to a row op in mk, which needs no guard).
  int guarded(Op op, int x, int guard) { return mk(op, true, x, -1, -1, 0, guard); }

  // The expression reading `v` as an operand of an op of form `f`.
  int operand(const Value* v, Form f) {
    auto it = val_.find(v);
    if (it != val_.end()) {
      const Expr& e = prog_->exprs[size_t(it->second)];
      if (!e.row) return it->second;
      Form vf = form(v->shape);
      if (vf == Form::RowAny) return it->second;
      if (vf == Form::Col) vf = Form::RowKeep;  // the domain's rows have 1 column
      if (f == Form::Col && vf != Form::RowKeep) {
        throw Fail{"'" + v->name + "' " + shape_str(v->shape) +
                   " broadcasts against the domain other than per row"};
      }
      if (f != Form::Col && vf != f) {
        throw Fail{"per-row values of different forms meet at '" + note_ + "'"};
      }
      return it->second;
    }
    const Node* p = v->producer;
    if (p && p->op == OpKind::Constant && p->payload.defined() && p->payload.numel() == 1 &&
        (is_float(p->payload.dtype()) || p->payload.dtype() == DType::boolean)) {
      return cnst(p->payload.get(0));
    }
    const int arg = input_index(v);
    if (arg < 0) throw Fail{"'" + v->name + "' is neither computed in the group nor an input"};
    if (!p_input(arg).row_perm.empty()) {
      throw Fail{"'" + v->name + "' is read both through a Transpose and directly"};
    }
    const Shape& s = v->shape;
    if (s.size() > dom_.size()) throw Fail{"input '" + v->name + "' has a higher rank"};
    Expr e;
    e.op = Op::Load;
    e.arg = arg;
    e.note = v->name;
    bool last_one = !s.empty() && s.back().is_static() && s.back().value() == 1;
    bool dom_last_one = !dom_.empty() && dom_.back().is_static() && dom_.back().value() == 1;
    if (f == Form::Col) {
      if (s.empty() || dom_.empty()) {
        e.align = dom_.empty() ? Align::Col : Align::RowDrop;
      } else if (last_one && !dom_last_one) {
        e.align = Align::RowKeep;
      } else {
        e.align = Align::Col;
      }
    } else if (f == Form::RowKeep) {
      if (!s.empty() && !last_one) {
        throw Fail{"input '" + v->name + "' is not per-row for '" + note_ + "'"};
      }
      e.align = s.empty() ? Align::RowDrop : Align::RowKeep;
    } else {
      e.align = Align::RowDrop;
    }
    e.row = e.align != Align::Col;
    // One tensor is read with one row map: per-row values in drop form ([..., rows]) align
    // differently from tensors with a row dim.
    int drop = e.align == Align::RowDrop ? 1 : 0;
    auto [it2, fresh] = arg_drop_.emplace(arg, drop);
    if (!fresh && it2->second != drop) {
      throw Fail{"input '" + v->name + "' is read both per row and per element"};
    }
    return add(e);
  }

  // RotateHalf: a Load of its input through the rotation of the row (halves or pairs of its first
  // rotary_dims columns, kept in imm). The partitioner keeps
  // its input's producer out of the group (or lets in a row Transpose, itself a Load), so the
  // input is read from memory.
  int lower_rotate_half(const Node& n) {
    const Value* v = n.inputs[0];
    if (form(v->shape) != Form::Col || form(n.out()->shape) != Form::Col) {
      throw Fail{"'" + n.name + "' rotates '" + v->name + "', not of the domain's shape " +
                 shape_str(dom_)};
    }
    auto it = val_.find(v);
    const int e = it != val_.end() ? it->second : operand(v, Form::Col);
    Expr x = prog_->exprs[size_t(e)];
    if (x.op != Op::Load || x.align != Align::Col || p_input(x.arg).matmul) {
      throw Fail{"'" + n.name + "' rotates '" + v->name + "', which is not read from memory"};
    }
    x.align = n.attr_int("interleaved", 0) != 0 ? Align::RotPairs : Align::RotHalf;
    const int64_t r = n.attr_int("rotary_dims", 0);
    x.imm = float(r != 0 ? r : v->shape.back().value());  // static (shape inference)
    x.note = n.name;
    return add(x);
  }

  // A Transpose that keeps the last axis: its input, read through a row map whose leading dims
  // are the input's in the Transpose's order (row_args.cc). The partitioner keeps the input's
  // producer out of the group and every other reader of the input too.
  int lower_row_transpose(const Node& n) {
    const Value* v = n.inputs[0];
    if (val_.count(v) || !(n.out()->shape == dom_)) {
      throw Fail{"'" + n.name + "' transposes '" + v->name +
                 "', which is not a group input, into " + shape_str(n.out()->shape) +
                 " rather than the domain " + shape_str(dom_)};
    }
    const int arg = input_index(v);
    if (arg < 0) throw Fail{"'" + v->name + "' is not an input of the group"};
    std::vector<int64_t> perm = n.attr_ints("perm");
    perm.pop_back();  // the last axis stays
    std::vector<int64_t>& mine = prog_->inputs[size_t(arg)].row_perm;
    if (arg_drop_.count(arg)) {  // operand() has read it through its own dims
      throw Fail{"'" + v->name + "' is read both through '" + n.name + "' and directly"};
    }
    if (!mine.empty() && mine != perm) {
      throw Fail{"'" + v->name + "' is read through two different Transposes"};
    }
    mine = perm;
    Expr e;
    e.op = Op::Load;
    e.arg = arg;
    e.align = Align::Col;
    e.note = v->name;
    return add(e);
  }

  void lower_node(const Node& n) {
    note_ = n.name;
    for (const Value* v : n.outputs) check_dtype(v, "value");
    val_[n.out()] = lower_value(n);
  }

  // n's output: a column value, or a row scalar where it is per row (a reduction, or an
  // elementwise op on per-row values). The elementwise math of ops.def comes from its rows.
  int lower_value(const Node& n) {
    switch (n.op) {
#define UBF_OP(...)
#define UBF_MATH(name, ...) \
  case OpKind::name:        \
    return elementwise(n, Op::name);
#include "ubfuse/ops.def"
      case OpKind::Gelu:
        return elementwise(
            n, n.attr_str("approximate", "none") == "tanh" ? Op::GeluTanh : Op::GeluErf);
      case OpKind::Pow:
        return elementwise(n, Op::Pow, float(n.attr_float("exponent", 1)));
      case OpKind::Cast:
        return lower_cast(n);
      case OpKind::LayerNorm:
        return lower_layer_norm(n, row_op_input(n));
      case OpKind::RMSNorm:
        return lower_rms_norm(n, row_op_input(n));
      case OpKind::Softmax:
        return lower_softmax(row_op_input(n));
      case OpKind::ReduceSum:
        return row(Op::RowSum, row_op_input(n));
      case OpKind::ReduceMean: {
        const int x = row_op_input(n);
        return row(Op::Div, row(Op::RowSum, x), cols());
      }
      case OpKind::ReduceMax:
        return row(Op::RowMax, row_op_input(n));
      case OpKind::RotateHalf:
        return lower_rotate_half(n);
      case OpKind::Transpose:
        if (transpose_keeps_rows(n)) return lower_row_transpose(n);
        break;
      case OpKind::MatMul:  // the group's MatMul is read as an input (run())
      case OpKind::Conv:    // as MatMul
      case OpKind::DynamicQuantMatMul:
      case OpKind::MatMulNBits:
      case OpKind::DynamicQuantConv:
      case OpKind::MaxPool:
      case OpKind::AveragePool:
      case OpKind::ReduceProd:
      case OpKind::Gather:
      case OpKind::GatherElements:
      case OpKind::ArgMax:
      case OpKind::ArgMin:
      case OpKind::CumSum:
      case OpKind::TopK:
      case OpKind::RNN:
      case OpKind::GRU:
      case OpKind::LSTM:
      case OpKind::QuantizeLinear:
      case OpKind::DequantizeLinear:
      case OpKind::DynamicQuantizeLinear:
      case OpKind::MatMulInteger:
      case OpKind::QLinearMatMul:
      case OpKind::ConvInteger:
      case OpKind::GatherND:
      case OpKind::ScatterND:
      case OpKind::ScatterElements:
      case OpKind::GroupNorm:
      case OpKind::Pad:
      case OpKind::Resize:
      case OpKind::Shape:
      case OpKind::Range:
      case OpKind::ConstantOfShape:
      case OpKind::AxesShape:
      case OpKind::If:
      case OpKind::Reshape:
      case OpKind::Slice:
      case OpKind::Concat:
      case OpKind::Expand:
      case OpKind::Constant:
      case OpKind::Host:
        break;
    }
    throw Fail{"'" + n.name + "' (" + std::string(op_name(n.op)) + ") is not elementwise"};
  }

  // The form of an elementwise op's output (its operands are read at it).
  Form elementwise_form(const Node& n) {
    const Value* out = n.out();
    Form f = form(out->shape);
    if (f == Form::Other) {
      throw Fail{"'" + n.name + "' yields " + shape_str(out->shape) + ", neither the domain " +
                 shape_str(dom_) + " nor its per-row form"};
    }
    return f;
  }

  // An elementwise op as kernel IR op `op` of the same operands.
  int elementwise(const Node& n, Op op, float imm = 0) {
    const Form f = elementwise_form(n);
    int x[3] = {-1, -1, -1};
    // Last operand first: the order expressions have always been numbered in, which the
    // generated code (and its cache key) spells.
    for (size_t i = n.inputs.size(); i-- > 0;) x[i] = operand(n.inputs[i], f);
    return mk(op, f != Form::Col, x[0], x[1], x[2], imm);
  }

  int lower_cast(const Node& n) {
    const Form f = elementwise_form(n);
    const bool per_row = f != Form::Col;
    const DType from = n.inputs[0]->dtype, to = n.out()->dtype;
    int x = operand(n.inputs[0], f);
    if (to == DType::bf16 && from != DType::bf16) return mk(Op::RoundBf16, per_row, x);
    if (to == DType::f16 && from != DType::f16) return mk(Op::RoundF16, per_row, x);
    if (to == DType::boolean && from != DType::boolean) return mk(Op::ToBool, per_row, x);
    // Widening, bool -> float, or i32 -> f32 (rounded by the load, as Cast rounds): done.
    if (prog_->exprs[size_t(x)].row == per_row) return x;
    return mk(Op::Mul, per_row, x, cnst(1.0));  // a per-row value splatted over the row
  }

  // The input of a row op (reduced over the domain's rows) as a column value.
  int row_op_input(const Node& n) {
    if (form(n.inputs[0]->shape) != Form::Col) {
      throw Fail{"'" + n.name + "' reduces " + shape_str(n.inputs[0]->shape) +
                 ", not the group's rows " + shape_str(dom_)};
    }
    if (dom_.empty()) throw Fail{"'" + n.name + "' needs at least 1 dim"};
    return operand(n.inputs[0], Form::Col);
  }

  // Row ops as primitives; the result of a normalization is a column value.
  int col(Op op, int a, int b = -1) { return mk(op, false, a, b); }
  int row(Op op, int a, int b = -1) { return mk(op, true, a, b); }

  // y * w + b as one FMA when both are there (inputs from `first` on).
  int affine(const Node& n, int y, size_t first) {
    bool w = n.inputs.size() > first, b = n.inputs.size() > first + 1;
    if (w && b) {
      return mk(Op::MulAdd, false, y, operand(n.inputs[first], Form::Col),
                operand(n.inputs[first + 1], Form::Col));
    }
    return w ? col(Op::Mul, y, operand(n.inputs[first], Form::Col)) : y;
  }

  int lower_layer_norm(const Node& n, int x) {
    const double eps = n.attr_float("eps", 1e-5);
    int c = after_reduction(x) ? -1 : row_pivot(x);
    if (c >= 0) return affine(n, layer_norm_one_pass(x, c, eps), 1);
    // Statistics at a scale s = 2^-k that keeps every |x * s| below 2^40, so no square
    // overflows f32 (s = 1, a no-op, unless some |x| passes 2^40):
    // y = d / sqrt(var(d) + eps s^2) with d = (x - mean) * s. The mean sums x / n, which
    // cannot overflow either. Costs 2 vector ops per element (the row's max |x|).
    int mean = row(Op::RowSum, col(Op::Mul, x, row(Op::Div, cnst(1), cols())));
    int s = row(Op::DownScale, row(Op::RowMaxAbs, x));
    int d = mk(Op::MulAdd, false, x, s, row(Op::Neg, row(Op::Mul, mean, s)));
    int var = row(Op::Div, row(Op::RowSum, col(Op::Mul, d, d)), cols());
    int rstd = row(Op::Rsqrt, row(Op::Add, var, row(Op::Mul, cnst(eps), row(Op::Mul, s, s))));
    // 1/sqrt(var + eps) <= 1/sqrt(eps): the bound keeps a constant row of huge values at 0
    // (d = 0) where eps s^2 flushes to 0 and rsqrt(0) would make 0 * inf.
    rstd = row(Op::Min, rstd, row(Op::Div, cnst(1 / std::sqrt(eps)), s));
    // (x - mean) * rstd, not x * rstd - mean * rstd: that cancels badly when |mean| >> std.
    return affine(n, col(Op::Mul, d, rstd), 1);
  }

  int lower_rms_norm(const Node& n, int x) {
    const double eps = n.attr_float("eps", 1e-5);
    // A second sum of squares at kRescueScale takes over where the plain one passes 2^100 (|x|
    // beyond ~1e15): then x^2 overflowed or eps is negligible. Only such rows take it (a
    // guarded reduction: one more loop over the row, re-reading the inputs).
    int ss = row(Op::RowSumSq, x);
    int small = row(Op::Less, ss, cnst(0x1p100));
    int xs = col(Op::Mul, x, cnst(kRescueScale));
    int ss_small = guarded(Op::RowSumSq, xs, row(Op::Not, small));
    int r = row(Op::Rsqrt, row(Op::Add, row(Op::Div, ss, cols()), cnst(eps)));
    int r_big = row(Op::Mul, row(Op::Rsqrt, row(Op::Div, ss_small, cols())), cnst(kRescueScale));
    r = mk(Op::Where, true, small, r, r_big);
    return affine(n, col(Op::Mul, x, r), 1);
  }

  int lower_softmax(int x) {
    // x - max <= 0 (or NaN). Where the row's min - max >= -87 (false for NaN or an
    // infinity), so is every x - max, as rounding is monotonic: the exp needs no range test.
    int m = row(Op::RowMax, x);
    int in_range = row(Op::Greater, row(Op::Sub, row(Op::RowMin, x), m), cnst(kExpInRangeMin));
    int e = col(Op::ExpInRangeIf, col(Op::Sub, x, m), in_range);
    int inv = row(Op::Reciprocal, row(Op::RowSum, e));
    return col(Op::Mul, e, inv);
  }

  // LayerNorm's statistics in the same pass that computes x (the two-pass form below needs
  // the mean before its variance pass): sums of d = (x - c) / 2 and d^2, c = row_pivot(x), as
  // the eager kernel does. mean(d^2) - mean(d)^2 loses (c - mean)^2 / var of relative accuracy,
  // so c must lie within a few standard deviations of the mean: a median of 3 samples does
  // unless two of them are outliers.
  // d is halved in its one rounding (an FMA) so that it is finite for every finite x and c: it
  // is what crosses to the output pass, which is then one FMA, d (2 s r) - mean(d) r.
  // The same sums of (x - c) kRescueScale take over where the sum of d^2 passes 2^100 (|x - c|
  // beyond ~1e15: d^2 overflowed, or eps is negligible); only such rows take them (guarded
  // reductions, in a loop of their own). 3 vector ops per element, no pass over the UB.
  int layer_norm_one_pass(int x, int c, double eps) {
    auto row = [&](Op op, int a, int b = -1) { return mk(op, true, a, b); };
    auto scaled = [&](double k) {  // (x - c) * k in one rounding
      return mk(Op::MulAdd, false, x, cnst(k), row(Op::Neg, row(Op::Mul, c, cnst(k))));
    };
    const double h = 0.5, k = kRescueScale;
    const int n = cols(), zero = cnst(0);
    int d = scaled(h), ds = scaled(k);
    // Mean and 1 / sqrt(var + eps) from sums of v (and of v^2) scaled by the same power of 2.
    auto stats = [&](int v, double eps_scaled, int guard, int* mean_d) {
      *mean_d = row(Op::Div, guarded(Op::RowSum, v, guard), n);
      int var = row(Op::Sub, row(Op::Div, guarded(Op::RowSumSq, v, guard), n),
                    row(Op::Mul, *mean_d, *mean_d));
      var = row(Op::Max, var, zero);  // rounding may leave it below 0; NaN stays
      return row(Op::Rsqrt, row(Op::Add, var, cnst(eps_scaled)));
    };
    int md = -1, mds = -1;
    int rstd = stats(d, eps * h * h, -1, &md);
    // (After stats(d): the pass then accumulates the sum before the sum of squares, an order
    // the seed block's loop ran 3-4% faster in.)
    int small = row(Op::Less, row(Op::RowSumSq, d), cnst(0x1p100));
    int rstd_s = stats(ds, eps * k * k, row(Op::Not, small), &mds);
    auto pick = [&](int a, int b) { return mk(Op::Where, true, small, a, b); };
    int scale = pick(cnst(h), cnst(k));
    // 1/sqrt(var + eps) <= 1/sqrt(eps): keeps a row whose spread cancelled to 0 at (x - mean) * 0.
    int r = row(Op::Min, pick(rstd, rstd_s), row(Op::Div, cnst(1 / std::sqrt(eps)), scale));
    // ((x - c) s - m) r, m the mean of the sums' values, as d (2 s r) - m r: 2 s r is exact (s
    // a power of 2), and rounding m r costs at most |m r| ulps, a few for a pivot in the row's
    // bulk (the variance loses the square of that). The row's mean itself is never rounded to
    // f32 (at |mean| >> std its rounding would be a large part of x - mean).
    return mk(Op::MulAdd, false, d, row(Op::Mul, row(Op::Mul, scale, cnst(1 / h)), r),
              row(Op::Neg, row(Op::Mul, pick(md, mds), r)));
  }

  const FusedGroup& g_;
  Shape dom_;
  std::unique_ptr<Program> prog_;
  std::unordered_map<const Value*, int> val_;
  std::map<std::tuple<int, bool, int, int, int, int, int, float, int>, int> cse_;
  std::map<int, int> arg_drop_;
  std::vector<int8_t> reduced_;  // after_reduction memo: -1 unknown
  std::string note_;
};

}  // namespace

std::unique_ptr<Program> lower_group(const FusedGroup& g, std::string* why_not) {
  try {
    return Lowerer(g).run();
  } catch (const Fail& f) {
    if (why_not) *why_not = f.why;
    return nullptr;
  }
}

}  // namespace ubfuse::kir
