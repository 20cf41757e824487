// One-node ONNX models built with ONNX's protobuf classes, for import tests of what the backend
// node tests do not reach (other dtypes, attributes, errors).
#pragma once

#define ONNX_ML 1
#define ONNX_NAMESPACE onnx
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "ubfuse/onnx.h"

namespace ubfuse::testing {

// ONNX element types, for OneNode's inputs and outputs.
constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt32 = onnx::TensorProto::INT32;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kBool = onnx::TensorProto::BOOL;

// A model of one node: inputs (a dim of -1 is the symbol "N", -2 "S", -3 "T", -4 "U"), initializers
// (int64, or 8-bit, int and float ones in typed or raw data), attributes.
class OneNode {
 public:
  OneNode(const std::string& op, int64_t opset) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g_ = m_.mutable_graph();
    g_->set_name("g");
    n_ = g_->add_node();
    n_->set_op_type(op);
    n_->set_name("node0");
  }
  OneNode& input(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    n_->add_input(name);
    auto* t = g_->add_input();
    t->set_name(name);
    auto* tt = t->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* s = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = s->add_dim();
      if (d < 0) {  // -1: the symbol N, -2: S, -3: T, -4: U
        dim->set_dim_param(d == -1 ? "N" : d == -2 ? "S" : d == -3 ? "T" : "U");
      } else {
        dim->set_dim_value(d);
      }
    }
    return *this;
  }
  OneNode& ints(const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<int64_t>& v) {
    n_->add_input(name);
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return *this;
  }
  // An initializer in int32_data (8-bit and int types) or float_data; raw: in raw_data.
  OneNode& init(const std::string& name, int elem, const std::vector<int64_t>& dims,
                const std::vector<float>& v, bool raw = false) {
    n_->add_input(name);
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (int64_t d : dims) t->add_dims(d);
    if (raw) {
      std::string bytes;
      for (float x : v) bytes.push_back(char(int(x)));
      t->set_raw_data(bytes);
    } else if (elem == onnx::TensorProto::FLOAT) {
      for (float x : v) t->add_float_data(x);
    } else {
      for (float x : v) t->add_int32_data(int32_t(x));
    }
    return *this;
  }
  OneNode& skip() {
    n_->add_input("");
    return *this;
  }
  // The node in another domain (onnxruntime's "com.microsoft"), imported at version 1.
  OneNode& domain(const std::string& d) {
    n_->set_domain(d);
    auto* o = m_.add_opset_import();
    o->set_domain(d);
    o->set_version(1);
    return *this;
  }
  OneNode& attr_f(const std::string& name, float v) {
    auto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  OneNode& attr(const std::string& name, int64_t v) {
    auto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  OneNode& attr(const std::string& name, const std::string& v) {
    auto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }
  OneNode& attr(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  OneNode& attr(const std::string& name, const std::vector<std::string>& v) {
    auto* a = n_->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const std::string& x : v) a->add_strings(x);
    return *this;
  }
  OneNode& output(const std::string& name, int elem) {
    n_->add_output(name);
    auto* t = g_->add_output();
    t->set_name(name);
    t->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    return *this;
  }
  // A further node of op type `op`, which later calls build (a small graph: from() and to() wire
  // it to the nodes before and after it).
  OneNode& then(const std::string& op) {
    n_ = g_->add_node();
    n_->set_op_type(op);
    n_->set_name("node" + std::to_string(g_->node_size() - 1));
    return *this;
  }
  // An input that an earlier node's output `name` feeds (no graph input).
  OneNode& from(const std::string& name) {
    n_->add_input(name);
    return *this;
  }
  // An output that a later node reads (no graph output).
  OneNode& to(const std::string& name) {
    n_->add_output(name);
    return *this;
  }
  // An optional output left out (named "").
  OneNode& skip_output() {
    n_->add_output("");
    return *this;
  }
  Graph import() const { return import_onnx_from_bytes(m_.SerializeAsString()); }

 private:
  onnx::ModelProto m_;
  onnx::GraphProto* g_;
  onnx::NodeProto* n_;
};

}  // namespace ubfuse::testing
