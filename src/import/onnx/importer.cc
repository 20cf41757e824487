// import_onnx: parse the ModelProto, declare graph inputs (dim_param -> symbolic Dim), load
// initializers as constants, convert the nodes in order through the op table, declare outputs.
#include <filesystem>
#include <limits>
#include <utility>

#include "import/onnx/context.h"
#include "import/onnx/model_parse.h"
#include "import/onnx/registry.h"

namespace ubfuse {

namespace {

// f(), with `what` before the message of any ubfuse error it throws (the error keeps its type).
template <typename F>
auto with_context(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const OnnxNeedsStaticDimsError& e) {
    throw OnnxNeedsStaticDimsError(what + ": " + e.what(), e.symbols);
  } catch (const OnnxUnsupportedError& e) {
    throw OnnxUnsupportedError(what + ": " + e.what());
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
}

using namespace onnx_import;

constexpr int64_t kMinOpset = 1, kMaxOpset = 18;

// Names joined by ", " (for the messages listing what is supported).
template <class Names>
std::string joined(const Names& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string supported_list() { return joined(onnx_supported_ops()); }

// A dim_param is a name to ONNX, whatever it spells ("batch-size", "past_sequence_length + 1"),
// so it stays one symbol: characters outside ubfuse's symbol names become '_' (and an all-digit
// name gets a leading '_'), since '+', '-', '*' and spaces would read as dim arithmetic.
std::string clean_symbol(std::string s) {
  bool digits = true;
  for (char& ch : s) {
    bool name = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '_' || ch == '.' || ch == '$' || ch == ':';
    if (!name) ch = '_';
    digits = digits && ch >= '0' && ch <= '9';
  }
  return digits ? "_" + s : s;
}

Shape input_shape(const onnx::ValueInfoProto& vi, const ImportOptions& o, int* fresh) {
  const auto& tt = vi.type().tensor_type();
  if (!tt.has_shape()) {
    throw OnnxUnsupportedError("graph input '" + vi.name() +
                               "' has no shape; ubfuse needs the rank of every input");
  }
  Shape s;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) {
        throw Error("graph input '" + vi.name() + "' has a negative dim " +
                    std::to_string(d.dim_value()));
      }
      s.emplace_back(int64_t(d.dim_value()));  // in place: GCC 12 misreads a moved variant
      continue;
    }
    std::string sym = d.has_dim_param() && !d.dim_param().empty()
                          ? clean_symbol(d.dim_param())
                          : clean_symbol(vi.name()) + "_dim" + std::to_string((*fresh)++);
    auto it = o.static_dims.find(sym);
    s.push_back(it != o.static_dims.end() ? Dim(it->second) : Dim(sym));
  }
  return s;
}

void check_opsets(const onnx::ModelProto& m, ImportState& st) {
  bool found = false;
  for (const auto& os : m.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") {
      st.opset = os.version();
      found = true;
    }
  }
  if (!found) {
    // IR version 2 models may omit the opset; ONNX then means opset 1.
    st.opset = 1;
  }
  if (st.opset < kMinOpset || st.opset > kMaxOpset) {
    throw OnnxUnsupportedError("the model's default-domain opset is " + std::to_string(st.opset) +
                               "; ubfuse supports opsets " + std::to_string(kMinOpset) + " to " +
                               std::to_string(kMaxOpset) + " (13 to 18 are the target)");
  }
}

void convert_node(ImportState& st, const onnx::NodeProto& node) {
  NodeCtx c(st, node);
  const bool microsoft = node.domain() == "com.microsoft";
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !microsoft) {
    throw OnnxUnsupportedError(c.where() + ": domain '" + node.domain() +
                               "' is not supported (the default ONNX domain and onnxruntime's "
                               "com.microsoft are); supported ops: " +
                               supported_list());
  }
  auto& table = microsoft ? microsoft_converters() : converters();
  auto it = table.find(node.op_type());
  if (it == table.end() && microsoft) {
    throw OnnxUnsupportedError(c.where() + ": onnxruntime's contrib op 'com.microsoft." +
                               node.op_type() +
                               "' is not supported; supported com.microsoft ops: " +
                               joined(onnx_supported_microsoft_ops()));
  }
  if (it == table.end()) {
    throw OnnxUnsupportedError(c.where() + ": op '" + node.op_type() +
                               "' is not supported; supported ops: " + supported_list());
  }
  for (const auto& out : node.output()) {
    if (!out.empty() && st.values.count(out)) {
      throw Error(c.where() + ": output '" + out +
                  "' is already defined (ONNX values are assigned once)");
    }
  }
  // (com.microsoft converters check their operands' dtypes themselves: MatMulNBits takes uint8)
  if (!microsoft && !int8_input_ops().count(node.op_type())) {
    for (int i = 0; i < c.num_inputs(); i++) {
      if (c.has_input(i) && is_int8(c.dtype(i))) {
        c.unsupported("input " + std::to_string(i) + " ('" + node.input(i) + "') is " +
                      std::string(dtype_name(c.dtype(i))) +
                      "; int8 and uint8 tensors are taken only by " + joined(int8_input_ops()));
      }
    }
  }
  it->second(c);
  c.check_attrs_used();
  c.check_outputs_set();
}

// Graph outputs must be distinct computed values: an output that is a graph input, another
// output, or a constant gets its own copy.
void declare_outputs(const onnx::GraphProto& g, ImportState& st) {
  std::set<const Value*> used;
  for (const auto& o : g.output()) {
    if (!st.lookup(o.name())) {
      throw Error("graph output '" + o.name() + "' is not computed by any node");
    }
    onnx::NodeProto fake;
    fake.set_op_type("Output");
    fake.set_name(o.name());
    NodeCtx c(st, fake);
    // A constant or a shape vector becomes a node (a shape vector's elements run on the host).
    Value* v = c.value_by_name(o.name());
    bool is_input = !v->producer;
    if (is_input || used.count(v)) v = c.reshape_to(v, v->shape);
    used.insert(v);
    if (o.type().has_tensor_type() && o.type().tensor_type().elem_type() != 0) {
      int32_t et = o.type().tensor_type().elem_type();
      DType want = et == onnx::TensorProto::DOUBLE
                       ? DType::f32
                       : dtype_from_onnx(et, "graph output '" + o.name() + "'");
      if (want != v->dtype) {
        throw Error("graph output '" + o.name() + "' is declared " + onnx_type_name(et) +
                    " but computes " + std::string(dtype_name(v->dtype)));
      }
    }
    st.graph.add_output(o.name(), v);
  }
}

// A graph's initializers, as values known at import; `raw`, where given, holds the raw_data
// lifted out of each (model_parse.h).
void load_initializers(const onnx::GraphProto& g, ImportState& st,
                       const std::vector<std::optional<std::string_view>>* raw = nullptr) {
  if (g.sparse_initializer_size())
    throw OnnxUnsupportedError("sparse initializers are not supported");
  for (int i = 0; i < g.initializer_size(); i++) {
    const onnx::TensorProto& init = g.initializer(i);
    if (init.name().empty()) throw Error("an initializer has no name");
    if (st.values.count(init.name()))
      throw Error("initializer '" + init.name() + "' is given twice");
    IValue iv;
    iv.konst = tensor_from_proto(init, init.name(), st.tensor_options,
                                 raw && !raw->empty() ? (*raw)[size_t(i)] : std::nullopt);
    iv.dtype = iv.konst.dtype();
    iv.shape = to_shape(iv.konst.sizes());
    st.values[init.name()] = std::move(iv);
  }
}

// A graph's nodes and outputs, then what every imported graph gets: dead nodes out, verified.
void convert_body(const onnx::GraphProto& g, ImportState& st, const std::string& no_outputs) {
  for (const auto& node : g.node()) convert_node(st, node);
  if (g.output_size() == 0) throw Error(no_outputs);
  declare_outputs(g, st);
  st.graph.remove_dead_nodes();
  verify(st.graph);
}

}  // namespace

namespace onnx_import {

std::shared_ptr<Graph> import_branch(ImportState& parent, const onnx::GraphProto& g,
                                     const std::string& what, std::vector<std::string>& captures) {
  ImportState st;
  st.parent = &parent;
  st.options = parent.options;
  st.tensor_options = parent.tensor_options;
  st.opset = parent.opset;
  with_context(what, [&] {
    if (g.input_size() > 0) {
      throw OnnxUnsupportedError("has " + std::to_string(g.input_size()) +
                                 " inputs; only If's branches, which have none, are supported");
    }
    load_initializers(g, st);
    convert_body(g, st, "has no outputs");
  });
  // A capture that dead-node removal left unread is still an input; the If passes it.
  captures = st.captures;
  return std::make_shared<Graph>(std::move(st.graph));
}

}  // namespace onnx_import

namespace {

OnnxModel import_model(const ParsedModel& pm, const ImportOptions& options,
                       const std::string& base_dir) {
  const onnx::ModelProto& m = pm.proto;
  ImportState st;
  st.options = options;
  st.tensor_options.base_dir = base_dir;
  st.tensor_options.notes = &st.notes;
  check_opsets(m, st);
  if (!m.has_graph()) throw Error("ONNX model has no graph");
  const onnx::GraphProto& g = m.graph();
  load_initializers(g, st, &pm.raw);
  int fresh = 0;
  for (const auto& in : g.input()) {
    if (st.values.count(in.name())) continue;  // an initializer listed as input (IR < 4)
    if (in.name().empty()) throw Error("a graph input has no name");
    if (auto c = options.constant_inputs.find(in.name()); c != options.constant_inputs.end()) {
      IValue iv;
      iv.konst = c->second;
      iv.dtype = c->second.dtype();
      iv.shape = to_shape(c->second.sizes());
      st.values[in.name()] = std::move(iv);
      continue;
    }
    if (!in.type().has_tensor_type()) {
      throw OnnxUnsupportedError("graph input '" + in.name() +
                                 "' is not a tensor (sequences, maps "
                                 "and optionals are not supported)");
    }
    DType dt =
        dtype_from_onnx(in.type().tensor_type().elem_type(), "graph input '" + in.name() + "'");
    Value* v = st.graph.add_input(in.name(), dt, input_shape(in, options, &fresh));
    IValue iv;
    iv.v = v;
    iv.dtype = dt;
    iv.shape = v->shape;
    st.values[in.name()] = std::move(iv);
  }
  convert_body(g, st, "ONNX graph has no outputs");

  OnnxModel out;
  out.graph = std::move(st.graph);
  out.opset = st.opset;
  out.producer =
      m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  out.notes = std::move(st.notes);
  return out;
}

}  // namespace

OnnxModel import_onnx_model(const std::string& path, const ImportOptions& options) {
  const MappedFile file(path, /*populate=*/true);
  std::string what = "ONNX model '" + path + "'";
  ParsedModel m;
  parse_model_bytes(file.bytes(), what, m);
  std::string dir = options.external_data_dir.empty()
                        ? std::filesystem::path(path).parent_path().string()
                        : options.external_data_dir;
  return with_context(what, [&] { return import_model(m, options, dir); });
}

OnnxModel import_onnx_model_from_bytes(const std::string& bytes, const ImportOptions& options) {
  ParsedModel m;
  parse_model_bytes(bytes, "ONNX model", m);
  return import_model(m, options, options.external_data_dir);
}

}  // namespace ubfuse

namespace ubfuse {

namespace {

// The model at `path`, to look at its graph: its main graph's raw weights are left in the file
// (model_parse.h), not copied.
onnx::ModelProto model_without_weights(const std::string& path) {
  const onnx_import::MappedFile file(path, /*populate=*/false);
  onnx_import::ParsedModel pm;
  onnx_import::parse_model_bytes(file.bytes(), "ONNX model '" + path + "'", pm);
  return std::move(pm.proto);
}

}  // namespace

std::vector<std::string> onnx_model_op_types(const std::string& path) {
  const onnx::ModelProto m = model_without_weights(path);
  std::set<std::string> ops;
  for (const auto& n : m.graph().node()) ops.insert(n.op_type());
  return {ops.begin(), ops.end()};
}

std::vector<OnnxInputInfo> onnx_model_inputs(const std::string& path, const ImportOptions& o) {
  const onnx::ModelProto m = model_without_weights(path);
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  std::vector<OnnxInputInfo> out;
  int fresh = 0;
  for (const auto& in : m.graph().input()) {
    if (inits.count(in.name())) continue;
    OnnxInputInfo info;
    info.name = in.name();
    if (!in.type().has_tensor_type()) {
      throw OnnxUnsupportedError("graph input '" + in.name() + "' is not a tensor");
    }
    info.dtype = onnx_import::dtype_from_onnx(in.type().tensor_type().elem_type(),
                                              "graph input '" + in.name() + "'");
    info.shape = input_shape(in, o, &fresh);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ubfuse
