// ONNX import: features (symbolic shapes, shape arithmetic folded at import, external data, typed
// initializer fields, PyTorch-style masks) checked against numpy references, and the errors for
// unsupported and malformed models. The models come from tests/models/make_onnx_cases.py.
#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "onnx_one_node.h"
#include "test_util.h"
#include "ubfuse/npy.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::throws_with;

std::string case_path(const std::string& name) {
  return std::string(UBFUSE_SOURCE_DIR) + "/tests/models/onnx_cases/" + name;
}

Tensor case_npy(const std::string& name) { return read_npy(case_path(name + ".npy")); }

::testing::AssertionResult close(const Tensor& got, const Tensor& want, double tol = 1e-4) {
  if (got.sizes() != want.sizes()) {
    return ::testing::AssertionFailure()
           << "sizes " << sizes_str(got.sizes()) << " vs " << sizes_str(want.sizes());
  }
  for (int64_t i = 0; i < got.numel(); i++) {
    double a = got.get(i), b = want.get(i);
    if (std::isinf(b) && a == b) continue;
    if (!(std::fabs(a - b) <= tol + tol * std::fabs(b))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs " << b;
    }
  }
  return ::testing::AssertionSuccess();
}

// Imports `name`.onnx, runs it in both modes on `in` and compares output `out` with the numpy file.
void check_case(const std::string& name, const std::string& in, const std::string& out,
                const ImportOptions& o = {}) {
  Graph g = import_onnx(case_path(name + ".onnx"), o);
  std::map<std::string, Tensor> inputs{{in, case_npy(name + "." + in)}};
  Tensor want = case_npy(name + "." + out);
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    auto got = compile(g, opts).run(inputs);
    EXPECT_TRUE(close(got.at(out), want)) << name << " fusion=" << opts.begin()->second;
  }
}

int count_ops(const Graph& g, OpKind k) {
  int n = 0;
  for (Node* node : g.topo_order()) n += node->op == k;
  return n;
}

TEST(OnnxImport, GemmWithTransposeAlphaBeta) {
  Graph g = import_onnx(case_path("gemm_relu.onnx"));
  EXPECT_EQ(shape_str(g.inputs()[0]->shape), "[N,4]");
  check_case("gemm_relu", "x", "y");
}

TEST(OnnxImport, SymbolicShapeArithmeticIsFoldedAndStaysSymbolic) {
  Graph g = import_onnx(case_path("symbolic_reshape.onnx"));
  EXPECT_EQ(shape_str(g.inputs()[0]->shape), "[batch,seq,8]");
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[batch,seq,8]");
  // Shape -> Gather -> Unsqueeze -> Concat left no trace: only data ops remain.
  EXPECT_EQ(count_ops(g, OpKind::Concat), 0) << print_graph(g);
  EXPECT_EQ(count_ops(g, OpKind::Gather), 0);
  EXPECT_EQ(count_ops(g, OpKind::Reshape), 2);
  check_case("symbolic_reshape", "x", "y");
  // One compiled model serves other sizes.
  CompiledModel m = compile(g, testing::graph_opts());
  Tensor x = Tensor::random(DType::f32, {3, 5, 8}, 9);
  Tensor y = m.run({{"x", x}}).at("y");
  for (int64_t i = 0; i < x.numel(); i++) ASSERT_EQ(y.get(i), -x.get(i));
}

// Shape arithmetic on sums and differences of symbols (a KV cache's past + seq, minus 1 for a
// slice end, minus 2 times 4 for a reshape) folds to dim polynomials, so nothing needs --dim.
TEST(OnnxImport, KvCacheShapeArithmeticStaysSymbolic) {
  Graph g = import_onnx(case_path("kv_concat.onnx"));
  EXPECT_EQ(shape_str(g.outputs()[0].second->shape), "[batch,4*past+4*seq-8]");
  EXPECT_EQ(count_ops(g, OpKind::Concat), 1) << print_graph(g);  // the cache; the rest folded
  std::map<std::string, Tensor> in{{"past", case_npy("kv_concat.past")},
                                   {"x", case_npy("kv_concat.x")}};
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    EXPECT_TRUE(close(compile(g, opts).run(in).at("y"), case_npy("kv_concat.y")));
  }
  CompiledModel m = compile(g, testing::graph_opts());
  for (auto [p, s] : std::vector<std::pair<int64_t, int64_t>>{{5, 1}, {0, 3}, {7, 4}}) {
    Tensor past = Tensor::random(DType::f32, {2, p, 4}, 10 + p);
    Tensor x = Tensor::random(DType::f32, {2, s, 4}, 20 + s);
    Tensor y = m.run({{"past", past}, {"x", x}}).at("y");
    ASSERT_EQ(y.sizes(), (Sizes{2, 4 * (p + s - 2)})) << p << "+" << s;
    for (int64_t b = 0; b < 2; b++) {
      for (int64_t t = 1; t < p + s - 1; t++) {
        for (int64_t c = 0; c < 4; c++) {
          double want = t < p ? past.get((b * p + t) * 4 + c) : x.get((b * s + t - p) * 4 + c);
          ASSERT_EQ(y.get(b * 4 * (p + s - 2) + (t - 1) * 4 + c), -want) << p << "+" << s;
        }
      }
    }
  }
}

// A dim_param is one name to ONNX whatever it spells, so "batch-size" and
// "past_sequence_length + 1" stay single symbols rather than reading as dim arithmetic.
TEST(OnnxImport, DimParamsAreOneSymbolWhateverTheySpell) {
  Graph g = import_onnx(case_path("odd_dim_params.onnx"));
  EXPECT_EQ(shape_str(g.inputs()[0]->shape), "[batch_size,past_sequence_length___1,3]");
  EXPECT_EQ(count_ops(g, OpKind::Where), 0) << print_graph(g);  // Equal on shapes decided
  check_case("odd_dim_params", "x", "y");
}

// Runs one compiled model of g at each size of `dim` in both modes against the reference.
void check_lengths(const Graph& g, const std::string& in, Shape shape_of_len(int64_t),
                   std::initializer_list<int64_t> lens) {
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (int64_t len : lens) {
      std::vector<int64_t> sizes;
      for (auto& d : shape_of_len(len)) sizes.push_back(d.value());
      std::map<std::string, Tensor> inputs{{in, Tensor::random(DType::f32, sizes, 3)}};
      auto want = ref::run_graph(g, inputs);
      auto got = m.run(inputs);
      for (auto& [name, w] : want) {
        EXPECT_TRUE(testing::close_to_ref(got.at(name), w))
            << name << " len " << len << " fusion=" << opts.begin()->second;
      }
    }
  }
}

// Range(0, Shape(x)[2], 1) runs on the host when the plan is built: no --dim, one compile.
TEST(OnnxImport, RangeOverSymbolicLengthRunsAtEveryLength) {
  Graph g = import_onnx(case_path("range_mask.onnx"));
  EXPECT_EQ(shape_str(g.inputs()[0]->shape), "[batch,seq,seq]");
  EXPECT_EQ(count_ops(g, OpKind::Range), 1) << print_graph(g);
  check_case("range_mask", "x", "y");
  check_lengths(g, "x", [](int64_t n) { return Shape{2, n, n}; }, {1, 4, 7});
  // A size given at import still folds the Range away.
  ImportOptions o;
  o.static_dims["seq"] = 4;
  Graph s = import_onnx(case_path("range_mask.onnx"), o);
  EXPECT_EQ(shape_str(s.inputs()[0]->shape), "[batch,4,4]");
  EXPECT_EQ(count_ops(s, OpKind::Range), 0) << print_graph(s);
  check_case("range_mask", "x", "y", o);
}

// A shape's dim cast to int32 (onnxruntime-genai's total_sequence_length: Shape -> Gather ->
// Cast) is int32, as a symbolic dim and as a constant, and adds to an int32 input.
TEST(OnnxImport, ShapeDimsCastToInt32AreInt32) {
  for (int64_t len : {int64_t(-2), int64_t(7)}) {  // the symbol S, or a static 7
    Graph g = testing::OneNode("Shape", 17)
                  .input("x", testing::kFloat, {2, len})
                  .to("shape")
                  .then("Gather")
                  .from("shape")
                  .ints("one", {}, {1})
                  .to("n")
                  .then("Cast")
                  .from("n")
                  .attr("to", int64_t(onnx::TensorProto::INT32))
                  .to("n32")
                  .then("Add")
                  .from("n32")
                  .input("y", testing::kInt32, {1})
                  .output("z", testing::kInt32)
                  .import();
    EXPECT_EQ(g.outputs()[0].second->dtype, DType::i32) << print_graph(g);
    Tensor y = Tensor::zeros(DType::i32, {1});
    y.set(0, 5);
    for (const Options& o : {testing::eager_opts(), testing::graph_opts()}) {
      const Tensor z = compile(g, o).run({{"x", Tensor::zeros(f32, {2, 7})}, {"y", y}}).at("z");
      ASSERT_EQ(z.dtype(), DType::i32);
      EXPECT_EQ(z.data_as<int32_t>()[0], 12);
    }
  }
}

// x[:, :3] of a symbolic axis is min(3, seq) long: a run-time dim, bound by each plan.
TEST(OnnxImport, HeadSliceOfSymbolicAxisHasARunTimeLength) {
  Graph g = import_onnx(case_path("head_slice.onnx"));
  const Dim& len = g.outputs()[0].second->shape[1];
  EXPECT_TRUE(!len.is_static() && len.str()[0] == '$') << len.str();
  check_case("head_slice", "x", "y");
  check_lengths(g, "x", [](int64_t n) { return Shape{2, n, 2}; }, {1, 2, 3, 5});
  ImportOptions o;
  o.static_dims["seq"] = 5;
  check_case("head_slice", "x", "y", o);
}

// PyTorch's cls_token.expand(b, -1, -1) prologue reshapes its size list to [-1] before turning
// the -1s into 1s: the vector keeps its symbolic elements, so Expand's target is known at import.
TEST(OnnxImport, ExpandPrologueKeepsTheSymbolicBatch) {
  Graph g = import_onnx(case_path("expand_prologue.onnx"));
  ASSERT_EQ(count_ops(g, OpKind::Expand), 1) << print_graph(g);
  for (Node* n : g.topo_order()) {
    if (n->op == OpKind::Expand) {
      EXPECT_EQ(shape_str(n->out()->shape), "[batch,4]");
    }
  }
  check_case("expand_prologue", "x", "y");
}

TEST(OnnxImport, TriluOfConstantFoldsToAConstantMask) {
  Graph g = import_onnx(case_path("trilu_mask.onnx"));
  EXPECT_EQ(g.num_nodes(), 2) << print_graph(g);  // the mask constant and the Add
  check_case("trilu_mask", "x", "y");
}

TEST(OnnxImport, TypedFieldsDoubleAndHalfInitializers) {
  OnnxModel m = import_onnx_model(case_path("typed_fields.onnx"));
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("DOUBLE converted to FLOAT"), std::string::npos);
  EXPECT_EQ(m.opset, 17);
  EXPECT_EQ(m.producer, "make_onnx_cases");
  check_case("typed_fields", "x", "z");
}

TEST(OnnxImport, ExternalDataRelativeToTheModel) {
  check_case("external_data", "x", "y");
  EXPECT_TRUE(throws_with([] { import_onnx(case_path("external_escape.onnx")); },
                          {"external_escape.onnx", "'w'", "leaves the model's folder"}));
}

TEST(OnnxImport, FromBytesNeedsTheExternalDataDir) {
  std::ifstream f(case_path("external_data.onnx"), std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  ImportOptions o;
  o.external_data_dir = case_path("");
  Graph g = import_onnx_from_bytes(ss.str(), o);
  EXPECT_EQ(g.inputs().size(), 1u);
}

template <typename E>
::testing::AssertionResult throws_type(const std::string& model,
                                       std::initializer_list<std::string> fragments) {
  try {
    import_onnx(case_path(model));
  } catch (const E& e) {
    std::string msg = e.what();
    for (auto& f : fragments) {
      if (msg.find(f) == std::string::npos) {
        return ::testing::AssertionFailure() << "\"" << msg << "\" lacks \"" << f << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception type: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception";
}

TEST(OnnxImportErrors, UnsupportedOpNamesNodeAndListsSupportedOps) {
  EXPECT_TRUE(throws_type<OnnxUnsupportedError>(
      "unsupported_op.onnx", {"node 'nz' (NonZero)", "op 'NonZero' is not supported",
                              "supported ops: Abs, Acos,", "LayerNormalization", "Where"}));
}

TEST(OnnxImportErrors, UnsupportedAttributeValueNamesNodeAndAttribute) {
  EXPECT_TRUE(throws_type<OnnxUnsupportedError>(
      "unsupported_attr.onnx", {"node 'ln' (LayerNormalization)", "'stash_type' = 0"}));
  EXPECT_TRUE(throws_type<OnnxUnsupportedError>(
      "unknown_attr.onnx", {"node 'r' (Relu)", "attribute 'flavor' is not supported"}));
  EXPECT_TRUE(
      throws_type<OnnxUnsupportedError>("double_input.onnx", {"graph input 'x'", "DOUBLE"}));
}

TEST(OnnxImportErrors, MalformedModelsAreCleanErrors) {
  auto malformed = [](const std::string& model, std::initializer_list<std::string> frags) {
    try {
      import_onnx(case_path(model));
    } catch (const OnnxUnsupportedError& e) {
      return ::testing::AssertionFailure() << "reported as unsupported: " << e.what();
    } catch (const Error& e) {
      std::string msg = e.what();
      for (auto& f : frags) {
        if (msg.find(f) == std::string::npos)
          return ::testing::AssertionFailure() << msg << " lacks " << f;
      }
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no exception";
  };
  EXPECT_TRUE(malformed("bad_raw_size.onnx", {"tensor 'w'", "raw data has 7 bytes", "24"}));
  // Dims of 4e15 bytes with 3 values: the payload is checked before anything is allocated.
  EXPECT_TRUE(malformed("huge_dims.onnx",
                        {"tensor 'w'", "float_data has 3 values", "need 1000000000000000"}));
  EXPECT_TRUE(malformed("bad_dtype_enum.onnx", {"tensor 'w'", "data_type 99"}));
  EXPECT_TRUE(malformed("bad_order.onnx", {"node 'late' (Relu)", "'t'", "topologically sorted"}));
  EXPECT_TRUE(malformed("bad_axis.onnx", {"node 'sm' (Softmax)", "axis 5 is out of range"}));
  EXPECT_TRUE(malformed("not_a_model.onnx", {"not a valid ONNX model"}));
  EXPECT_TRUE(malformed("missing.onnx", {"cannot open"}));
}

// Truncated and bit-flipped models must give ubfuse::Error or import, never crash.
TEST(OnnxImportErrors, MutatedBytesNeverCrash) {
  for (const char* name : {"gemm_relu.onnx", "symbolic_reshape.onnx", "typed_fields.onnx"}) {
    std::ifstream f(case_path(name), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string good = ss.str();
    std::mt19937 rng(1);
    int errors = 0, ok = 0;
    for (int trial = 0; trial < 300; trial++) {
      std::string b = good;
      if (trial < 100) {
        b.resize(size_t(rng()) % b.size());
      } else {
        for (int k = 0; k < 1 + trial % 4; k++) b[size_t(rng()) % b.size()] = char(rng());
      }
      try {
        import_onnx_from_bytes(b);
        ok++;
      } catch (const Error&) {
        errors++;
      }
    }
    EXPECT_GT(errors, 0) << name;
    (void)ok;
  }
}

TEST(OnnxImport, SupportedOpsAreSortedAndCoverTransformerExports) {
  auto ops = onnx_supported_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"Gather",     "Erf",
                         "Expand",     "Unsqueeze",
                         "Squeeze",    "Split",
                         "Gemm",       "LayerNormalization",
                         "Equal",      "Where",
                         "Trilu",      "Range",
                         "Shape",      "ConstantOfShape",
                         "MatMul",     "Softmax",
                         "Transpose",  "Reshape",
                         "Slice",      "Concat",
                         "Cast",       "Sqrt",
                         "Div",        "Pow",
                         "ReduceMean", "Neg",
                         "Tanh",       "Sigmoid",
                         "Relu",       "Max",
                         "Min"}) {
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), op)) << op;
  }
}

TEST(OnnxImport, LoadsTensorProtoFiles) {
  std::string dir = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0/";
  if (!std::ifstream(dir + "input_0.pb")) GTEST_SKIP() << "no libonnx-testdata";
  std::string name;
  Tensor t = load_onnx_tensor(dir + "input_0.pb", &name);
  EXPECT_EQ(name, "x");
  EXPECT_EQ(t.sizes(), (Sizes{3, 4, 5}));
  EXPECT_TRUE(throws_with([] { load_onnx_tensor("/nonexistent.pb"); }, {"cannot open"}));
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

// Optimum's merged decoder in miniature: the If's condition is a graph input, read when the plan
// is built; both branches are compiled once and either one's outputs (of different lengths) come
// out of one compiled model.
TEST(OnnxImport, IfPicksItsBranchAtRunTime) {
  Graph g = import_onnx(case_path("if_cache.onnx"));
  EXPECT_EQ(count_ops(g, OpKind::If), 1) << print_graph(g);
  // present is [batch, past_len+seq, 4] in one branch and [batch, seq, 4] in the other.
  EXPECT_EQ(g.outputs()[0].second->shape[1].str(), "seq");
  EXPECT_EQ(g.outputs()[1].second->shape[1].str().substr(0, 1), "$");
  const Tensor w = [&] {
    for (Node* n : g.topo_order()) {
      if (n->op == OpKind::If) {
        for (Node* m : n->branches[1]->topo_order()) {
          if (m->op == OpKind::Constant) return m->payload;
        }
      }
    }
    return Tensor();
  }();
  ASSERT_TRUE(w.defined());
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    EXPECT_EQ(m.kernels().size(), 1u);
    for (bool cache : {true, false, true}) {
      for (int64_t past : {0, 5}) {
        const int64_t b = 2, s = cache ? 1 : 3;
        Tensor x = Tensor::random(DType::f32, {b, s, 4}, 7 + past);
        Tensor p = Tensor::random(DType::f32, {b, past, 4}, 8);
        Tensor c = Tensor::from_floats(DType::boolean, {1}, {cache ? 1.0f : 0.0f});
        std::map<std::string, Tensor> in{{"x", x}, {"past", p}, {"use_cache", c}};
        auto got = m.run(in);
        const Tensor& y = got.at("y");
        const Tensor& present = got.at("present");
        ASSERT_EQ(present.sizes(), (Sizes{b, cache ? past + s : s, 4}));
        for (int64_t i = 0; i < x.numel(); i++) {
          double wi = w.get(i % 4);
          double want = cache ? x.get(i) + wi * double(past + s) : x.get(i) * wi;
          ASSERT_NEAR(y.get(i), want, 1e-5) << "cache " << cache << " past " << past;
        }
        auto ref = ref::run_graph(g, in);
        EXPECT_TRUE(testing::close_to_ref(present, ref.at("present")));
        EXPECT_TRUE(testing::close_to_ref(y, ref.at("y")));
      }
    }
  }
}

TEST(OnnxImport, IfConditionMustBeBool) {
  // The same model with the condition declared float is rejected naming the node.
  std::ifstream f(case_path("if_cache.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // BOOL (9) -> FLOAT (1) in the third input's elem_type: the one byte after its name's field.
  auto at = bytes.find("use_cache");
  ASSERT_NE(at, std::string::npos);
  auto et = bytes.find(std::string("\x08\x09", 2), at);
  ASSERT_NE(et, std::string::npos);
  bytes[et + 1] = '\x01';
  EXPECT_TRUE(throws_with([&] { import_onnx_model_from_bytes(bytes); },
                          {"node 'merged' (If)", "condition must be bool"}));
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

// Einsum lowers to Transposes, Reshapes and a MatMul (or a broadcast Mul for an outer product);
// symbolic dims stay symbolic, so other sizes run from one compiled model.
TEST(OnnxImport, EinsumFormsExportersWrite) {
  Graph g = import_onnx(case_path("einsum_forms.onnx"));
  EXPECT_EQ(count_ops(g, OpKind::MatMul), 2) << print_graph(g);
  std::map<std::string, Tensor> in;
  for (const char* n : {"q", "k", "pos", "freq"})
    in[n] = case_npy(std::string("einsum_forms.") + n);
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    auto got = m.run(in);
    for (const char* n : {"outer", "scores", "ctx", "tr"}) {
      EXPECT_TRUE(close(got.at(n), case_npy(std::string("einsum_forms.") + n))) << n;
    }
    std::map<std::string, Tensor> other{{"q", Tensor::random(DType::f32, {1, 2, 7, 8}, 1)},
                                        {"k", Tensor::random(DType::f32, {1, 2, 4, 8}, 2)},
                                        {"pos", Tensor::random(DType::f32, {7}, 3)},
                                        {"freq", Tensor::random(DType::f32, {4}, 4)}};
    auto want = ref::run_graph(g, other);
    auto got2 = m.run(other);
    for (auto& [name, w] : want) EXPECT_TRUE(testing::close_to_ref(got2.at(name), w)) << name;
  }
}

TEST(OnnxImport, EinsumDiagonalIsUnsupportedNamingTheNode) {
  try {
    import_onnx(case_path("einsum_diagonal.onnx"));
    FAIL() << "expected OnnxUnsupportedError";
  } catch (const OnnxUnsupportedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'diag' (Einsum)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("repeats 'i' in one operand"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

// Trilu over a symbolic length with k a graph input: the mask is computed (Ranges over the dims
// run while planning), so no --dim and no constant k are needed.
TEST(OnnxImport, TriluWithRunTimeKOverASymbolicLength) {
  Graph g = import_onnx(case_path("trilu_runtime.onnx"));
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    for (int64_t n : {1, 4, 7}) {
      for (float k : {-1.0f, 0.0f, 2.0f}) {
        Tensor x = Tensor::random(DType::f32, {2, n, n}, uint64_t(n));
        Tensor kt = Tensor::from_floats(DType::i64, {}, {k});
        Tensor y = m.run({{"x", x}, {"k", kt}}).at("y");
        ASSERT_EQ(y.sizes(), x.sizes());
        for (int64_t i = 0; i < x.numel(); i++) {
          int64_t row = (i / n) % n, col = i % n;
          ASSERT_EQ(y.get(i), col - row <= int64_t(k) ? x.get(i) : 0.0) << n << " k=" << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ubfuse

namespace ubfuse {
namespace {

TEST(OnnxImport, Opset18ReduceAxesInputAndSplitNumOutputs) {
  OnnxModel m = import_onnx_model(case_path("opset18_forms.onnx"));
  EXPECT_EQ(m.opset, 18);
  std::map<std::string, Tensor> in{{"x", case_npy("opset18_forms.x")}};
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    auto got = compile(m.graph, opts).run(in);
    for (const char* n : {"mean", "sum", "max", "p0", "p1", "p2"}) {
      EXPECT_TRUE(close(got.at(n), case_npy(std::string("opset18_forms.") + n))) << n;
    }
  }
}

}  // namespace
}  // namespace ubfuse
