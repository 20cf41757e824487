// Reshapes as views (compiler/views.h): no kernel and no copy for a Reshape inside the graph, in
// eager and graph mode; a Reshape the caller receives still copies; a view keeps the buffer it
// reads alive; views of graph inputs, constants and other views; symbolic shapes.
#include <gtest/gtest.h>

#include "test_util.h"
#include "ubfuse/explain.h"

namespace ubfuse {
namespace {

using namespace ubfuse::testing;

int count_op(const CompiledModel& m, const std::string& op) {
  int n = 0;
  for (auto& k : m.kernels()) {
    for (auto& t : k.op_types) n += t == op;
  }
  return n;
}

// exp -> reshape -> neg: the reshape between two kernels moves nothing.
TEST(Views, ReshapeInsideTheGraphHasNoKernel) {
  for (DType t : {DType::f32, DType::bf16}) {
    GraphBuilder b;
    auto x = b.input("x", t, {"batch", 6, 64});
    b.output("y", b.neg(b.reshape(b.exp(x), {0, 6, 4, 16})));
    Graph g = b.build();
    std::map<std::string, Tensor> in = {{"x", Tensor::random(t, {3, 6, 64}, 1)}};
    auto want = ref::run_graph(g, in);
    for (auto& e : kEngines) {
      CompiledModel m = compile(g, engine_opts(e));
      EXPECT_EQ(count_op(m, "Reshape"), 0) << e;
      EXPECT_EQ(m.kernels().size(), 2u) << e;
      RunStats st;
      auto out = m.run(in, &st);
      ASSERT_EQ(out.at("y").sizes(), (Sizes{3, 6, 4, 16})) << e;
      EXPECT_TRUE(close_to_ref(out.at("y"), want.at("y"))) << e;
      const int64_t bytes = 3 * 6 * 64 * int64_t(dtype_size(t));
      EXPECT_EQ(st.bytes_read, 2 * bytes) << e;  // exp reads x, neg reads the view
      EXPECT_EQ(st.bytes_written, 2 * bytes) << e;
      EXPECT_EQ(st.kernels_launched, 2) << e;
    }
  }
}

// The caller's output buffer is not the input's: that Reshape copies, into each output.
TEST(Views, ReshapeReturnedToTheCallerCopies) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {5, 12});
  auto e = b.exp(x);
  b.output("e", e);
  b.output("r", b.reshape(e, {3, 20}));
  b.output("rx", b.reshape(x, {60}));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {5, 12}, 2)}};
  auto want = ref::run_graph(g, in);
  for (auto& eng : kEngines) {
    CompiledModel m = compile(g, engine_opts(eng));
    EXPECT_EQ(count_op(m, "Reshape"), 2) << eng;
    auto out = m.run(in);
    for (const char* name : {"e", "r", "rx"}) {
      EXPECT_TRUE(close_to_ref(out.at(name), want.at(name))) << eng << " " << name;
    }
    EXPECT_NE(out.at("r").data(), out.at("e").data());
    EXPECT_NE(out.at("rx").data(), in.at("x").data());
  }
}

// The view is the last reader of exp's buffer: the plan must keep that buffer until then, or the
// kernels between (same size, eager mode: one buffer each) would reuse it.
TEST(Views, StorageStaysAliveUntilItsViewIsRead) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {64, 32});
  auto v = b.reshape(b.exp(x), {32, 64});
  auto c = b.reshape(b.sqrt(b.abs(b.neg(b.tanh(x)))), {32, 64});
  b.output("y", b.add(v, c));
  Graph g = b.build();
  std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {64, 32}, 3)}};
  auto want = ref::run_graph(g, in);
  for (auto& eng : kEngines) {
    CompiledModel m = compile(g, engine_opts(eng));
    EXPECT_EQ(count_op(m, "Reshape"), 0) << eng;
    EXPECT_TRUE(close_to_ref(m.run(in).at("y"), want.at("y"))) << eng;
  }
}

// Views of a graph input, of a constant and of another view, with symbolic dims bound per call.
TEST(Views, ViewsOfInputsConstantsAndViews) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"batch", "seq", 16});
  auto w = b.constant(Tensor::random(DType::f32, {1, 8}, 4), "w");
  auto xv = b.reshape(b.reshape(x, {0, 0, 2, 8}), {0, -1, 8});  // [batch, seq * 2, 8]
  auto y = b.add(b.exp(xv), b.reshape(w, {8}));
  b.output("y", b.reshape(y, {0, -1}));
  Graph g = b.build();
  for (auto& eng : kEngines) {
    CompiledModel m = compile(g, engine_opts(eng));
    for (int64_t seq : {8, 3}) {
      std::map<std::string, Tensor> in = {{"x", Tensor::random(DType::f32, {2, seq, 16}, 5)}};
      auto want = ref::run_graph(g, in);
      auto out = m.run(in);
      EXPECT_TRUE(close_to_ref(out.at("y"), want.at("y"))) << eng << " seq " << seq;
    }
  }
}

// The explainer says a view is one: no kernel, a note that says why, a dashed node
// fed by a "view" edge in the pictures, and no bytes in the predicted traffic.
TEST(Views, ExplainShowsViews) {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {8, 64});
  auto r = b.reshape(b.exp(x), {8, 4, 16});
  b.name_last("regroup");
  b.output("y", b.transpose(r, {0, 2, 1}));
  ExplainReport rep = explain(b.build());
  ASSERT_EQ(rep.graph_kernels.size(), 2u);     // Exp, Transpose
  EXPECT_EQ(rep.graph_bytes, 4 * 8 * 64 * 4);  // exp and transpose each read and write once
  // The Reshape has no kernel, so its decisions are notes, not kernel boundaries.
  bool said = false;
  for (auto& d : rep.notes) {
    said = said || (d.consumer == "regroup" &&
                    d.message.find("view of its input: no kernel, no copy") != std::string::npos);
  }
  EXPECT_TRUE(said) << format_explain(rep);
  for (const std::string& dot : {before_dot(rep), after_dot(rep)}) {
    EXPECT_NE(dot.find("regroup\\nReshape (view)\", style=\"rounded,dashed\""), std::string::npos)
        << dot;
    EXPECT_NE(dot.find("label=\"view\""), std::string::npos) << dot;
  }
}

}  // namespace
}  // namespace ubfuse
