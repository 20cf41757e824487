// The `ubfuse` Python extension (_ubfuse): ONNX loading, compiled models that run on numpy arrays,
// explain and the profiler, over the public C++ API only (include/ubfuse). The package's
// __init__.py wraps it; docs/python.md describes what users see.
//
// Arrays: numpy has no bfloat16, so bf16 travels as its raw bits in uint16 (as in ubfuse's .npy
// files). Inputs of a dtype ubfuse has are viewed, not copied, when C-contiguous and aligned;
// others are converted once. Outputs own their memory: each array keeps its Tensor alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ubfuse/builder.h"
#include "ubfuse/compile.h"
#include "ubfuse/explain.h"
#include "ubfuse/onnx.h"
#include "ubfuse/profiler.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ubfuse::python {
namespace {

// numpy dtype of a ubfuse dtype (bf16: its bits as uint16).
py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return py::dtype::of<float>();
    case DType::bf16:
      return py::dtype::of<uint16_t>();
    case DType::f16:
      return py::dtype("float16");
    case DType::i64:
      return py::dtype::of<int64_t>();
    case DType::i32:
      return py::dtype::of<int32_t>();
    case DType::boolean:
      return py::dtype::of<bool>();
    case DType::i8:
      return py::dtype::of<int8_t>();
    case DType::u8:
      return py::dtype::of<uint8_t>();
  }
  throw Error("unknown dtype");
}

// The ubfuse dtype an array's dtype is, if any. uint16 is bf16 only where the model expects bf16
// (`want`); elsewhere it is a dtype ubfuse lacks. Non-native byte order is never one of ours.
std::optional<DType> ubfuse_dtype(const py::dtype& d, std::optional<DType> want) {
  char order = d.byteorder();
  if (order != '=' && order != '|') {
    // '<' on a little-endian machine is native too; numpy prints it as '='.
    if (!(order == '<' && py::dtype::of<uint16_t>().byteorder() == '=')) return std::nullopt;
  }
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'i' && size == 8) return DType::i64;
  if (kind == 'i' && size == 4) return DType::i32;
  if (kind == 'b' && size == 1) return DType::boolean;
  if (kind == 'i' && size == 1) return DType::i8;
  if (kind == 'u' && size == 1) return DType::u8;
  if (kind == 'u' && size == 2 && want == DType::bf16) return DType::bf16;
  return std::nullopt;
}

bool c_contiguous_aligned(const py::array& a) {
  constexpr int kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  constexpr int kC = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
  const int flags = py::detail::array_proxy(a.ptr())->flags;
  return (flags & kAligned) && (flags & kC);
}

Sizes sizes_of(const py::array& a) {
  Sizes s(size_t(a.ndim()));
  for (py::ssize_t i = 0; i < a.ndim(); i++) s[size_t(i)] = int64_t(a.shape(i));
  return s;
}

// A zero-element array may have no data pointer; a Tensor without one counts as missing.
void* data_of(const py::array& a) {
  static char empty[64];
  void* p = const_cast<void*>(a.data());
  return p ? p : empty;
}

// Caller arrays (and any converted copies) stay referenced here while a run uses their memory.
struct Inputs {
  std::map<std::string, Tensor> tensors;
  std::vector<py::array> keep;
};

// Inputs as the model expects them (docs/python.md, "Arrays"):
//   - an array of a ubfuse dtype is viewed when C-contiguous and aligned, else copied once into
//     C order; if its dtype is not the input's, it is passed on and the runtime reports it as it
//     does in C++ (so are unknown names);
//   - arrays of other dtypes (float64, int16, ...; int8 and uint8 for inputs of other dtypes),
//     lists and Python scalars are converted once to the input's dtype where numpy's same_kind
//     casting allows it, else refused;
//   - other libraries' tensors come in through DLPack (no copy), or numpy.asarray.
Inputs convert_inputs(const CompiledModel& m, const py::dict& inputs) {
  std::map<std::string, DType> declared;
  for (const Value* v : m.graph().inputs()) declared[v->name] = v->dtype;
  py::module_ np = py::module_::import("numpy");
  Inputs r;
  for (auto [k, obj] : inputs) {
    if (!py::isinstance<py::str>(k)) {
      throw Error("input names must be strings, got " + std::string(py::str(py::repr(k))));
    }
    std::string name = k.cast<std::string>();
    auto it = declared.find(name);
    std::optional<DType> want;
    if (it != declared.end()) want = it->second;
    const bool is_array = py::isinstance<py::array>(obj);
    // Lists, tuples and Python scalars get numpy's default dtypes (int64, float64), which the
    // caller did not choose: they take the input's dtype under the same rule as other dtypes.
    const bool plain = !is_array && !py::hasattr(obj, "dtype");
    // Objects that export DLPack (torch, JAX) are viewed through it; others (lists, __array__),
    // and what DLPack cannot carry (bool), through numpy.asarray, whose error stands.
    py::object arr = is_array ? py::reinterpret_borrow<py::object>(obj) : py::object();
    if (!arr && py::hasattr(obj, "__dlpack__")) {
      try {
        arr = np.attr("from_dlpack")(obj);
      } catch (const py::error_already_set&) {
      }
    }
    if (!arr) arr = np.attr("asarray")(obj);
    py::array a = py::reinterpret_borrow<py::array>(arr);
    std::optional<DType> dt = ubfuse_dtype(a.dtype(), want);
    // int8/uint8 arrays were converted before ubfuse had those dtypes; for an input of another
    // dtype they still are (numpy's same_kind rule), rather than refused at run time.
    if (dt && is_int8(*dt) && want && *want != *dt) dt.reset();
    if (!dt || (plain && want && dt != want)) {
      if (!want) {
        // Unknown name: an empty tensor under it gets the runtime's message listing the inputs.
        r.tensors[name] = Tensor();
        continue;
      }
      py::dtype target = numpy_dtype(*want);
      if (*want == DType::bf16 ||
          !np.attr("can_cast")(a.dtype(), target, "same_kind").cast<bool>()) {
        throw Error("input '" + name + "' is a numpy array of dtype " +
                    std::string(py::str(a.dtype())) + ", which ubfuse does not convert to the " +
                    std::string(dtype_name(*want)) + " the model expects" +
                    (*want == DType::bf16
                         ? "; hint: pass bf16 as its raw bits in uint16 (ubfuse.to_bf16(array))"
                         : "; hint: convert it with .astype(...)"));
      }
      a = a.attr("astype")(target, "order"_a = "C");
      dt = want;
    } else if (!c_contiguous_aligned(a)) {
      a = a.attr("copy")("order"_a = "C");
    }
    r.tensors[name] = Tensor::view(*dt, sizes_of(a), data_of(a));
    r.keep.push_back(std::move(a));
  }
  return r;
}

// Hands a Tensor's memory to numpy: the array's base owns a copy of the Tensor (sharing its
// buffer), so the memory lives as long as the array.
py::array to_numpy(const Tensor& t) {
  auto* owner = new Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
  return py::array(numpy_dtype(t.dtype()), shape, t.data(), base);
}

py::list shape_list(const Shape& s) {
  py::list l;
  for (const Dim& d : s) {
    if (d.is_static()) {
      l.append(py::int_(d.value()));
    } else {
      l.append(py::str(d.str()));
    }
  }
  return l;
}

std::string option_value(py::handle v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "1" : "0";
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v)) return py::str(v);
  throw Error("option values must be str, int, float or bool, got " + std::string(py::repr(v)));
}

Options to_options(const py::dict& d) {
  Options o;
  for (auto [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      throw Error("option names must be strings, got " + std::string(py::repr(k)));
    }
    o[k.cast<std::string>()] = option_value(v);
  }
  return o;
}

SymbolBindings to_dims(const py::dict& d) {
  SymbolBindings b;
  for (auto [k, v] : d) {
    if (!py::isinstance<py::str>(k) || !py::isinstance<py::int_>(v) ||
        py::isinstance<py::bool_>(v)) {
      throw Error("dims must map symbol names (str) to sizes (int), got " +
                  std::string(py::repr(k)) + ": " + std::string(py::repr(v)));
    }
    b[k.cast<std::string>()] = v.cast<int64_t>();
  }
  return b;
}

// GraphBuilder for Python: values are handles into the builder's current graph, which build()
// hands over; a handle from before build() (or from another builder) is refused by name rather
// than followed into freed memory.
struct PyBuilder {
  GraphBuilder b;
  int generation = 0;  // bumped by build(): older handles are stale
};

struct PyValue {
  std::shared_ptr<PyBuilder> owner;
  int generation = 0;
  Value* v = nullptr;
};

// A built graph, shared by every Model compiled from it (explain compiles it again).
struct PyGraph {
  std::shared_ptr<const Graph> g;
};

// The value behind a handle; its graph must still be the builder's (build() hands it over).
Value* live(const PyValue& v) {
  if (v.generation != v.owner->generation) {
    throw Error(
        "this value belongs to a graph its GraphBuilder already built; hint: values live until "
        "build()");
  }
  return v.v;
}

Value* use(const std::shared_ptr<PyBuilder>& b, const PyValue& v) {
  Value* x = live(v);
  if (v.owner != b) throw Error("value '" + x->name + "' belongs to another GraphBuilder");
  return x;
}

// Operands: a value of this builder, or a Python number (a scalar of the other operand's dtype).
Value* operand(const std::shared_ptr<PyBuilder>& b, py::handle x, Value* like) {
  if (py::isinstance<PyValue>(x)) return use(b, x.cast<const PyValue&>());
  if ((py::isinstance<py::float_>(x) || py::isinstance<py::int_>(x)) && like) {
    return b->b.scalar(x.cast<double>(), like->dtype);
  }
  throw Error("expected a GraphBuilder value" + std::string(like ? " or a number" : "") + ", got " +
              std::string(py::str(py::type::handle_of(x).attr("__name__"))));
}

Shape to_shape(const py::sequence& dims) {
  Shape s;
  for (py::handle d : dims) {
    if (py::isinstance<py::str>(d)) {
      s.emplace_back(d.cast<std::string>());
    } else if (py::isinstance<py::int_>(d) && !py::isinstance<py::bool_>(d)) {
      s.emplace_back(d.cast<int64_t>());
    } else {
      throw Error("a dim is an int or a symbol name (str), got " + std::string(py::repr(d)));
    }
  }
  return s;
}

// An array's contents as a Tensor that owns a copy (constants outlive the caller's array).
Tensor tensor_copy(const py::handle& obj, std::optional<DType> want = std::nullopt) {
  py::array a = py::array(py::module_::import("numpy").attr("asarray")(obj));
  std::optional<DType> dt = ubfuse_dtype(a.dtype(), want);
  if (!dt) {
    throw Error(
        "a constant of numpy dtype " + std::string(py::str(a.dtype())) +
        "; ubfuse takes float32, float16, int64, int32, int8, uint8 and bool (and bf16 bits "
        "as uint16 with dtype='bf16')");
  }
  a = a.attr("copy")("order"_a = "C");
  Tensor t(*dt, sizes_of(a));
  if (t.nbytes()) std::memcpy(t.data(), a.data(), t.nbytes());
  return t;
}

// A compiled model with the graph it came from (explain compiles that graph again, eager and
// fused) and the options it was compiled with.
struct Model {
  std::shared_ptr<const Graph> source;
  Options options;
  CompiledModel compiled;
  std::string name;
  int64_t opset = 0;
  std::string producer;
  std::vector<std::string> notes;
};

const char* kFusionKeys[] = {"ge.exec.enableOperatorFusion", "fusion"};

// mode ("graph" | "eager") sets the fusion switch, which options may also set, but not to the
// other value; rules is the rules file's path.
void apply_mode(Options& opts, const std::optional<std::string>& mode,
                const std::optional<std::string>& rules) {
  if (mode) {
    if (*mode != "graph" && *mode != "eager") {
      throw Error("mode must be 'graph' or 'eager', got '" + *mode + "'");
    }
    const std::string want = *mode == "graph" ? "1" : "0";
    for (const char* key : kFusionKeys) {
      auto it = opts.find(key);
      if (it != opts.end() && it->second != want) {
        throw Error("mode='" + *mode + "' but options['" + key + "'] is '" + it->second +
                    "'; hint: give one of them");
      }
    }
    opts[kFusionKeys[0]] = want;
    opts.erase(kFusionKeys[1]);
  }
  if (rules) opts["ge.fusion_optimizer_config_path"] = *rules;
}

// Lets Ctrl-C stop a long compile: compile() calls this on the compiling thread about every
// 100 ms while compilers run, and a pending KeyboardInterrupt cancels it.
void check_signals(const CompileProgress&) {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

Model load_onnx(const py::object& src, const std::optional<std::string>& mode,
                const py::dict& options, const std::optional<std::string>& rules,
                const py::dict& dims, const std::string& external_data_dir) {
  Options opts = to_options(options);
  apply_mode(opts, mode, rules);
  ImportOptions io;
  io.static_dims = to_dims(dims);
  io.external_data_dir = external_data_dir;

  Model m;
  OnnxModel om;
  if (py::isinstance<py::bytes>(src) || py::isinstance<py::bytearray>(src) ||
      py::isinstance<py::memoryview>(src)) {
    std::string bytes =
        py::isinstance<py::bytes>(src)
            ? src.cast<std::string>()
            : py::bytes(py::module_::import("builtins").attr("bytes")(src)).cast<std::string>();
    py::gil_scoped_release nogil;
    om = import_onnx_model_from_bytes(bytes, io);
    m.name = "<bytes>";
  } else {
    py::object fspath = py::module_::import("os").attr("fspath");
    std::string path;
    try {
      path = py::str(fspath(src)).cast<std::string>();
    } catch (const py::error_already_set&) {
      throw Error("load_onnx expects a path (str or os.PathLike) or the model's bytes, got " +
                  std::string(py::str(py::type::handle_of(src).attr("__name__"))));
    }
    py::gil_scoped_release nogil;
    om = import_onnx_model(path, io);
    m.name = path;
  }
  m.opset = om.opset;
  m.producer = om.producer;
  m.notes = om.notes;
  auto graph = std::make_shared<Graph>(std::move(om.graph));
  {
    py::gil_scoped_release nogil;
    m.compiled = compile(*graph, opts, check_signals);
  }
  m.source = std::move(graph);
  opts.erase(kFusionKeys[0]);  // explain sets the fusion switch itself
  opts.erase(kFusionKeys[1]);
  m.options = std::move(opts);
  return m;
}

Model compile_graph(const PyGraph& g, const std::optional<std::string>& mode,
                    const py::dict& options, const std::optional<std::string>& rules) {
  Options opts = to_options(options);
  apply_mode(opts, mode, rules);
  Model m;
  m.name = "graph";
  {
    py::gil_scoped_release nogil;
    m.compiled = compile(*g.g, opts, check_signals);
  }
  m.source = g.g;
  opts.erase(kFusionKeys[0]);
  opts.erase(kFusionKeys[1]);
  m.options = std::move(opts);
  return m;
}

// run()'s `stats` argument: None or a dict the call fills; checked before running.
void check_stats_arg(const py::object& stats) {
  if (!stats.is_none() && !py::isinstance<py::dict>(stats)) {
    throw Error("stats must be a dict for run() to fill, got " +
                std::string(py::str(py::type::handle_of(stats).attr("__name__"))));
  }
}

// Fills the caller's `stats` dict (when given) with where a run's time went.
void put_run_stats(const RunStats& rs, const py::object& stats) {
  if (stats.is_none()) return;
  py::dict d = py::reinterpret_borrow<py::dict>(stats);
  d["total_us"] = rs.total_us;
  d["plan_us"] = rs.plan_us;
  d["kernels_us"] = rs.kernels_us;
  d["overhead_us"] = rs.total_us - rs.plan_us - rs.kernels_us;
  d["plan_built"] = rs.plan_built;
  d["kernels_launched"] = rs.kernels_launched;
  d["kernels_precomputed"] = rs.kernels_precomputed;
  d["bytes_read"] = rs.bytes_read;
  d["bytes_written"] = rs.bytes_written;
  d["kv_rows_appended"] = rs.kv_rows_appended;
  d["kv_dense_copies"] = rs.kv_dense_copies;
}

// ubfuse.KvCache: the C++ cache, and a flag that keeps two runs from sharing it at once (the GIL
// is released while they run).
struct PyKvCache {
  KvCache cache;
  std::atomic<bool> busy{false};
};

// Runs m with `kv` (None: without a cache): the cache is held for the call, the GIL released.
void run_maybe_cached(const Model& m, const Inputs& in, const py::object& kv,
                      std::map<std::string, Tensor>& out, bool allocate, RunStats& rs) {
  if (kv.is_none()) {
    py::gil_scoped_release nogil;
    if (allocate) {
      out = m.compiled.run(in.tensors, &rs);
    } else {
      m.compiled.run_into(in.tensors, out, &rs);
    }
    return;
  }
  if (!py::isinstance<PyKvCache>(kv)) {
    throw Error("kv_cache must be a ubfuse.KvCache (model.kv_cache(max_length)), got " +
                std::string(py::str(py::type::handle_of(kv).attr("__name__"))));
  }
  PyKvCache& c = kv.cast<PyKvCache&>();
  if (c.busy.exchange(true)) {
    throw Error("the KV cache is in use by another run; hint: one cache per sequence and thread");
  }
  struct Free {
    std::atomic<bool>& b;
    ~Free() { b = false; }
  } free{c.busy};
  py::gil_scoped_release nogil;
  m.compiled.run_with_cache(in.tensors, c.cache, out, &rs);
}

py::dict run(const Model& m, const py::dict& inputs, const py::object& stats,
             const py::object& kv) {
  check_stats_arg(stats);
  Inputs in = convert_inputs(m.compiled, inputs);
  std::map<std::string, Tensor> out;
  RunStats rs;
  run_maybe_cached(m, in, kv, out, true, rs);
  put_run_stats(rs, stats);
  py::dict r;
  for (const std::string& name : m.compiled.output_names()) {
    auto it = out.find(name);
    if (it != out.end()) r[py::str(name)] = to_numpy(it->second);  // presents stay in a cache
  }
  return r;
}

// A read-only numpy view (no copy) of one pair's rows so far, kept alive by the cache object.
py::array cache_rows(const py::object& self, const std::string& present) {
  const PyKvCache& pc = self.cast<PyKvCache&>();
  if (pc.busy) throw Error("the KV cache is in use by a run; read its rows after it");
  const KvCache& c = pc.cache;
  for (const KvCache::Pair& p : c.pairs()) {
    if (p.present != present) continue;
    const Tensor& b = p.buffer;
    std::vector<py::ssize_t> shape(b.sizes().begin(), b.sizes().end()), strides(shape.size());
    py::ssize_t st = py::ssize_t(dtype_size(b.dtype()));
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = st;
      st *= shape[i];
    }
    shape[size_t(p.axis)] = c.length();
    py::array view(numpy_dtype(b.dtype()), shape, strides, b.data(), self);
    view.attr("setflags")("write"_a = false);  // the cache's own rows: runs write them
    return view;
  }
  return to_numpy(c.rows(present));  // its error names the presents it holds
}

// Writes into the caller's arrays; outputs the dict does not name are allocated and added to it,
// as CompiledModel::run_into fills a map.
void run_into(const Model& m, const py::dict& inputs, py::dict outputs, const py::object& stats,
              const py::object& kv) {
  check_stats_arg(stats);
  Inputs in = convert_inputs(m.compiled, inputs);
  std::map<std::string, DType> declared;
  for (auto& [name, v] : m.compiled.graph().outputs()) declared[name] = v->dtype;
  std::map<std::string, Tensor> out;
  for (auto [k, obj] : outputs) {
    std::string name = py::str(k).cast<std::string>();
    auto it = declared.find(name);
    if (!py::isinstance<py::str>(k) || it == declared.end()) {
      std::string names;
      for (auto& n : m.compiled.output_names()) names += (names.empty() ? "" : ", ") + n;
      throw Error("unknown output " + std::string(py::repr(k)) +
                  "; the model's outputs are: " + names);
    }
    auto want = [&] {  // built only for a message
      return std::string(dtype_name(it->second)) + " (numpy " +
             std::string(py::str(numpy_dtype(it->second))) + ")";
    };
    if (!py::isinstance<py::array>(obj)) {
      throw Error("output buffer '" + name + "' must be a numpy array of " + want() + ", got " +
                  std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
    }
    auto a = py::reinterpret_borrow<py::array>(obj);
    std::optional<DType> dt = ubfuse_dtype(a.dtype(), it->second);
    if (!dt) {
      throw Error("output buffer '" + name + "' has numpy dtype " +
                  std::string(py::str(a.dtype())) + "; this output is " + want());
    }
    if (!c_contiguous_aligned(a) || !a.writeable()) {
      throw Error("output buffer '" + name +
                  "' must be a writable, C-contiguous, aligned array (run_into writes into it "
                  "in place); hint: numpy.empty(shape, dtype) makes one");
    }
    out[name] = Tensor::view(*dt, sizes_of(a), a.mutable_data());
  }
  RunStats rs;
  run_maybe_cached(m, in, kv, out, false, rs);
  put_run_stats(rs, stats);
  for (const std::string& name : m.compiled.output_names()) {
    auto it = out.find(name);
    if (!outputs.contains(name) && it != out.end()) outputs[py::str(name)] = to_numpy(it->second);
  }
}

py::list value_infos(const std::vector<const Value*>& values,
                     const std::vector<std::string>& names) {
  py::list l;
  for (size_t i = 0; i < values.size(); i++) {
    l.append(py::dict("name"_a = names[i], "dtype"_a = std::string(dtype_name(values[i]->dtype)),
                      "shape"_a = shape_list(values[i]->shape)));
  }
  return l;
}

py::tuple explain_model(const Model& m, const py::dict& dims) {
  ExplainOptions o;
  o.options = m.options;
  o.dims = to_dims(dims);
  o.model_name = m.name;
  std::string text, json;
  {
    py::gil_scoped_release nogil;
    ExplainReport r = explain(*m.source, o);
    text = format_explain(r);
    json = explain_json(r);
  }
  return py::make_tuple(text, json);
}

// Profiler behind `with ubfuse.profile(...)`: stop() writes the trace; a profiler dropped while
// recording stops in its destructor.
struct PyProfiler {
  std::unique_ptr<Profiler> p;
};

}  // namespace
}  // namespace ubfuse::python

PYBIND11_MODULE(_ubfuse, mod) {
  using namespace ubfuse;
  using namespace ubfuse::python;
  mod.doc() = "ubfuse: buffer-level operator fusion for transformer inference (docs/python.md)";

  // Most derived last: pybind11 tries the translators newest first.
  // The exception types live as long as the process (never released after the interpreter
  // is gone); one translator tries the most derived first.
  static auto* error = new py::exception<Error>(mod, "Error", PyExc_RuntimeError);
  static auto* unsupported =
      new py::exception<OnnxUnsupportedError>(mod, "OnnxUnsupportedError", error->ptr());
  static auto* needs_static = new py::exception<OnnxNeedsStaticDimsError>(
      mod, "OnnxNeedsStaticDimsError", unsupported->ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OnnxNeedsStaticDimsError& e) {
      py::object exc = py::handle(needs_static->ptr())(e.what());
      exc.attr("symbols") = py::cast(e.symbols);
      PyErr_SetObject(needs_static->ptr(), exc.ptr());
    } catch (const OnnxUnsupportedError& e) {
      (*unsupported)(e.what());
    } catch (const Error& e) {
      (*error)(e.what());
    }
  });

  py::class_<PyKvCache>(mod, "KvCache")
      .def_property_readonly("length", [](const PyKvCache& c) { return c.cache.length(); })
      .def_property_readonly("max_length", [](const PyKvCache& c) { return c.cache.max_length(); })
      .def_property_readonly(
          "pairs",
          [](const PyKvCache& c) {
            py::list l;
            for (const KvCache::Pair& p : c.cache.pairs()) {
              l.append(py::dict("past"_a = p.past, "present"_a = p.present, "axis"_a = p.axis,
                                "shape"_a = std::vector<int64_t>(p.buffer.sizes().begin(),
                                                                 p.buffer.sizes().end())));
            }
            return l;
          })
      .def("reset",
           [](PyKvCache& c) {
             if (c.busy) throw Error("the KV cache is in use by a run; reset() it after");
             c.cache.reset();
           })
      .def("rows", &cache_rows, "present"_a)
      .def(
          "append",
          [](PyKvCache& c, const py::dict& presents) {
            if (c.busy) throw Error("the KV cache is in use by a run; append() after it");
            std::map<std::string, Tensor> rows;
            std::vector<py::array> keep;  // converted arrays, alive until the copy is done
            for (const KvCache::Pair& p : c.cache.pairs()) {
              if (!presents.contains(p.present)) continue;  // append() names what is missing
              py::array a = py::array::ensure(presents[py::str(p.present)],
                                              py::array::c_style | py::array::forcecast);
              if (!a) throw Error("present '" + p.present + "' is no array");
              std::optional<DType> dt = ubfuse_dtype(a.dtype(), p.buffer.dtype());
              if (!dt) {
                throw Error("present '" + p.present + "' has numpy dtype " +
                            std::string(py::str(a.dtype())) + "; the cache holds " +
                            std::string(dtype_name(p.buffer.dtype())));
              }
              rows[p.present] = Tensor::view(*dt, sizes_of(a), a.mutable_data());
              keep.push_back(a);
            }
            c.cache.append(rows);
          },
          "presents"_a)
      .def("__len__", [](const PyKvCache& c) { return c.cache.length(); });

  py::class_<Model>(mod, "Model")
      .def("run", &run, "inputs"_a, py::kw_only(), "stats"_a = py::none(),
           "kv_cache"_a = py::none())
      .def("run_into", &run_into, "inputs"_a, "outputs"_a, py::kw_only(), "stats"_a = py::none(),
           "kv_cache"_a = py::none())
      .def(
          "kv_cache",
          [](const Model& m, int64_t max_length, const py::dict& dims) {
            auto c = std::make_unique<PyKvCache>();
            c->cache = m.compiled.make_kv_cache(max_length, to_dims(dims));
            return c;
          },
          "max_length"_a, py::kw_only(), "dims"_a = py::dict())
      .def_property_readonly("inputs",
                             [](const Model& m) {
                               std::vector<const Value*> v(m.compiled.graph().inputs().begin(),
                                                           m.compiled.graph().inputs().end());
                               std::vector<std::string> names;
                               for (auto* x : v) names.push_back(x->name);
                               return value_infos(v, names);
                             })
      .def_property_readonly("outputs",
                             [](const Model& m) {
                               std::vector<const Value*> v;
                               std::vector<std::string> names;
                               for (auto& [n, x] : m.compiled.graph().outputs()) {
                                 names.push_back(n);
                                 v.push_back(x);
                               }
                               return value_infos(v, names);
                             })
      .def_property_readonly(
          "kernels",
          [](const Model& m) {
            py::list l;
            for (const KernelInfo& k : m.compiled.kernels()) {
              l.append(py::dict("name"_a = k.name, "nodes"_a = k.node_names,
                                "op_types"_a = k.op_types, "inputs"_a = k.input_values,
                                "outputs"_a = k.output_values, "host"_a = k.host,
                                "variant"_a = k.variant));
            }
            return l;
          })
      .def_property_readonly(
          "mode", [](const Model& m) { return m.compiled.fusion_enabled() ? "graph" : "eager"; })
      .def_property_readonly("num_threads", [](const Model& m) { return m.compiled.num_threads(); })
      .def_property_readonly("opset", [](const Model& m) { return m.opset; })
      .def_property_readonly("producer", [](const Model& m) { return m.producer; })
      .def_property_readonly("notes", [](const Model& m) { return m.notes; })
      .def_property_readonly("name", [](const Model& m) { return m.name; })
      .def_property_readonly(
          "stats",
          [](const Model& m) {
            CompileStats s = m.compiled.stats();
            const CompileProgress& k = s.kernels;
            return py::dict("compilations"_a = s.compilations, "plan_builds"_a = s.plan_builds,
                            "plan_cache_hits"_a = s.plan_cache_hits,
                            "plan_nodes_reused"_a = s.plan_nodes_reused,
                            "plan_nodes_inferred"_a = s.plan_nodes_inferred,
                            "compile_ms"_a = s.compile_ms, "generated_kernels"_a = k.kernels_total,
                            "kernels_compiled"_a = k.kernels_total - k.kernels_cached,
                            "kernel_cache_hits"_a = k.kernels_cached, "compile_jobs"_a = k.jobs,
                            "kernel_build_ms"_a = k.elapsed_ms);
          })
      .def("_explain", &explain_model, "dims"_a);

  py::class_<PyGraph>(mod, "Graph")
      .def_property_readonly("inputs",
                             [](const PyGraph& g) {
                               std::vector<const Value*> v;
                               std::vector<std::string> names;
                               for (auto* x : g.g->inputs()) {
                                 v.push_back(x);
                                 names.push_back(x->name);
                               }
                               return value_infos(v, names);
                             })
      .def_property_readonly("outputs",
                             [](const PyGraph& g) {
                               std::vector<const Value*> v;
                               std::vector<std::string> names;
                               for (auto& [n, x] : g.g->outputs()) {
                                 names.push_back(n);
                                 v.push_back(x);
                               }
                               return value_infos(v, names);
                             })
      .def("__str__", [](const PyGraph& g) { return print_graph(*g.g); });

  using B = std::shared_ptr<PyBuilder>;
  auto wrap = [](const B& b, Value* v) { return PyValue{b, b->generation, v}; };
  // Two operands of which at least one is a value; a number takes the value's dtype.
  auto pair = [](const B& b, py::handle x, py::handle y) {
    Value* vx = py::isinstance<PyValue>(x) ? use(b, x.cast<const PyValue&>()) : nullptr;
    Value* vy = py::isinstance<PyValue>(y) ? use(b, y.cast<const PyValue&>()) : nullptr;
    if (!vx && !vy) throw Error("at least one operand must be a GraphBuilder value");
    return std::pair{vx ? vx : operand(b, x, vy), vy ? vy : operand(b, y, vx)};
  };
  auto opt_value = [](const B& b, const std::optional<PyValue>& v) -> Value* {
    return v ? use(b, *v) : nullptr;
  };

  py::class_<PyValue>(mod, "Value")
      .def_property_readonly("name", [](const PyValue& v) { return live(v)->name; })
      .def_property_readonly(
          "dtype", [](const PyValue& v) { return std::string(dtype_name(live(v)->dtype)); })
      .def_property_readonly("shape", [](const PyValue& v) { return shape_list(live(v)->shape); })
      .def("__repr__",
           [](const PyValue& v) {
             if (v.generation != v.owner->generation) return std::string("<ubfuse.Value (built)>");
             return "<ubfuse.Value '" + v.v->name + "' " + std::string(dtype_name(v.v->dtype)) +
                    shape_str(v.v->shape) + ">";
           })
      .def("__add__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, py::cast(a), o);
             return wrap(a.owner, a.owner->b.add(x, y));
           })
      .def("__radd__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, o, py::cast(a));
             return wrap(a.owner, a.owner->b.add(x, y));
           })
      .def("__sub__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, py::cast(a), o);
             return wrap(a.owner, a.owner->b.sub(x, y));
           })
      .def("__rsub__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, o, py::cast(a));
             return wrap(a.owner, a.owner->b.sub(x, y));
           })
      .def("__mul__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, py::cast(a), o);
             return wrap(a.owner, a.owner->b.mul(x, y));
           })
      .def("__rmul__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, o, py::cast(a));
             return wrap(a.owner, a.owner->b.mul(x, y));
           })
      .def("__truediv__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, py::cast(a), o);
             return wrap(a.owner, a.owner->b.div(x, y));
           })
      .def("__rtruediv__",
           [wrap, pair](const PyValue& a, py::handle o) {
             auto [x, y] = pair(a.owner, o, py::cast(a));
             return wrap(a.owner, a.owner->b.div(x, y));
           })
      .def("__matmul__",
           [wrap](const PyValue& a, const PyValue& o) {
             return wrap(a.owner, a.owner->b.matmul(use(a.owner, a), use(a.owner, o)));
           })
      .def("__neg__",
           [wrap](const PyValue& a) { return wrap(a.owner, a.owner->b.neg(use(a.owner, a))); });

  py::class_<PyBuilder, B> builder(mod, "GraphBuilder");
  builder.def(py::init([] { return std::make_shared<PyBuilder>(); }))
      .def(
          "input",
          [wrap](const B& b, const std::string& name, const std::string& dtype,
                 const py::sequence& shape) {
            return wrap(b, b->b.input(name, parse_dtype(dtype), to_shape(shape)));
          },
          "name"_a, "dtype"_a, "shape"_a)
      .def(
          "output",
          [](const B& b, const std::string& name, const PyValue& v) {
            b->b.output(name, use(b, v));
          },
          "name"_a, "value"_a)
      .def(
          "constant",
          [wrap](const B& b, const py::object& array, const std::string& name,
                 const std::optional<std::string>& dtype) {
            std::optional<DType> want;
            if (dtype) want = parse_dtype(*dtype);
            Tensor t = tensor_copy(array, want);
            if (want && t.dtype() != *want) {
              throw Error("constant: the array is " + std::string(dtype_name(t.dtype())) +
                          ", not the " + *dtype + " asked for");
            }
            return wrap(b, b->b.constant(t, name));
          },
          "array"_a, "name"_a = "", "dtype"_a = py::none())
      .def(
          "scalar",
          [wrap](const B& b, double v, const std::string& dtype) {
            return wrap(b, b->b.scalar(v, parse_dtype(dtype)));
          },
          "value"_a, "dtype"_a = "f32")
      .def(
          "gelu",
          [wrap](const B& b, const PyValue& x, bool tanh_approx) {
            return wrap(b, b->b.gelu(use(b, x), tanh_approx));
          },
          "x"_a, "tanh_approx"_a = false)
      .def(
          "pow",
          [wrap](const B& b, const PyValue& x, double e) {
            return wrap(b, b->b.pow(use(b, x), e));
          },
          "x"_a, "exponent"_a)
      .def(
          "cast",
          [wrap](const B& b, const PyValue& x, const std::string& to) {
            return wrap(b, b->b.cast(use(b, x), parse_dtype(to)));
          },
          "x"_a, "to"_a)
      .def(
          "layer_norm",
          [wrap, opt_value](const B& b, const PyValue& x, const std::optional<PyValue>& w,
                            const std::optional<PyValue>& bias, double eps) {
            return wrap(b, b->b.layer_norm(use(b, x), opt_value(b, w), opt_value(b, bias), eps));
          },
          "x"_a, "weight"_a = py::none(), "bias"_a = py::none(), "eps"_a = 1e-5)
      .def(
          "rms_norm",
          [wrap, opt_value](const B& b, const PyValue& x, const std::optional<PyValue>& w,
                            double eps) {
            return wrap(b, b->b.rms_norm(use(b, x), opt_value(b, w), eps));
          },
          "x"_a, "weight"_a = py::none(), "eps"_a = 1e-6)
      .def(
          "softmax",
          [wrap](const B& b, const PyValue& x) { return wrap(b, b->b.softmax(use(b, x))); }, "x"_a)
      .def(
          "reduce_sum",
          [wrap](const B& b, const PyValue& x, bool keepdims) {
            return wrap(b, b->b.reduce_sum(use(b, x), keepdims));
          },
          "x"_a, "keepdims"_a = true)
      .def(
          "reduce_mean",
          [wrap](const B& b, const PyValue& x, bool keepdims) {
            return wrap(b, b->b.reduce_mean(use(b, x), keepdims));
          },
          "x"_a, "keepdims"_a = true)
      .def(
          "reduce_max",
          [wrap](const B& b, const PyValue& x, bool keepdims) {
            return wrap(b, b->b.reduce_max(use(b, x), keepdims));
          },
          "x"_a, "keepdims"_a = true)
      .def(
          "rotate_half",
          [wrap](const B& b, const PyValue& x, bool interleaved, int64_t rotary_dims) {
            return wrap(b, b->b.rotate_half(use(b, x), interleaved, rotary_dims));
          },
          "x"_a, "interleaved"_a = false, "rotary_dims"_a = 0)
      .def(
          "matmul",
          [wrap](const B& b, const PyValue& x, const PyValue& y) {
            return wrap(b, b->b.matmul(use(b, x), use(b, y)));
          },
          "a"_a, "b"_a)
      .def(
          "gather",
          [wrap](const B& b, const PyValue& data, const PyValue& idx, int64_t axis) {
            return wrap(b, b->b.gather(use(b, data), use(b, idx), axis));
          },
          "data"_a, "indices"_a, "axis"_a = 0)
      .def(
          "conv",
          [wrap, opt_value](const B& b, const PyValue& x, const PyValue& w,
                            const std::optional<PyValue>& bias, std::vector<int64_t> strides,
                            std::vector<int64_t> pads, std::vector<int64_t> dilations,
                            int64_t group, const std::string& auto_pad) {
            ConvOptions o{std::move(strides), std::move(pads), std::move(dilations), group,
                          auto_pad};
            return wrap(b, b->b.conv(use(b, x), use(b, w), opt_value(b, bias), o));
          },
          "x"_a, "w"_a, "bias"_a = py::none(), "strides"_a = std::vector<int64_t>{},
          "pads"_a = std::vector<int64_t>{}, "dilations"_a = std::vector<int64_t>{}, "group"_a = 1,
          "auto_pad"_a = "NOTSET")
      .def(
          "group_norm",
          [wrap, opt_value](const B& b, const PyValue& x, const std::optional<PyValue>& scale,
                            const std::optional<PyValue>& bias, int64_t groups, double eps) {
            return wrap(b, b->b.group_norm(use(b, x), opt_value(b, scale), opt_value(b, bias),
                                           groups, eps));
          },
          "x"_a, "scale"_a, "bias"_a, "groups"_a, "eps"_a = 1e-5)
      .def(
          "pad",
          [wrap, opt_value](const B& b, const PyValue& x, std::vector<int64_t> pads,
                            const std::string& mode, const std::optional<PyValue>& value) {
            return wrap(b, b->b.pad(use(b, x), std::move(pads), mode, opt_value(b, value)));
          },
          "x"_a, "pads"_a, "mode"_a = "constant", "value"_a = py::none())
      .def(
          "reshape",
          [wrap](const B& b, const PyValue& x, std::vector<int64_t> shape) {
            return wrap(b, b->b.reshape(use(b, x), std::move(shape)));
          },
          "x"_a, "shape"_a)
      .def(
          "transpose",
          [wrap](const B& b, const PyValue& x, std::vector<int64_t> perm) {
            return wrap(b, b->b.transpose(use(b, x), std::move(perm)));
          },
          "x"_a, "perm"_a)
      .def(
          "slice",
          [wrap](const B& b, const PyValue& x, std::vector<int64_t> starts,
                 std::vector<int64_t> ends, std::vector<int64_t> axes, std::vector<int64_t> steps) {
            return wrap(b, b->b.slice(use(b, x), std::move(starts), std::move(ends),
                                      std::move(axes), std::move(steps)));
          },
          "x"_a, "starts"_a, "ends"_a, "axes"_a, "steps"_a = std::vector<int64_t>{})
      .def(
          "concat",
          [wrap](const B& b, const std::vector<PyValue>& xs, int64_t axis) {
            std::vector<Value*> v;
            for (auto& x : xs) v.push_back(use(b, x));
            return wrap(b, b->b.concat(std::move(v), axis));
          },
          "values"_a, "axis"_a)
      .def(
          "expand",
          [wrap](const B& b, const PyValue& x, const py::sequence& shape) {
            return wrap(b, b->b.expand(use(b, x), to_shape(shape)));
          },
          "x"_a, "shape"_a)
      .def(
          "name_last", [](const B& b, const std::string& name) { b->b.name_last(name); }, "name"_a)
      .def("build", [](const B& b) {
        PyGraph g{std::make_shared<const Graph>(b->b.build())};
        b->generation++;
        return g;
      });
  // The elementwise math of ops.def, one method per row: unary f(x), binary f(a, b) (a Python
  // number takes the other operand's dtype), where(cond, a, b).
#define UBF_BUILDER_1(fn) \
  builder.def(            \
      #fn, [wrap](const B& b, const PyValue& x) { return wrap(b, b->b.fn(use(b, x))); }, "x"_a);
#define UBF_BUILDER_2(fn)                                    \
  builder.def(                                               \
      #fn,                                                   \
      [wrap, pair](const B& b, py::handle x, py::handle y) { \
        auto [vx, vy] = pair(b, x, y);                       \
        return wrap(b, b->b.fn(vx, vy));                     \
      },                                                     \
      "a"_a, "b"_a);
#define UBF_BUILDER_3(fn)                                                        \
  builder.def(                                                                   \
      #fn,                                                                       \
      [wrap](const B& b, const PyValue& c, const PyValue& x, const PyValue& y) { \
        return wrap(b, b->b.fn(use(b, c), use(b, x), use(b, y)));                \
      },                                                                         \
      "cond"_a, "a"_a, "b"_a);
#define UBF_OP(...)
#define UBF_MATH(name, arity, types, fn, ...) UBF_BUILDER_##arity(fn)
#include "ubfuse/ops.def"
#undef UBF_BUILDER_1
#undef UBF_BUILDER_2
#undef UBF_BUILDER_3

  mod.def("_compile", &compile_graph, "graph"_a, "mode"_a, "options"_a, "rules"_a);

  mod.def("_load_onnx", &load_onnx, "src"_a, "mode"_a, "options"_a, "rules"_a, "dims"_a,
          "external_data_dir"_a);
  mod.def("onnx_supported_ops", &onnx_supported_ops);

  py::class_<PyProfiler>(mod, "_Profiler")
      .def(py::init([](const std::string& trace_dir, const std::string& name, bool record_shapes,
                       bool with_bandwidth) {
             ProfilerOptions o{.trace_dir = trace_dir,
                               .record_shapes = record_shapes,
                               .name = name,
                               .with_bandwidth = with_bandwidth};
             py::gil_scoped_release nogil;  // the first use measures the memory bandwidth
             return PyProfiler{std::make_unique<Profiler>(o)};
           }),
           "trace_dir"_a, "name"_a, "record_shapes"_a, "with_bandwidth"_a)
      .def("step", [](PyProfiler& p) { p.p->step(); })
      .def("record_compile",
           [](PyProfiler& p, const Model& m, const std::string& label) {
             p.p->record_compile(m.compiled, label);
           })
      .def("stop",
           [](PyProfiler& p) {
             py::gil_scoped_release nogil;
             p.p->stop();
           })
      .def_property_readonly("recording", [](const PyProfiler& p) { return p.p->recording(); })
      .def_property_readonly("trace_path", [](const PyProfiler& p) { return p.p->trace_path(); })
      .def("summary_table", [](const PyProfiler& p) { return p.p->summary().table(); })
      .def("summary_rows", [](const PyProfiler& p) {
        py::list l;
        for (const KernelSummaryRow& r : p.p->summary().rows) {
          l.append(py::dict("name"_a = r.name, "cat"_a = r.cat, "ops"_a = r.ops,
                            "calls"_a = r.calls, "total_us"_a = r.total_us, "mean_us"_a = r.mean_us,
                            "min_us"_a = r.min_us, "max_us"_a = r.max_us,
                            "pct_of_time"_a = r.pct_of_time, "bytes"_a = r.bytes,
                            "gb_per_s"_a = r.gb_per_s, "pct_of_bandwidth"_a = r.pct_of_bandwidth));
        }
        return l;
      });

  // bf16 as uint16 bits: numpy has no bfloat16. Rounding as ubfuse's kernels round.
  mod.def(
      "to_bf16",
      [](py::array_t<float, py::array::c_style | py::array::forcecast> a) {
        py::array_t<uint16_t> r(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
        const float* s = a.data();
        uint16_t* d = r.mutable_data();
        for (py::ssize_t i = 0; i < a.size(); i++) d[i] = f32_to_bf16(s[i]);
        return r;
      },
      "array"_a);
  mod.def(
      "from_bf16",
      [](py::array_t<uint16_t, py::array::c_style> a) {
        py::array_t<float> r(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
        const uint16_t* s = a.data();
        float* d = r.mutable_data();
        for (py::ssize_t i = 0; i < a.size(); i++) d[i] = bf16_to_f32(s[i]);
        return r;
      },
      "bits"_a);
}
