// The importer's state: what is known about each ONNX value (a graph Value, a constant, or a
// shape vector whose elements may be symbolic dims), and NodeCtx, the view one op converter gets
// of its node: checked inputs and attributes, outputs, and emit() which adds ubfuse nodes and folds
// them when every input is a constant.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "import/onnx/tensor_proto.h"
#include "ubfuse/graph.h"
#include "ubfuse/onnx.h"

namespace ubfuse::onnx_import {

// What the importer knows about one ONNX value.
struct IValue {
  Value* v = nullptr;  // the graph value, once materialized
  Tensor konst;        // defined when the value is known at import
  // An integer vector (rank 0 or 1) known element by element where some element is a symbolic
  // dim: the result of Shape on a symbolic tensor and the arithmetic PyTorch does on it.
  std::optional<std::vector<Dim>> dims;
  DType dtype = DType::f32;
  Shape shape;
};

struct ImportState {
  Graph graph;
  std::map<std::string, IValue> values;
  // A branch of an If: names it does not define are looked up in the enclosing graph. Such a
  // value known at import is copied in; any other becomes an input of this graph (a capture),
  // named as in the enclosing graph, listed in `captures` in the order of first use.
  ImportState* parent = nullptr;
  std::vector<std::string> captures;
  // The value named `name` here or in an enclosing graph (capturing it); null if none has it.
  IValue* lookup(const std::string& name);
  // A value whose dims hold each symbol, read by Shape when a shape vector becomes data.
  std::map<std::string, Value*> symbol_values;
  std::vector<std::string> notes;
  ImportOptions options;
  TensorReadOptions tensor_options;
  int64_t opset = 0;
};

class NodeCtx {
 public:
  NodeCtx(ImportState& st, const onnx::NodeProto& node);

  const std::string& op_type() const { return node_.op_type(); }
  const std::string& name() const { return name_; }
  int64_t opset() const { return st_.opset; }
  // "node 'name' (OpType)" for messages.
  std::string where() const;

  // Inputs. An optional input may be absent or named "".
  int num_inputs() const { return node_.input_size(); }
  bool has_input(int i) const;
  const IValue& input(int i) const;  // throws naming the node when absent
  DType dtype(int i) const { return input(i).dtype; }
  const Shape& shape(int i) const { return input(i).shape; }
  int64_t rank(int i) const { return int64_t(input(i).shape.size()); }
  // The input as a graph value (materializing a constant); symbolic shape vectors cannot be.
  Value* value(int i);
  // The same for a value by name (an If's captures, a graph output).
  Value* value_by_name(const std::string& name);
  // The input's value known at import; throws OnnxUnsupportedError naming `what` if it is not.
  const Tensor& const_input(int i, const std::string& what) const;
  std::vector<int64_t> const_ints(int i, const std::string& what) const;
  // An integer vector input as dims (static or symbolic).
  std::vector<Dim> dims_input(int i, const std::string& what) const;
  bool is_const(int i) const { return has_input(i) && input(i).konst.defined(); }
  // Neither known at import nor a shape vector: a tensor whose contents arrive at run time.
  bool is_runtime(int i) const {
    return has_input(i) && !input(i).konst.defined() && !input(i).dims;
  }

  // Attributes; a read marks the attribute as handled (unread ones are reported as unsupported).
  bool has_attr(const std::string& n) const;
  int64_t attr_int(const std::string& n, int64_t dflt);
  double attr_float(const std::string& n, double dflt);
  std::string attr_str(const std::string& n, const std::string& dflt);
  std::vector<int64_t> attr_ints(const std::string& n, std::vector<int64_t> dflt = {});
  std::vector<std::string> attr_strs(const std::string& n);  // empty when absent
  const onnx::TensorProto* attr_tensor(const std::string& n);
  const onnx::GraphProto* attr_graph(const std::string& n);
  // Marks an attribute as handled without reading it (e.g. one whose every value is fine).
  void ignore_attr(const std::string& n) { used_attrs_.insert(n); }
  void check_attrs_used() const;

  // Outputs.
  int num_outputs() const { return node_.output_size(); }
  bool output_used(int i) const { return i < num_outputs() && !node_.output(i).empty(); }
  void set_output(int i, Value* v);
  void set_output_const(int i, Tensor t);
  // Output i as a shape vector of dtype dt (i64 or i32) known dim by dim (IValue::dims).
  void set_output_dims(int i, std::vector<Dim> d, bool scalar, DType dt = DType::i64);
  void set_output_like(int i, const IValue& iv);  // aliases (Identity)
  void check_outputs_set() const;

  // Adds a ubfuse node (named after the ONNX node) and infers its type; when every input is a
  // constant and the result is small, evaluates it at once and returns a constant instead.
  Value* emit(OpKind k, std::vector<Value*> in, Attrs attrs = {}, Tensor payload = {});
  // The same for an op of several outputs (never folded).
  std::vector<Value*> emit_outputs(OpKind k, std::vector<Value*> in, Attrs attrs, int outputs);
  // A Host node calling fn with x when the model runs (a run-time check of input values).
  Value* emit_host(Value* x, HostFn fn);
  Value* constant(const Tensor& t);
  Value* scalar(double v, DType dt);
  // The size d as an int64 scalar value: a constant, or computed from the Shape of a value
  // (a graph input first) that has its symbols as dims.
  Value* dim_scalar(const Dim& d) { return materialize_dims({d}, true); }
  // From here on, the graph input symbol `sym` is `as` in every shape the import has made (an
  // attention mask's total length declared with a symbol of its own): the executor binds and
  // checks it against the other inputs at run time. False, and nothing changed, where a shape
  // holds sym inside an expression, no graph input has it as a dim, or this is an If's branch.
  bool unify_symbol(const std::string& sym, const Dim& as);
  // Reshapes x to `target`, whose symbolic dims must be x's (see reshape.cc).
  Value* reshape_to(Value* x, const Shape& target);

  [[noreturn]] void unsupported(const std::string& msg) const;
  [[noreturn]] void invalid(const std::string& msg) const;
  // For a computation that needs the runtime size of symbolic dims.
  [[noreturn]] void needs_static(const std::vector<Dim>& dims, const std::string& what) const;
  // Normalizes an axis attribute/input against `rank`, throwing naming the attribute.
  int64_t norm_axis(int64_t axis, int64_t rank, const std::string& attr) const;

  ImportState& state() { return st_; }

 private:
  // A shape vector as graph values: each symbol read by a Shape node, then the polynomial's
  // arithmetic, so it runs while a plan is built (ir/values.h).
  Value* materialize_dims(const std::vector<Dim>& dims, bool scalar);
  Value* dim_value(const Dim& d);
  Value* symbol_value(const std::string& s, const std::vector<Dim>& context);
  const onnx::AttributeProto* find_attr(const std::string& n) const;
  const onnx::AttributeProto* typed_attr(const std::string& n,
                                         onnx::AttributeProto::AttributeType t);
  IValue& out_slot(int i);

  ImportState& st_;
  const onnx::NodeProto& node_;
  std::string name_;
  std::set<std::string> used_attrs_;
  std::vector<bool> outputs_set_;
  int emitted_ = 0;
};

// Symbol names in `dims` (for messages), deduplicated.
std::vector<std::string> symbols_of(const std::vector<Dim>& dims);

}  // namespace ubfuse::onnx_import
