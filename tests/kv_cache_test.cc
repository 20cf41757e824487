// The in-place KV cache (ubfuse/model.h, KvCache; runtime/kv_cache.h): a decode loop through
// run_with_cache gives bit for bit what feeding each present back as the next past gives, while
// each call writes only its new rows and the kernels that read the cache read it in place
// (attention, Transpose, Expand: no dense copy), in eager and graph mode; the buffer arithmetic
// on odd views; and the errors a caller can run into.
#include "runtime/kv_cache.h"

#include "test_util.h"
#include "ubfuse/onnx.h"

namespace ubfuse {
namespace {

using testing::throws_with;

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.nbytes())) << what;
}

// Runs `steps` calls (new rows per call) both ways and compares every output and the cache's
// rows with the presents fed back. Returns the cached loop's stats summed.
RunStats decode_both_ways(
    const CompiledModel& m, KvCache& cache,
    const std::function<std::map<std::string, Tensor>(int64_t, int64_t)>& feed,
    const std::vector<int64_t>& steps) {
  std::map<std::string, Tensor> past;  // the presents fed back
  for (auto& p : cache.pairs()) {
    Sizes s = p.buffer.sizes();
    s[size_t(p.axis)] = 0;
    past[p.past] = Tensor(p.buffer.dtype(), s);
  }
  RunStats sum;
  int64_t length = 0;
  for (size_t i = 0; i < steps.size(); i++) {
    SCOPED_TRACE("step " + std::to_string(i) + ", past " + std::to_string(length));
    std::map<std::string, Tensor> in = feed(length, steps[i]);
    std::map<std::string, Tensor> full = in;
    for (auto& [k, v] : past) full[k] = v;
    auto want = m.run(full);
    std::map<std::string, Tensor> got;
    RunStats st;
    m.run_with_cache(in, cache, got, &st);
    length += steps[i];
    EXPECT_EQ(cache.length(), length);
    EXPECT_EQ(st.kv_rows_appended, steps[i] * int64_t(cache.pairs().size()));
    sum.kv_rows_appended += st.kv_rows_appended;
    sum.kv_dense_copies += st.kv_dense_copies;
    for (auto& p : cache.pairs()) {
      EXPECT_EQ(got.count(p.present), 0u) << p.present << " is in the cache, not in the outputs";
      expect_same(cache.rows(p.present), want.at(p.present), p.present);
      past[p.past] = want.at(p.present);
    }
    for (auto& [name, t] : got) expect_same(t, want.at(name), name);
  }
  return sum;
}

Tensor token_ids(int64_t n, int64_t seed) {
  return Tensor::random(DType::i64, {1, n}, uint64_t(seed), 0, 150);  // both vocabularies
}

// The test decoder of the Python examples (grouped-query heads: present -> Unsqueeze -> Expand).
TEST(KvCache, DecoderLoopEqualsFeedingPresentsBackAndReadsTheCacheInPlace) {
  Graph g = import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/kv_decoder_with_past.onnx");
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    SCOPED_TRACE(m.fusion_enabled() ? "graph" : "eager");
    KvCache cache = m.make_kv_cache(16, {{"batch_size", 1}});
    ASSERT_EQ(cache.pairs().size(), 4u);
    EXPECT_EQ(cache.pairs()[0].past, "past_key_values.0.key");
    EXPECT_EQ(cache.pairs()[0].present, "present.0.key");
    EXPECT_EQ(cache.pairs()[0].axis, 2);
    EXPECT_EQ(cache.pairs()[0].buffer.sizes(), (Sizes{1, 2, 16, 16}));
    auto feed = [](int64_t past, int64_t n) {
      return std::map<std::string, Tensor>{{"input_ids", token_ids(n, past + 7)}};
    };
    // A prompt of 5 from an empty past, then one token per call, then 2 at once, up to the end.
    RunStats st = decode_both_ways(m, cache, feed, {5, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1});
    EXPECT_EQ(st.kv_rows_appended, 16 * 4);
    // Eager: the Expands of the grouped-query heads read the cache in place; graph mode: the
    // attention kernels, which take those repeats in.
    EXPECT_EQ(st.kv_dense_copies, 0);
    EXPECT_TRUE(throws_with(
        [&] {
          std::map<std::string, Tensor> out;
          m.run_with_cache(feed(16, 1), cache, out);
        },
        {"KV cache is full", "present.0.key", "17 rows", "max_length is 16"}));
    EXPECT_EQ(cache.length(), 16);  // a failed call adds nothing
    cache.reset();
    decode_both_ways(m, cache, feed, {3, 1});
  }
}

// Whisper's decoder: self-attention presents read by Transpose (K^T) and MatMul (V); graph mode
// runs both inside the attention kernel, which reads the cache in place. The cross-attention
// K/V are ordinary inputs.
TEST(KvCache, WhisperDecoderSelfAttentionCacheInPlace) {
  Graph g =
      import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/whisper_decoder_with_past.onnx");
  for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
    CompiledModel m = compile(g, opts);
    SCOPED_TRACE(m.fusion_enabled() ? "graph" : "eager");
    KvCache cache = m.make_kv_cache(9, {{"batch_size", 1}});
    ASSERT_EQ(cache.pairs().size(), 4u);  // the decoder's; the encoder's are inputs
    std::map<std::string, Tensor> enc;
    for (const Value* v : m.graph().inputs()) {
      if (v->name.find(".encoder.") != std::string::npos) {
        enc[v->name] = Tensor::random(DType::f32, {1, 2, 7, 32}, uint64_t(v->id) + 1);
      }
    }
    auto feed = [&](int64_t past, int64_t n) {
      auto in = enc;
      in["input_ids"] = token_ids(n, past + 3);
      return in;
    };
    RunStats st = decode_both_ways(m, cache, feed, {2, 1, 1, 3, 1, 1});
    if (m.fusion_enabled()) {
      EXPECT_EQ(st.kv_dense_copies, 0) << "the attention kernels read the cache in place";
    } else {
      // Eager: the Transposes read in place, the context MatMuls get their V rows dense.
      EXPECT_EQ(st.kv_dense_copies, 6 * 2);
    }
  }
}

// Every kind of reader on a built graph, with the cache along an inner and an outer axis: a
// Transpose, an Expand after an Unsqueeze, a Neg (dense copy), a Reshape view merging the heads
// into the batch, an attention chain (graph mode), and present returned under a second name.
TEST(KvCache, EveryReaderOfACachedPresentSeesItsRows) {
  for (int axis : {2, 0}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    GraphBuilder b;
    Shape ps = axis == 2 ? Shape{1, 3, "past", 4} : Shape{"past", 3, 5, 4};
    Shape ns = axis == 2 ? Shape{1, 3, "n", 4} : Shape{"n", 3, 5, 4};
    auto past = b.input("past", DType::f32, ps);
    auto x = b.input("x", DType::f32, ns);
    auto present = b.concat({past, x}, axis);
    b.output("present", present);
    b.output("t", b.transpose(present, {0, 1, 3, 2}));
    b.output("neg", b.neg(present));
    b.output("again", present);
    if (axis == 2) {
      Shape wide{1, 3, 2, "past+n", 4};
      b.output("e", b.expand(b.reshape(present, {1, 3, 1, -1, 4}), wide));
      b.output("merged", b.neg(b.reshape(present, {3, -1, 4})));
      // softmax(q k^T / 2) v with q the new rows, k = v = present
      auto s = b.div(b.matmul(x, b.transpose(present, {0, 1, 3, 2})), b.scalar(2.0, DType::f32));
      b.output("attn", b.matmul(b.softmax(s), present));
    }
    Graph g = b.build();
    for (auto& opts : {testing::eager_opts(), testing::graph_opts()}) {
      CompiledModel m = compile(g, opts);
      SCOPED_TRACE(m.fusion_enabled() ? "graph" : "eager");
      KvCache cache = m.make_kv_cache(7);
      ASSERT_EQ(cache.pairs().size(), 1u);
      EXPECT_EQ(cache.pairs()[0].axis, axis);
      auto feed = [&](int64_t past_len, int64_t n) {
        Sizes s = axis == 2 ? Sizes{1, 3, n, 4} : Sizes{n, 3, 5, 4};
        return std::map<std::string, Tensor>{
            {"x", Tensor::random(DType::f32, s, uint64_t(past_len) + 11)}};
      };
      RunStats st = decode_both_ways(m, cache, feed, {2, 1, 3, 1});
      EXPECT_GT(st.kv_dense_copies, 0);  // the Negs
    }
  }
}

TEST(KvCache, PitchedViewsOfTheBuffer) {
  // [B=2, H=3, M=8, D=4] holding 5 rows.
  const Sizes buf{2, 3, 8, 4};
  auto pv = pitched_view(buf, 2, 5, {2, 3, 5, 4});
  ASSERT_TRUE(pv);
  EXPECT_EQ(pv->axis, 2);
  EXPECT_EQ(pv->storage, (Sizes{2, 3, 8, 4}));
  pv = pitched_view(buf, 2, 5, {2, 3, 1, 5, 4});  // an Unsqueeze before the rows
  ASSERT_TRUE(pv);
  EXPECT_EQ(pv->axis, 3);
  EXPECT_EQ(pv->storage, (Sizes{2, 3, 1, 8, 4}));
  pv = pitched_view(buf, 2, 5, {6, 5, 2, 2});  // heads merged, D split
  ASSERT_TRUE(pv);
  EXPECT_EQ(pv->storage, (Sizes{6, 8, 2, 2}));
  EXPECT_FALSE(pitched_view(buf, 2, 5, {2, 15, 4}));  // heads merged with rows
  EXPECT_FALSE(pitched_view(buf, 2, 5, {2, 3, 20}));  // rows merged with D
  // Along the outermost axis the rows so far are one dense block.
  pv = pitched_view({8, 3, 4}, 0, 5, {5, 12});
  ASSERT_TRUE(pv);
  EXPECT_EQ(pv->storage, (Sizes{8, 12}));

  Tensor b = Tensor::zeros(DType::f32, buf);
  Tensor rows = Tensor::random(DType::f32, {2, 3, 2, 4}, 1);
  append_rows(b, 2, 3, rows, nullptr);
  Tensor dense(DType::f32, {2, 3, 5, 4});
  copy_rows(b, 2, 5, dense, nullptr);
  for (int64_t o = 0; o < 6; o++) {
    for (int64_t r = 0; r < 5; r++) {
      for (int64_t d = 0; d < 4; d++) {
        const double want = r < 3 ? 0.0 : rows.get((o * 2 + r - 3) * 4 + d);
        ASSERT_EQ(dense.get((o * 5 + r) * 4 + d), want);
      }
    }
  }
}

TEST(KvCache, ErrorsNameTheInputTheDimAndTheFix) {
  Graph g = import_onnx(std::string(UBFUSE_SOURCE_DIR) + "/tests/models/kv_decoder_with_past.onnx");
  CompiledModel m = compile(g, testing::graph_opts());
  EXPECT_TRUE(throws_with([&] { m.make_kv_cache(16); },
                          {"past_key_values.0.key", "batch_size", "has no value", "dims"}));
  EXPECT_TRUE(throws_with([&] { m.make_kv_cache(0, {{"batch_size", 1}}); }, {"max_length is 0"}));
  KvCache cache = m.make_kv_cache(16, {{"batch_size", 2}});
  std::map<std::string, Tensor> out;
  EXPECT_TRUE(throws_with(
      [&] {
        m.run_with_cache({{"input_ids", token_ids(1, 1)}}, cache, out);
      },
      {"batch_size", "past_key_values.0.key", "must agree", "from the KV cache", "dims"}));
  KvCache ok = m.make_kv_cache(16, {{"batch_size", 1}});
  EXPECT_TRUE(throws_with(
      [&] {
        m.run_with_cache({{"input_ids", token_ids(1, 1)},
                          {"past_key_values.0.key", Tensor(DType::f32, {1, 2, 0, 16})}},
                         ok, out);
      },
      {"input 'past_key_values.0.key' comes from the KV cache", "leave it out"}));
  CompiledModel other = compile(g, testing::eager_opts());
  EXPECT_TRUE(throws_with(
      [&] {
        other.run_with_cache({{"input_ids", token_ids(1, 1)}}, ok, out);
      },
      {"another model"}));
  // A present among the outputs: it goes into the cache, so asking for it is an error.
  std::map<std::string, Tensor> with_present{{"present.0.key", Tensor(DType::f32, {1, 2, 1, 16})}};
  EXPECT_TRUE(throws_with(
      [&] {
        m.run_with_cache({{"input_ids", token_ids(1, 1)}}, ok, with_present);
      },
      {"output 'present.0.key' goes into the KV cache", "KvCache::rows"}));
  // The cache keeps its model's executor alive: made from a model that is gone, it is refused by
  // any other (a new model may sit where the old one was).
  KvCache orphan;
  {
    CompiledModel gone = compile(g, testing::eager_opts());
    orphan = gone.make_kv_cache(4, {{"batch_size", 1}});
  }
  CompiledModel fresh = compile(g, testing::eager_opts());
  EXPECT_TRUE(throws_with(
      [&] {
        fresh.run_with_cache({{"input_ids", token_ids(1, 1)}}, orphan, out);
      },
      {"another model"}));
  // A model without a past/present pair, and one whose past is read by more than its Concat.
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {"n", 4});
  b.output("y", b.neg(x));
  CompiledModel plain = compile(b.build(), testing::graph_opts());
  EXPECT_TRUE(throws_with([&] { plain.make_kv_cache(8); }, {"no input", "past_key_values"}));
  GraphBuilder b2;
  auto past = b2.input("past", DType::f32, {"p", 4});
  auto nx = b2.input("x", DType::f32, {"n", 4});
  b2.output("present", b2.concat({past, nx}, 0));
  b2.output("twice", b2.neg(past));
  b2.name_last("reads_past");
  CompiledModel two = compile(b2.build(), testing::graph_opts());
  EXPECT_TRUE(
      throws_with([&] { two.make_kv_cache(8); }, {"input 'past'", "'reads_past' (Neg) reads it"}));
  // A past the graph also returns as it is (its rows lie max_length apart in the cache).
  GraphBuilder b3;
  auto past3 = b3.input("past", DType::f32, {"p", 4});
  b3.output("present", b3.concat({past3, b3.input("x", DType::f32, {"n", 4})}, 0));
  b3.output("past_out", past3);
  CompiledModel three = compile(b3.build(), testing::graph_opts());
  EXPECT_TRUE(
      throws_with([&] { three.make_kv_cache(8); }, {"input 'past'", "it is also a graph output"}));
}

}  // namespace
}  // namespace ubfuse
