// Loading models fast: the ModelProto parse that lifts initializers' raw_data out of the bytes
// (checked against protobuf's own parse, on good and mutated bytes), whole-file reads, and the
// huge-page storage of large tensors.
#define ONNX_ML 1
#define ONNX_NAMESPACE onnx
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "import/onnx/model_parse.h"
#include "test_util.h"
#include "ubfuse/onnx.h"
#include "util/big_alloc.h"
#include "util/read_file.h"

namespace ubfuse {
namespace {

namespace fs = std::filesystem;
using onnx_import::ParsedModel;

fs::path tmp_dir() {
  fs::path d = fs::temp_directory_path() / ("ubfuse_model_load_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void add_f32_initializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                         const std::vector<float>& v, bool raw) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  if (raw) {
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  } else {
    for (float f : v) t->add_float_data(f);
  }
}

// y = x @ w + b, x [2, 3], w [3, 4] (raw data), b [4] (float_data).
onnx::ModelProto matmul_add_model(const std::vector<float>& w, const std::vector<float>& b) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {2, 3}) {
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  add_f32_initializer(g, "w", {3, 4}, w, true);
  add_f32_initializer(g, "b", {4}, b, false);
  auto* mm = g->add_node();
  mm->set_op_type("MatMul");
  mm->set_name("mm");
  mm->add_input("x");
  mm->add_input("w");
  mm->add_output("xw");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("xw");
  add->add_input("b");
  add->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

// The parse with the lifted raw_data put back, serialized: protobuf's form of what was parsed.
std::string with_raw_restored(ParsedModel& pm) {
  for (size_t i = 0; i < pm.raw.size(); i++) {
    if (pm.raw[i]) {
      pm.proto.mutable_graph()->mutable_initializer(int(i))->set_raw_data(std::string(*pm.raw[i]));
    }
  }
  return pm.proto.SerializeAsString();
}

void put_varint(std::string& s, uint64_t v) {
  for (; v >= 0x80; v >>= 7) s.push_back(char(v | 0x80));
  s.push_back(char(v));
}

void put_field(std::string& s, int number, const std::string& payload) {
  put_varint(s, uint64_t(number) << 3 | 2);
  put_varint(s, payload.size());
  s += payload;
}

// Whether parse_model_bytes accepts what protobuf's parse accepts, and yields the same message;
// `lifted` says whether it lifted raw_data (else it fell back to protobuf's parse).
::testing::AssertionResult agrees_with_protobuf(const std::string& bytes, bool* lifted = nullptr) {
  onnx::ModelProto ref;
  const bool ref_ok = ref.ParseFromString(bytes);
  ParsedModel pm;
  bool ok = true;
  try {
    onnx_import::parse_model_bytes(bytes, "m", pm);
  } catch (const Error& e) {
    ok = false;
    if (std::string(e.what()).find("not a valid ONNX model") == std::string::npos) {
      return ::testing::AssertionFailure() << "error: " << e.what();
    }
  }
  if (lifted) *lifted = !pm.raw.empty();
  if (ok != ref_ok) {
    return ::testing::AssertionFailure()
           << (ok ? "accepted" : "refused") << " where protobuf did not";
  }
  if (ok && with_raw_restored(pm) != ref.SerializeAsString()) {
    return ::testing::AssertionFailure() << "a message other than protobuf's";
  }
  return ::testing::AssertionSuccess();
}

// A model whose one initializer is `tensor` (its wire bytes), and whose graph holds `extra`
// after it.
std::string model_with_tensor_bytes(const std::string& tensor, const std::string& extra = "") {
  onnx::ModelProto m = matmul_add_model(std::vector<float>(12, 1), std::vector<float>(4, 0));
  m.mutable_graph()->clear_initializer();
  std::string graph = m.graph().SerializeAsString();
  put_field(graph, 5, tensor);
  graph += extra;
  m.clear_graph();
  std::string bytes = m.SerializeAsString();
  put_field(bytes, 7, graph);
  return bytes;
}

std::string tensor_w(float value) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(1);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(&value), 4));
  return t.SerializeAsString();
}

}  // namespace

TEST(ModelParse, LiftsRawDataInPlaceAndImportsTheSameValues) {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<float> b = {0.5f, -1, 2, 0};
  const std::string bytes = matmul_add_model(w, b).SerializeAsString();
  ParsedModel pm;
  onnx_import::parse_model_bytes(bytes, "m", pm);
  ASSERT_EQ(pm.raw.size(), 2u);
  ASSERT_TRUE(pm.raw[0].has_value());
  EXPECT_FALSE(pm.raw[1].has_value());  // b is in float_data
  // A view into the bytes, not a copy; the parsed proto no longer holds it.
  EXPECT_GE(pm.raw[0]->data(), bytes.data());
  EXPECT_LE(pm.raw[0]->data() + pm.raw[0]->size(), bytes.data() + bytes.size());
  EXPECT_EQ(pm.raw[0]->size(), w.size() * 4);
  EXPECT_FALSE(pm.proto.graph().initializer(0).has_raw_data());
  EXPECT_EQ(pm.proto.graph().initializer(1).float_data_size(), 4);

  Graph g = import_onnx_from_bytes(bytes);
  Tensor x = Tensor::from_floats(DType::f32, {2, 3}, {1, 0, -1, 2, 0.5f, 3});
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    Tensor y = compile(g, opts).run({{"x", x}}).at("y");
    for (int i = 0; i < 2; i++) {
      for (int j = 0; j < 4; j++) {
        double want = b[size_t(j)];
        for (int k = 0; k < 3; k++) want += x.get(i * 3 + k) * w[size_t(k * 4 + j)];
        EXPECT_DOUBLE_EQ(y.get(i * 4 + j), want) << i << "," << j;
      }
    }
  }
}

// A TensorProto may carry raw_data twice; protobuf keeps the last, and so must the lift.
TEST(ModelParse, TheLastRawDataOfATensorWins) {
  std::string tensor = tensor_w(1.0f);
  put_field(tensor, 9, std::string("\0\0\0\x40", 4));  // 2.0f
  const std::string bytes = model_with_tensor_bytes(tensor);
  ParsedModel pm;
  onnx_import::parse_model_bytes(bytes, "m", pm);
  ASSERT_EQ(pm.raw.size(), 1u);
  EXPECT_EQ(*pm.raw[0], std::string_view("\0\0\0\x40", 4));
  bool lifted = false;
  EXPECT_TRUE(agrees_with_protobuf(bytes, &lifted));
  EXPECT_TRUE(lifted);
}

// Tags and lengths that protobuf reads otherwise than their plain value (a tag past 32 bits it
// truncates; more than 5 bytes or a length past INT_MAX - 16 it refuses) leave the bytes to
// protobuf's parse; so do groups. Each case agrees with protobuf, lifted or not.
TEST(ModelParse, WireFormsProtobufReadsItsOwnWayFallBack) {
  const std::string two("\0\0\0\x40", 4);
  struct Case {
    const char* name;
    std::string tensor_tail, graph_tail;
    bool lifted;
  };
  std::vector<Case> cases = {
      // Field 9 with a bit past 32 in its tag's fifth byte: protobuf truncates it to raw_data.
      {"truncated tag", std::string("\xca\x80\x80\x80\x10\x04", 6) + two, "", false},
      {"overlong tag, 5 bytes", std::string("\xca\x80\x80\x80\x00\x04", 6) + two, "", true},
      {"6-byte tag", std::string("\xca\x80\x80\x80\x80\x00\x04", 7) + two, "", false},
      {"6-byte length", std::string("\x4a\x84\x80\x80\x80\x80\x00", 7) + two, "", false},
      {"length past INT_MAX", std::string("\x4a\xf0\xff\xff\xff\x07", 6) + two, "", false},
      // A group in an unknown field of the graph: protobuf skips it, the walk stops.
      {"group", "", std::string("\xa3\x06\xa4\x06", 4), false},
  };
  for (const Case& c : cases) {
    bool lifted = false;
    EXPECT_TRUE(agrees_with_protobuf(
        model_with_tensor_bytes(tensor_w(1.0f) + c.tensor_tail, c.graph_tail), &lifted))
        << c.name;
    onnx::ModelProto ref;
    if (ref.ParseFromString(
            model_with_tensor_bytes(tensor_w(1.0f) + c.tensor_tail, c.graph_tail))) {
      EXPECT_EQ(lifted, c.lifted) << c.name;
    }
  }
  // The graph given twice: protobuf merges the two, their initializers in order.
  onnx::GraphProto more;
  auto* t = more.add_initializer();
  t->set_name("extra");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->set_raw_data(two);
  std::string bytes = model_with_tensor_bytes(tensor_w(1.0f));
  put_field(bytes, 7, more.SerializeAsString());
  bool lifted = false;
  EXPECT_TRUE(agrees_with_protobuf(bytes, &lifted));
  EXPECT_TRUE(lifted);
  ParsedModel pm;
  onnx_import::parse_model_bytes(bytes, "m", pm);
  ASSERT_EQ(pm.raw.size(), 2u);
  EXPECT_EQ(*pm.raw[1], std::string_view(two));
}

// On any bytes the lifted parse accepts what protobuf accepts and yields the same message.
TEST(ModelParse, AgreesWithProtobufOnMutatedBytes) {
  std::vector<float> w(12), b(4);
  for (size_t i = 0; i < w.size(); i++) w[i] = float(i) * 0.25f;
  const std::string good = matmul_add_model(w, b).SerializeAsString();
  std::mt19937 rng(7);
  int parsed = 0, refused = 0;
  for (int trial = 0; trial < 2000; trial++) {
    std::string bytes = good;
    if (trial % 3 == 0) {
      bytes.resize(size_t(rng()) % bytes.size());
    } else {
      for (int k = 0; k < 1 + trial % 3; k++) bytes[size_t(rng()) % bytes.size()] = char(rng());
    }
    ASSERT_TRUE(agrees_with_protobuf(bytes)) << "trial " << trial;
    onnx::ModelProto ref;
    (ref.ParseFromString(bytes) ? parsed : refused)++;
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(refused, 100);
}

TEST(ModelParse, FilesAreMappedAndMissingOnesNamed) {
  const fs::path p = tmp_dir() / "m.onnx";
  {
    std::ofstream f(p, std::ios::binary);
    f << matmul_add_model(std::vector<float>(12, 2), std::vector<float>(4, 1)).SerializeAsString();
  }
  auto inputs = onnx_model_inputs(p.string());
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].name, "x");
  EXPECT_EQ(onnx_model_op_types(p.string()), (std::vector<std::string>{"Add", "MatMul"}));
  Graph g = import_onnx(p.string());
  Tensor y = compile(g, testing::eager_opts())
                 .run({{"x", Tensor::from_floats(DType::f32, {2, 3}, {1, 1, 1, 0, 0, 0})}})
                 .at("y");
  EXPECT_EQ(y.get(0), 7.0);  // 3 * 2 + 1
  EXPECT_EQ(y.get(4), 1.0);
  EXPECT_TRUE(testing::throws_with([&] { import_onnx((tmp_dir() / "none.onnx").string()); },
                                   {"none.onnx", "cannot open the file"}));
  EXPECT_TRUE(testing::throws_with([&] { onnx_model_inputs(tmp_dir().string()); },
                                   {"cannot open the file", "it is a directory"}));
  // A pipe cannot be mapped: it is read instead.
  const fs::path fifo = tmp_dir() / "model.fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string bytes =
      matmul_add_model(std::vector<float>(12, 2), std::vector<float>(4, 1)).SerializeAsString();
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
  Graph piped = import_onnx(fifo.string());
  writer.join();
  EXPECT_EQ(piped.inputs().size(), 1u);
  const fs::path empty = tmp_dir() / "empty.onnx";
  std::ofstream(empty).close();
  // An empty file is an empty ModelProto: no graph.
  EXPECT_TRUE(testing::throws_with([&] { import_onnx(empty.string()); }, {"has no graph"}));
}

// External data is read from its file straight into the tensor: tensors at offsets of one
// file, f64 converted on the way, and every span the file does not hold named in the error.
TEST(ModelParse, ExternalDataIsReadIntoTheTensor) {
  const fs::path dir = tmp_dir() / "external";
  fs::create_directories(dir);
  std::vector<float> w(12), b = {0.25f, -0.5f, 1, 2};
  for (size_t i = 0; i < w.size(); i++) w[i] = float(i) - 5.5f;
  std::vector<double> b64(b.begin(), b.end());
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f << std::string(16, 'x');
    f.write(reinterpret_cast<const char*>(w.data()), std::streamsize(w.size() * 4));
    f.write(reinterpret_cast<const char*>(b64.data()), std::streamsize(b64.size() * 8));
  }
  auto model = [&](int64_t w_length, int64_t b_offset) {
    onnx::ModelProto m = matmul_add_model(w, b);
    auto* g = m.mutable_graph();
    auto external = [](onnx::TensorProto* t, int64_t offset, int64_t length) {
      t->clear_raw_data();
      t->clear_float_data();
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      for (auto [k, v] : {std::pair<std::string, std::string>{"location", "weights.bin"},
                          {"offset", std::to_string(offset)},
                          {"length", std::to_string(length)}}) {
        auto* e = t->add_external_data();
        e->set_key(k);
        e->set_value(v);
      }
    };
    external(g->mutable_initializer(0), 16, w_length);
    g->mutable_initializer(1)->set_data_type(onnx::TensorProto::DOUBLE);
    external(g->mutable_initializer(1), b_offset, 32);
    const fs::path p = dir / "m.onnx";
    std::ofstream(p, std::ios::binary) << m.SerializeAsString();
    return p.string();
  };
  Graph g = import_onnx(model(48, 64));
  Tensor x = Tensor::from_floats(DType::f32, {2, 3}, {1, 2, 3, -1, 0, 0.5f});
  Tensor y = compile(g, testing::eager_opts()).run({{"x", x}}).at("y");
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < 4; j++) {
      double want = b[size_t(j)];
      for (int k = 0; k < 3; k++) want += x.get(i * 3 + k) * w[size_t(k * 4 + j)];
      EXPECT_DOUBLE_EQ(y.get(i * 4 + j), want) << i << "," << j;
    }
  }
  EXPECT_TRUE(testing::throws_with([&] { import_onnx(model(44, 64)); },
                                   {"tensor 'w'", "external data has 44 bytes", "need 48"}));
  EXPECT_TRUE(testing::throws_with([&] { import_onnx(model(48, 72)); },
                                   {"tensor 'b'", "runs past the end of 'weights.bin'"}));
}

TEST(ReadWholeFile, ReadsEveryByteOfFilesAndNothingOfWhatIsNone) {
  const fs::path p = tmp_dir() / "bytes.bin";
  std::string want(100001, '\0');
  for (size_t i = 0; i < want.size(); i++) want[i] = char(i * 131 + 7);
  {
    std::ofstream f(p, std::ios::binary);
    f << want;
  }
  EXPECT_EQ(read_whole_file(p.string()), want);
  const fs::path empty = tmp_dir() / "empty.bin";
  std::ofstream(empty).close();
  EXPECT_EQ(read_whole_file(empty.string()), std::string());
  EXPECT_FALSE(read_whole_file((tmp_dir() / "none").string()).has_value());
  EXPECT_FALSE(read_whole_file(tmp_dir().string()).has_value());
  // /proc files say they are empty; their text is read to the end all the same.
  auto status = read_whole_file("/proc/self/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->find("Pid:"), std::string::npos);
}

TEST(TensorStorage, LargeBlocksAreHugePageAlignedSmallOnes64) {
  for (size_t bytes : {size_t(1), size_t(100), size_t(4) << 20, (size_t(23) << 20) + 4096}) {
    void* p = alloc_tensor_bytes(bytes);
    ASSERT_NE(p, nullptr);
    const auto at = reinterpret_cast<uintptr_t>(p);
    EXPECT_EQ(at % 64, 0u) << bytes;
    // Whole huge pages waste at most 1/8 of these, so they are placed on them.
    if (bytes >= kHugePageBytes) {
      EXPECT_EQ(at % kHugePageBytes, 0u) << bytes;
    }
    std::memset(p, 0x5a, bytes);
    std::free(p);
  }
  Tensor t = Tensor::zeros(DType::f32, {1 << 20});  // 4 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(t.get((1 << 20) - 1), 0.0);
}

}  // namespace ubfuse
