#include "import/onnx/context.h"

#include <algorithm>

#include "import/onnx/fold.h"

namespace ubfuse::onnx_import {

namespace {

using AP = onnx::AttributeProto;

std::string attr_type_name(int t) {
  if (!AP::AttributeType_IsValid(t)) return "invalid(" + std::to_string(t) + ")";
  return AP::AttributeType_Name(static_cast<AP::AttributeType>(t));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), ::tolower);
  return out;
}

}  // namespace

std::vector<std::string> symbols_of(const std::vector<Dim>& dims) {
  std::vector<std::string> out;
  for (auto& d : dims) {
    for (auto& s : d.symbols()) {  // "past+seq" needs past and seq
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  }
  return out;
}

NodeCtx::NodeCtx(ImportState& st, const onnx::NodeProto& node)
    : st_(st), node_(node), outputs_set_(size_t(node.output_size()), false) {
  name_ = node.name();
  if (name_.empty()) {
    for (auto& o : node.output()) {
      if (!o.empty()) {
        name_ = o;
        break;
      }
    }
  }
  if (name_.empty()) name_ = node.op_type();
}

std::string NodeCtx::where() const { return "node '" + name_ + "' (" + op_type() + ")"; }

void NodeCtx::unsupported(const std::string& msg) const {
  throw OnnxUnsupportedError(where() + ": " + msg);
}

void NodeCtx::invalid(const std::string& msg) const {
  throw Error(where() + ": " + msg + " (the model is not valid ONNX)");
}

void NodeCtx::needs_static(const std::vector<Dim>& dims, const std::string& what) const {
  auto syms = symbols_of(dims);
  std::string names, binds;
  for (auto& s : syms) {
    names += (names.empty() ? "'" : ", '") + s + "'";
    binds += (binds.empty() ? "" : " ") + std::string("--dim ") + s + "=N";
  }
  throw OnnxNeedsStaticDimsError(
      where() + ": " + what + " depends on the run-time size of symbolic dim(s) " + names +
          "; hint: fix them at import (ImportOptions::static_dims, or `ubfuse run " + binds + "`)",
      syms);
}

int64_t NodeCtx::norm_axis(int64_t axis, int64_t rank, const std::string& attr) const {
  if (rank == 0)
    invalid(attr + " " + std::to_string(axis) + ": the input is a scalar, which has no axes");
  if (axis < -rank || axis >= rank) {
    invalid(attr + " " + std::to_string(axis) + " is out of range for rank " +
            std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// ---- inputs

bool NodeCtx::has_input(int i) const {
  return i >= 0 && i < node_.input_size() && !node_.input(i).empty();
}

IValue* ImportState::lookup(const std::string& name) {
  auto it = values.find(name);
  if (it != values.end()) return &it->second;
  IValue* outer = parent ? parent->lookup(name) : nullptr;
  if (!outer) return nullptr;
  IValue iv;
  if (outer->konst.defined() || outer->dims) {
    iv = *outer;
    iv.v = nullptr;  // known values are copied; the graph value is made here when needed
  } else {
    UBF_CHECK(outer->v != nullptr, "captured value '" + name + "' has no graph value");
    iv.v = graph.add_input(name, outer->v->dtype, outer->v->shape);
    iv.dtype = outer->dtype;
    iv.shape = outer->shape;
    captures.push_back(name);
  }
  return &(values[name] = std::move(iv));
}

const IValue& NodeCtx::input(int i) const {
  if (!has_input(i)) invalid("input " + std::to_string(i) + " is missing");
  const IValue* iv = st_.lookup(node_.input(i));
  if (!iv) {
    throw Error(where() + ": input '" + node_.input(i) +
                "' is not defined by any graph input, initializer or earlier node (nodes must be "
                "topologically sorted)");
  }
  return *iv;
}

Value* NodeCtx::value(int i) {
  input(i);  // checks
  return value_by_name(node_.input(i));
}

Value* NodeCtx::value_by_name(const std::string& name) {
  IValue* found = st_.lookup(name);
  if (!found) throw Error(where() + ": value '" + name + "' is not defined");
  IValue& iv = *found;
  if (iv.v) return iv.v;
  if (iv.konst.defined()) {
    std::string n = name;
    if (st_.graph.node_by_name(n)) n = st_.graph.unique_name(n + "_");
    Node* c = st_.graph.add_node(OpKind::Constant, {}, {}, n);
    c->payload = iv.konst;
    infer_node(*c);
    iv.v = c->out();
    return iv.v;
  }
  UBF_CHECK(iv.dims.has_value(), "IValue with neither value, constant nor dims");
  iv.v = materialize_dims(*iv.dims, iv.shape.empty());  // int64
  if (iv.dtype != DType::i64) {
    Node* cast =
        st_.graph.add_node(OpKind::Cast, {iv.v}, {{"to", std::string(dtype_name(iv.dtype))}},
                           st_.graph.unique_name(name + "_cast"));
    infer_node(*cast);
    iv.v = cast->out();
  }
  return iv.v;
}

bool NodeCtx::unify_symbol(const std::string& sym, const Dim& as) {
  if (st_.parent) return false;
  const Dim lone(sym);
  std::vector<Shape*> shapes;
  bool input = false;
  for (Value* v : st_.graph.inputs()) {
    shapes.push_back(&v->shape);
    for (const Dim& d : v->shape) input |= d == lone;
  }
  if (!input) return false;
  for (Node* n : st_.graph.topo_order()) {
    for (Value* o : n->outputs) shapes.push_back(&o->shape);
  }
  std::vector<std::vector<Dim>*> vectors;
  for (auto& [name, iv] : st_.values) {
    if (!iv.v) shapes.push_back(&iv.shape);  // a materialized value's shape is its Value's
    if (iv.dims) vectors.push_back(&*iv.dims);
  }
  auto inside = [&](const Dim& d) {  // sym within an expression: no substitution for it
    if (d.is_static() || d == lone) return false;
    for (const auto& s : d.symbols()) {
      if (s == sym) return true;
    }
    return false;
  };
  for (const Shape* s : shapes) {
    for (const Dim& d : *s) {
      if (inside(d)) return false;
    }
  }
  for (const auto* v : vectors) {
    for (const Dim& d : *v) {
      if (inside(d)) return false;
    }
  }
  for (Shape* s : shapes) std::replace(s->begin(), s->end(), lone, as);
  for (auto* v : vectors) std::replace(v->begin(), v->end(), lone, as);
  for (auto& [name, iv] : st_.values) {
    if (iv.v) iv.shape = iv.v->shape;
  }
  return true;
}

Value* NodeCtx::materialize_dims(const std::vector<Dim>& dims, bool scalar) {
  std::vector<Value*> elems;
  for (const Dim& d : dims) {
    for (const auto& sym : d.symbols()) symbol_value(sym, dims);  // fail before emitting
  }
  for (const Dim& d : dims) elems.push_back(dim_value(d));
  Value* v = elems.size() == 1 ? elems[0] : emit(OpKind::Concat, elems, {{"axis", int64_t(0)}});
  if (scalar) v = emit(OpKind::Reshape, {v}, {{"shape", std::vector<int64_t>{}}});
  return v;
}

Value* NodeCtx::dim_value(const Dim& d) {
  auto one = [&](int64_t x) {
    Tensor t(DType::i64, {1});
    t.data_as<int64_t>()[0] = x;
    return constant(t);
  };
  if (d.is_static()) return one(d.value());
  Value* sum = nullptr;
  for (const auto& t : d.terms()) {
    Value* term = nullptr;
    for (const auto& f : t.factors) {
      Value* s = symbol_value(f, {d});
      term = term ? emit(OpKind::Mul, {term, s}) : s;
    }
    if (!term) {
      term = one(t.coef);
    } else if (t.coef != 1) {
      term = emit(OpKind::Mul, {term, one(t.coef)});
    }
    sum = sum ? emit(OpKind::Add, {sum, term}) : term;
  }
  return sum;
}

Value* NodeCtx::symbol_value(const std::string& s, const std::vector<Dim>& context) {
  if (auto it = st_.symbol_values.find(s); it != st_.symbol_values.end()) return it->second;
  const Dim want(s);
  auto axis_of = [&](const Value* v) -> int64_t {
    for (size_t k = 0; k < v->shape.size(); k++) {
      if (v->shape[k] == want) return int64_t(k);
    }
    return -1;
  };
  const Value* carrier = nullptr;
  int64_t axis = -1;
  for (const Value* in : st_.graph.inputs()) {
    if ((axis = axis_of(in)) >= 0) {
      carrier = in;
      break;
    }
  }
  if (!carrier) {
    for (const Node* n : st_.graph.topo_order()) {
      for (const Value* o : n->outputs) {
        if (!carrier && (axis = axis_of(o)) >= 0) carrier = o;
      }
      if (carrier) break;
    }
  }
  // A symbol no value has as a dim (one made up for a quotient) has no size to read.
  if (!carrier) needs_static(context, "using shape values as tensor data");
  Value* v =
      emit(OpKind::Shape, {const_cast<Value*>(carrier)}, {{"start", axis}, {"end", axis + 1}});
  st_.symbol_values[s] = v;
  return v;
}

const Tensor& NodeCtx::const_input(int i, const std::string& what) const {
  const IValue& iv = input(i);
  if (iv.konst.defined()) return iv.konst;
  if (iv.dims) needs_static(*iv.dims, what);
  unsupported(what + " (input " + std::to_string(i) + ", '" + node_.input(i) +
              "') must be a constant (an initializer or computed from constants and static "
              "shapes)");
}

std::vector<int64_t> NodeCtx::const_ints(int i, const std::string& what) const {
  const Tensor& t = const_input(i, what);
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32) {
    invalid(what + " must be int64 or int32, got " + std::string(dtype_name(t.dtype())));
  }
  if (t.rank() > 1)
    invalid(what + " must be a scalar or 1-D, got rank " + std::to_string(t.rank()));
  std::vector<int64_t> out(size_t(t.numel()));
  for (int64_t k = 0; k < t.numel(); k++) {
    out[size_t(k)] = t.dtype() == DType::i64 ? t.data_as<int64_t>()[k] : t.data_as<int32_t>()[k];
  }
  return out;
}

std::vector<Dim> NodeCtx::dims_input(int i, const std::string& what) const {
  const IValue& iv = input(i);
  if (iv.dims) return *iv.dims;
  std::vector<Dim> out;
  for (auto v : const_ints(i, what)) out.push_back(Dim(v));
  return out;
}

// ---- attributes

const onnx::AttributeProto* NodeCtx::find_attr(const std::string& n) const {
  const onnx::AttributeProto* found = nullptr;
  for (const auto& a : node_.attribute()) {
    if (a.name() == n) {
      if (found) invalid("attribute '" + n + "' is given twice");
      found = &a;
    }
  }
  return found;
}

bool NodeCtx::has_attr(const std::string& n) const { return find_attr(n) != nullptr; }

const onnx::AttributeProto* NodeCtx::typed_attr(const std::string& n, AP::AttributeType t) {
  used_attrs_.insert(n);
  const AP* a = find_attr(n);
  if (!a) return nullptr;
  if (!a->ref_attr_name().empty())
    unsupported("attribute '" + n + "' refers to a function attribute");
  if (a->type() != t) {
    invalid("attribute '" + n + "' must be " + attr_type_name(t) + ", got " +
            attr_type_name(a->type()));
  }
  return a;
}

int64_t NodeCtx::attr_int(const std::string& n, int64_t dflt) {
  const AP* a = typed_attr(n, AP::INT);
  return a ? a->i() : dflt;
}

double NodeCtx::attr_float(const std::string& n, double dflt) {
  const AP* a = typed_attr(n, AP::FLOAT);
  return a ? double(a->f()) : dflt;
}

std::string NodeCtx::attr_str(const std::string& n, const std::string& dflt) {
  const AP* a = typed_attr(n, AP::STRING);
  return a ? a->s() : dflt;
}

std::vector<int64_t> NodeCtx::attr_ints(const std::string& n, std::vector<int64_t> dflt) {
  const AP* a = typed_attr(n, AP::INTS);
  if (!a) return dflt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<std::string> NodeCtx::attr_strs(const std::string& n) {
  const AP* a = typed_attr(n, AP::STRINGS);
  if (!a) return {};
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

const onnx::TensorProto* NodeCtx::attr_tensor(const std::string& n) {
  const AP* a = typed_attr(n, AP::TENSOR);
  return a ? &a->t() : nullptr;
}

const onnx::GraphProto* NodeCtx::attr_graph(const std::string& n) {
  const AP* a = typed_attr(n, AP::GRAPH);
  return a ? &a->g() : nullptr;
}

void NodeCtx::check_attrs_used() const {
  for (const auto& a : node_.attribute()) {
    if (!used_attrs_.count(a.name())) {
      unsupported("attribute '" + a.name() + "' is not supported for " + op_type());
    }
  }
}

// ---- outputs

IValue& NodeCtx::out_slot(int i) {
  UBF_CHECK(i >= 0 && i < node_.output_size(), where() + ": output index out of range");
  outputs_set_[size_t(i)] = true;
  return st_.values[node_.output(i)];
}

void NodeCtx::set_output(int i, Value* v) {
  if (!output_used(i)) return;
  if (v->producer && v->producer->op == OpKind::Constant) {
    set_output_const(i, v->producer->payload);
    out_slot(i).v = v;
    return;
  }
  IValue& o = out_slot(i);
  o = IValue{};
  o.v = v;
  o.dtype = v->dtype;
  o.shape = v->shape;
}

void NodeCtx::set_output_const(int i, Tensor t) {
  if (!output_used(i)) return;
  IValue& o = out_slot(i);
  o = IValue{};
  o.dtype = t.dtype();
  o.shape = to_shape(t.sizes());
  o.konst = std::move(t);
}

void NodeCtx::set_output_dims(int i, std::vector<Dim> d, bool scalar, DType dt) {
  if (!output_used(i)) return;
  UBF_CHECK(dt == DType::i64 || dt == DType::i32,
            "shape vector of dtype " + std::string(dtype_name(dt)));
  bool all_static = std::all_of(d.begin(), d.end(), [](const Dim& x) { return x.is_static(); });
  if (all_static) {
    Tensor t(dt, scalar ? Sizes{} : Sizes{int64_t(d.size())});
    for (size_t k = 0; k < d.size(); k++) t.set(int64_t(k), double(d[k].value()));
    set_output_const(i, t);
    return;
  }
  UBF_CHECK(!scalar || d.size() == 1, "scalar dims with several elements");
  IValue& o = out_slot(i);
  o = IValue{};
  o.dtype = dt;
  o.shape = scalar ? Shape{} : Shape{Dim(int64_t(d.size()))};
  o.dims = std::move(d);
}

void NodeCtx::set_output_like(int i, const IValue& iv) {
  if (!output_used(i)) return;
  IValue copy = iv;
  out_slot(i) = std::move(copy);
}

void NodeCtx::check_outputs_set() const {
  for (int i = 0; i < node_.output_size(); i++) {
    if (!node_.output(i).empty() && !outputs_set_[size_t(i)]) {
      unsupported("output " + std::to_string(i) + " ('" + node_.output(i) +
                  "') is not supported; only the first output(s) can be used");
    }
  }
}

// ---- emitting

Value* NodeCtx::emit(OpKind k, std::vector<Value*> in, Attrs attrs, Tensor payload) {
  Graph& g = st_.graph;
  std::string n = name_;
  if (emitted_++ > 0 || g.node_by_name(n)) n = g.unique_name(name_ + "/" + lower(op_name(k)));
  Node* node = g.add_node(k, std::move(in), std::move(attrs), n);
  node->payload = std::move(payload);
  try {
    infer_node(*node);
  } catch (...) {
    g.remove_node(node);
    throw;
  }
  if (auto t = fold_node(*node)) {
    g.remove_node(node);
    return constant(*t);
  }
  return node->out();
}

Value* NodeCtx::emit_host(Value* x, HostFn fn) {
  Graph& g = st_.graph;
  emitted_++;
  Node* node = g.add_node(OpKind::Host, {x}, {}, g.unique_name(name_ + "/check"));
  node->host = std::move(fn);
  infer_node(*node);
  return node->out();
}

std::vector<Value*> NodeCtx::emit_outputs(OpKind k, std::vector<Value*> in, Attrs attrs,
                                          int outputs) {
  Graph& g = st_.graph;
  std::string n = name_;
  if (emitted_++ > 0 || g.node_by_name(n)) n = g.unique_name(name_ + "/" + lower(op_name(k)));
  Node* node = g.add_node(k, std::move(in), std::move(attrs), n, outputs);
  try {
    infer_node(*node);
  } catch (...) {
    g.remove_node(node);
    throw;
  }
  return node->outputs;
}

Value* NodeCtx::constant(const Tensor& t) {
  Graph& g = st_.graph;
  Node* c = g.add_node(OpKind::Constant, {}, {}, g.unique_name(name_ + "/const"));
  c->payload = t;
  infer_node(*c);
  return c->out();
}

Value* NodeCtx::scalar(double v, DType dt) {
  Tensor t(dt, {});
  t.set(0, v);
  return constant(t);
}

}  // namespace ubfuse::onnx_import
