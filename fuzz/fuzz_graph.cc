// Fuzzes the compiler on random small graphs: bytes -> a graph of up to 12 ops over 2-4 inputs
// (GraphBuilder), then the double reference, eager mode and graph mode (tile interpreter, a UB
// size from the bytes so that splits and two-pass variants happen too) on the same inputs.
// The builder rejecting a graph with ubfuse::Error is fine; once the reference ran, both modes
// must compile, run and agree with it (fuzz_common.h), and a crash or abort is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>
#include <functional>

#include "fuzz_common.h"

namespace ubfuse {
namespace {

using V = Value*;

struct Gen {
  explicit Gen(FuzzedDataProvider& p) : in(p) {}
  FuzzedDataProvider& in;
  GraphBuilder b;
  std::vector<V> pool;
  fuzz::Inputs inputs;
  DType dt = f32;
  uint64_t seed = 1;

  V pick() { return pool[in.ConsumeIntegralInRange<size_t>(0, pool.size() - 1)]; }

  std::optional<int64_t> last_dim(V v) {
    if (v->shape.empty() || !v->shape.back().is_static()) return std::nullopt;
    return v->shape.back().value();
  }

  Tensor random(DType t, Sizes s, double lo = -2, double hi = 2) {
    return Tensor::random(t, std::move(s), seed++, lo, hi);
  }

  // One op on values from the pool; returns null when the chosen op does not apply here.
  V op() {
    V x = pick();
    switch (in.ConsumeIntegralInRange(0, 41)) {
      case 0:
        return b.neg(x);
      case 1:
        return b.abs(x);
      case 2:
        return b.exp(x);
      case 3:
        return b.log(x);
      case 4:
        return b.sqrt(x);
      case 5:
        return b.rsqrt(x);
      case 6:
        return b.reciprocal(x);
      case 7:
        return b.tanh(x);
      case 8:
        return b.sigmoid(x);
      case 9:
        return b.relu(x);
      case 10:
        return b.silu(x);
      case 11:
        return b.gelu(x, in.ConsumeBool());
      case 12:
        return b.erf(x);
      case 13:
        return b.pow(x, in.PickValueInArray({2.0, 3.0, 0.5, -1.0}));
      case 14:
        return b.add(x, pick());
      case 15:
        return b.sub(x, pick());
      case 16:
        return b.mul(x, pick());
      case 17:
        return b.div(x, pick());
      case 18:
        return b.max(x, pick());
      case 19:
        return b.min(x, pick());
      case 20: {
        V y = pick();
        return b.where(in.ConsumeBool() ? b.less(x, y) : b.greater(x, y), x, y);
      }
      case 21: {
        auto c = last_dim(x);
        if (!c) return nullptr;
        V w = in.ConsumeBool() ? b.constant(random(x->dtype, {*c}, 0.5, 1.5)) : nullptr;
        V bias = w && in.ConsumeBool() ? b.constant(random(x->dtype, {*c})) : nullptr;
        return b.layer_norm(x, w, bias, in.PickValueInArray({1e-5, 1e-2}));
      }
      case 22: {
        auto c = last_dim(x);
        V w = c && in.ConsumeBool() ? b.constant(random(x->dtype, {*c}, 0.5, 1.5)) : nullptr;
        return b.rms_norm(x, w);
      }
      case 23:
        return b.softmax(x);
      case 24:
        return b.reduce_sum(x, in.ConsumeBool());
      case 25:
        return b.reduce_mean(x, in.ConsumeBool());
      case 26:
        return b.reduce_max(x, in.ConsumeBool());
      case 27: {
        auto k = last_dim(x);
        if (!k) return nullptr;
        int64_t n = in.ConsumeIntegralInRange<int64_t>(1, 24);
        return b.matmul(x, b.constant(random(x->dtype, {*k, n}, -0.5, 0.5)));
      }
      case 28: {
        if (x->shape.size() < 2) return nullptr;
        std::vector<int64_t> perm;
        for (size_t i = 0; i < x->shape.size(); i++) perm.push_back(int64_t(i));
        // The last two axes, or (rank 3) the first two: a Transpose that keeps the rows, which
        // graph mode reads through a strided row map.
        const bool rows = x->shape.size() >= 3 && in.ConsumeBool();
        std::swap(perm[rows ? 0 : perm.size() - 1], perm[rows ? 1 : perm.size() - 2]);
        return b.transpose(x, perm);
      }
      case 29:
        return b.reshape(x,
                         in.ConsumeBool() ? std::vector<int64_t>{-1} : std::vector<int64_t>{0, -1});
      case 30: {
        auto c = last_dim(x);
        if (!c) return nullptr;
        int64_t s = in.ConsumeIntegralInRange<int64_t>(0, *c - 1);
        int64_t e = in.ConsumeIntegralInRange<int64_t>(s + 1, *c);
        int64_t step = in.ConsumeIntegralInRange<int64_t>(1, 3);
        return b.slice(x, {s}, {e}, {-1}, {step});
      }
      case 31:
        return b.concat({x, pick()}, -1);
      case 32: {
        // A row or column vector broadcast back to a full value's shape.
        V full = pick();
        return b.expand(x, full->shape);
      }
      case 33: {
        if (x->shape.empty() || !x->shape[0].is_static()) return nullptr;
        int64_t n = x->shape[0].value(), k = in.ConsumeIntegralInRange<int64_t>(1, 4);
        Tensor idx(i64, {k});
        for (int64_t i = 0; i < k; i++)
          idx.set(i, double(in.ConsumeIntegralInRange<int64_t>(0, n)));
        return b.gather(x, b.constant(idx), 0);  // an index == n is out of range on purpose
      }
      case 34: {
        DType to = in.PickValueInArray({f32, bf16, f16});
        return b.cast(b.cast(x, to), x->dtype);
      }
      case 35:
        return b.add(x, in.PickValueInArray({0.5, -3.0, 1e30, 0.0}));
      case 36:
        return b.mul(x, in.PickValueInArray({2.0, -0.25, 0.0}));
      case 37:
        return b.host(
            x, [](Tensor&) {}, "");
      case 38:
        return b.sub(x, x);
      case 39: {  // RoPE's rotation: halves or pairs, of the whole row or its first columns
        auto c = last_dim(x);
        if (!c || *c < 2) return nullptr;
        const bool pairs = in.ConsumeBool();
        const int64_t r = in.ConsumeBool() ? 0 : 2 * in.ConsumeIntegralInRange<int64_t>(1, *c / 2);
        if (r == 0 && *c % 2 != 0) return nullptr;
        return b.rotate_half(x, pairs, r);
      }
      case 40: {  // attention over x as queries: the flash kernel's chain (AttentionFusion)
        auto d = last_dim(x);
        if (!d || x->shape.size() < 2) return nullptr;
        const int64_t keys = in.ConsumeIntegralInRange<int64_t>(1, 40);
        auto s = b.matmul(x, b.constant(random(x->dtype, {*d, keys}, -1, 1)));
        s = in.ConsumeBool() ? b.div(s, in.PickValueInArray({2.0, 8.0, 0.0}))
                             : b.mul(s, in.PickValueInArray({0.125, -1.0}));
        if (in.ConsumeBool()) s = b.add(s, b.constant(random(x->dtype, {keys}, -30, 0)));
        const int64_t dv = in.ConsumeIntegralInRange<int64_t>(1, 20);
        return b.matmul(b.softmax(s), b.constant(random(x->dtype, {keys, dv}, -1, 1)));
      }
      default:
        return b.div(x, b.add(b.abs(pick()), 1.0));
    }
  }
};

void one_input(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Gen g(in);
  g.dt = in.PickValueInArray({f32, f32, f32, bf16, f16});
  bool symbolic = in.ConsumeBool();
  bool batch = in.ConsumeBool();
  int64_t rows = in.ConsumeIntegralInRange<int64_t>(1, 6);
  int64_t cols = in.ConsumeIntegralInRange<int64_t>(1, 48);
  g.seed = in.ConsumeIntegral<uint8_t>();
  Shape full = {symbolic ? Dim("rows") : Dim(rows), Dim(cols)};
  Sizes full_sizes = {rows, cols};
  if (batch) {
    full.insert(full.begin(), Dim(2));
    full_sizes.insert(full_sizes.begin(), 2);
  }
  int n_full = in.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < n_full; i++) {
    std::string name = "x" + std::to_string(i);
    g.pool.push_back(g.b.input(name, g.dt, full));
    g.inputs[name] = g.random(g.dt, full_sizes);
  }
  if (in.ConsumeBool()) {  // a per-column vector, broadcast along rows
    g.pool.push_back(g.b.input("col", g.dt, {cols}));
    g.inputs["col"] = g.random(g.dt, {cols});
  }
  if (in.ConsumeBool()) {  // a per-row column, broadcast along columns
    Shape s = full;
    Sizes z = full_sizes;
    s.back() = 1;
    z.back() = 1;
    g.pool.push_back(g.b.input("row", g.dt, s));
    g.inputs["row"] = g.random(g.dt, z);
  }
  int n_ops = in.ConsumeIntegralInRange(1, 12);
  for (int i = 0; i < n_ops && in.remaining_bytes(); i++) {
    V v = g.op();
    if (v) g.pool.push_back(v);
  }
  int n_out = in.ConsumeIntegralInRange(1, 3);
  g.b.output("out0", g.pool.back());
  for (int i = 1; i < n_out; i++) g.b.output("out" + std::to_string(i), g.pick());
  Graph graph = g.b.build();
  if (std::getenv("UBFUSE_FUZZ_PRINT")) {  // to reduce a finding by hand
    std::fprintf(stderr, "%s", print_graph(graph).c_str());
    for (auto& [name, t] : g.inputs)
      std::fprintf(stderr, "%s = %s\n", name.c_str(), t.str().c_str());
  }

  auto want = ref::run_graph(graph, g.inputs);  // an Error here (bad index) ends the input
  Options eager = {{"ge.exec.enableOperatorFusion", "0"}};
  Options fused = {{"ge.exec.enableOperatorFusion", "1"}, {"codegen", "interpreter"}};
  const char* ub = in.PickValueInArray({"", "1024", "4096", "65536"});
  if (*ub) fused["ub_bytes"] = ub;
  for (auto* opts : {&eager, &fused}) {
    const char* mode = opts == &eager ? "eager" : "graph";
    std::map<std::string, Tensor> got;
    ref::KernelOfNode kernel_of;
    try {
      CompiledModel m = compile(graph, *opts);
      got = m.run(g.inputs);
      kernel_of = fuzz::kernel_of_node(m);
    } catch (const Error& e) {
      fuzz::finding(std::string(mode) + " failed where the reference ran: " + e.what(), graph);
    }
    fuzz::compare(graph, g.inputs, want, got, mode, opts == &fused ? &kernel_of : nullptr);
  }
}

}  // namespace
}  // namespace ubfuse

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ubfuse::one_input(data, size);
  } catch (const ubfuse::Error&) {
    // An invalid graph (shapes, dtypes, ranks) or an out-of-range index: a user error.
  }
  return 0;
}
