#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "runtime/executor.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

// Elements before, along and after `axis` of sizes s.
struct Blocks {
  int64_t outer = 1, rows = 1, inner = 1;
};
Blocks blocks_of(const Sizes& s, int axis) {
  Blocks b;
  for (int i = 0; i < int(s.size()); i++) {
    (i < axis ? b.outer : i == axis ? b.rows : b.inner) *= s[size_t(i)];
  }
  return b;
}

// Copies `outer` runs of `run` bytes, src_pitch and dst_pitch bytes apart (over the pool if any).
void copy_blocks(const char* src, int64_t src_pitch, char* dst, int64_t dst_pitch, int64_t outer,
                 int64_t run, ThreadPool* pool) {
  if (run <= 0 || outer <= 0) return;
  auto some = [&](int64_t lo, int64_t hi, int) {
    for (int64_t o = lo; o < hi; o++) {
      std::memcpy(dst + o * dst_pitch, src + o * src_pitch, size_t(run));
    }
  };
  if (!pool) return some(0, outer, 0);
  const int64_t grain = std::max<int64_t>(1, (int64_t(64) << 10) / run);  // ~64 KB per chunk
  pool->parallel_for(outer, grain, some);
}

}  // namespace

std::optional<PitchedView> pitched_view(const Sizes& buffer, int axis, int64_t rows,
                                        const Sizes& view) {
  Sizes valid = buffer;
  valid[size_t(axis)] = rows;
  const Blocks b = blocks_of(valid, axis);
  int64_t after = 1;  // product of view's dims after k
  for (int k = int(view.size()); k-- > 0;) {
    if (after == b.inner && view[size_t(k)] == rows) {
      int64_t before = 1;
      for (int i = 0; i < k; i++) before *= view[size_t(i)];
      if (before == b.outer) {
        PitchedView p{view, k};
        p.storage[size_t(k)] = buffer[size_t(axis)];
        return p;
      }
    }
    after *= view[size_t(k)];
    if (after > b.inner) break;
  }
  return std::nullopt;
}

void append_rows(const Tensor& buffer, int axis, int64_t at, const Tensor& rows, ThreadPool* pool) {
  const Blocks buf = blocks_of(buffer.sizes(), axis);
  const Blocks add = blocks_of(rows.sizes(), axis);
  UBF_CHECK(rows.dtype() == buffer.dtype() && add.outer == buf.outer && add.inner == buf.inner &&
                at + add.rows <= buf.rows,
            "KV cache append of " + sizes_str(rows.sizes()) + " at row " + std::to_string(at) +
                " into " + sizes_str(buffer.sizes()));
  const int64_t es = int64_t(dtype_size(buffer.dtype()));
  copy_blocks(static_cast<const char*>(rows.data()), add.rows * add.inner * es,
              static_cast<char*>(buffer.data()) + at * buf.inner * es, buf.rows * buf.inner * es,
              buf.outer, add.rows * add.inner * es, pool);
}

void copy_rows(const Tensor& buffer, int axis, int64_t rows, const Tensor& dense,
               ThreadPool* pool) {
  const Blocks buf = blocks_of(buffer.sizes(), axis);
  UBF_CHECK(rows <= buf.rows && dense.numel() == buf.outer * rows * buf.inner,
            "KV cache copy of " + std::to_string(rows) + " rows of " + sizes_str(buffer.sizes()));
  const int64_t es = int64_t(dtype_size(buffer.dtype()));
  copy_blocks(static_cast<const char*>(buffer.data()), buf.rows * buf.inner * es,
              static_cast<char*>(dense.data()), rows * buf.inner * es, buf.outer,
              rows * buf.inner * es, pool);
}

KvCache Executor::make_kv_cache(int64_t max_length, const SymbolBindings& dims) const {
  if (max_length < 1) {
    throw Error("make_kv_cache: max_length is " + std::to_string(max_length) +
                "; hint: the most rows a sequence will hold, past and new together");
  }
  const Graph& graph = exe_->graph;
  const auto& gouts = graph.outputs();
  KvCache cache;  // CompiledModel::make_kv_cache sets its owner
  cache.max_length_ = max_length;
  std::string why;  // per past-like input, why it is no pair
  for (size_t ii = 0; ii < graph.inputs().size(); ii++) {
    const Value* past = graph.inputs()[ii];
    const Node* concat = nullptr;
    std::string no;
    for (const Node* u : graph.users(past)) {
      if (u->op == OpKind::Shape) continue;  // reads the sizes only
      if (u->op == OpKind::Concat && !concat && u->inputs.size() == 2 && u->inputs[0] == past &&
          u->inputs[1] != past) {
        concat = u;
      } else {
        no = "'" + u->name + "' (" + std::string(op_name(u->op)) + ") reads it";
      }
    }
    if (!concat) continue;  // not a cache input
    if (graph.is_output(past) && no.empty()) no = "it is also a graph output";
    int out = -1;
    for (size_t o = 0; o < gouts.size(); o++) {
      if (gouts[o].second == concat->out() && out < 0) out = int(o);
    }
    size_t kernel = exe_->kernels.size();
    for (size_t k = 0; k < exe_->kernels.size(); k++) {
      const Kernel& kern = *exe_->kernels[k];
      if (kern.inputs.size() == 2 && kern.inputs[0] == past && kern.outputs.size() == 1 &&
          kern.outputs[0] == concat->out() && kern.info.op_types.size() == 1) {
        kernel = k;
      }
    }
    const int rank = int(past->shape.size());
    int axis = int(concat->attr_int("axis", 0));
    if (axis < 0) axis += rank;
    if (no.empty() && out < 0) no = "its Concat '" + concat->name + "' is no graph output";
    if (no.empty() && kernel == exe_->kernels.size()) {
      no = "its Concat '" + concat->name + "' runs inside another kernel";
    }
    if (no.empty() && (axis < 0 || axis >= rank)) no = "its Concat's axis is out of range";
    Sizes sizes;
    for (int d = 0; no.empty() && d < rank; d++) {
      const Dim& dim = past->shape[size_t(d)];
      if (d == axis) {
        sizes.push_back(max_length);
      } else if (auto v = eval_dim(dim, dims)) {
        sizes.push_back(*v);
      } else {
        no = "dim " + std::to_string(d) + " '" + dim.symbol() +
             "' has no value; hint: pass it in dims (e.g. {\"" + dim.symbol() + "\", 1})";
      }
    }
    if (!no.empty()) {
      why += "\n  input '" + past->name + "': " + no;
      continue;
    }
    KvCache::Pair p;
    p.past = past->name;
    p.present = gouts[size_t(out)].first;
    p.axis = axis;
    p.buffer = Tensor::zeros(past->dtype, sizes);
    cache.pairs_.push_back(std::move(p));
    cache.slots_.push_back({int(ii), out, kernel});
  }
  if (cache.pairs_.empty()) {
    throw Error(
        "make_kv_cache: no input of the model is a past that a Concat extends into a " +
        std::string("present output") +
        (why.empty() ? std::string("; hint: export the decoder with past_key_values") : why));
  }
  if (!why.empty()) throw Error("make_kv_cache: these inputs cannot be kept in place:" + why);
  return cache;
}

KvCache CompiledModel::make_kv_cache(int64_t max_length, const SymbolBindings& dims) const {
  KvCache cache = executor().make_kv_cache(max_length, dims);
  cache.owner_ = executor_;
  return cache;
}

void CompiledModel::run_with_cache(const std::map<std::string, Tensor>& inputs, KvCache& cache,
                                   std::map<std::string, Tensor>& outputs, RunStats* stats) const {
  executor().run(inputs, outputs, false, stats, &cache);
}

void KvCache::append(const std::map<std::string, Tensor>& presents) {
  int64_t n = -1;
  for (const Pair& p : pairs_) {  // everything checked before anything is written
    auto it = presents.find(p.present);
    if (it == presents.end() || !it->second.defined()) {
      throw Error("KvCache::append: no rows for present '" + p.present +
                  "'; hint: pass every pair's present (KvCache::pairs)");
    }
    const Tensor& t = it->second;
    Sizes want = p.buffer.sizes();
    want[size_t(p.axis)] = t.rank() == int(want.size()) ? t.dim(p.axis) : 0;
    if (t.dtype() != p.buffer.dtype() || t.sizes() != want) {
      throw Error("KvCache::append: present '" + p.present + "' is " +
                  std::string(dtype_name(t.dtype())) + sizes_str(t.sizes()) + " but the cache " +
                  "holds " + std::string(dtype_name(p.buffer.dtype())) +
                  sizes_str(p.buffer.sizes()) + " (rows along axis " + std::to_string(p.axis) +
                  ")");
    }
    if (n >= 0 && t.dim(p.axis) != n) {
      throw Error("KvCache::append: present '" + p.present + "' has " +
                  std::to_string(t.dim(p.axis)) + " rows but '" + pairs_[0].present + "' has " +
                  std::to_string(n) + "; a KV cache's pairs grow together");
    }
    n = t.dim(p.axis);
  }
  if (length_ + n > max_length_) {
    throw Error("the KV cache is full: " + std::to_string(length_) + " rows held and " +
                std::to_string(n) + " to append but max_length is " + std::to_string(max_length_) +
                "; hint: make_kv_cache with a larger max_length");
  }
  for (const Pair& p : pairs_)
    append_rows(p.buffer, p.axis, length_, presents.at(p.present), nullptr);
  length_ += n;
}

Tensor KvCache::rows(const std::string& present) const {
  for (const Pair& p : pairs_) {
    if (p.present != present) continue;
    Sizes s = p.buffer.sizes();
    s[size_t(p.axis)] = length_;
    Tensor dense(p.buffer.dtype(), s);
    copy_rows(p.buffer, p.axis, length_, dense, nullptr);
    return dense;
  }
  std::string names;
  for (const Pair& p : pairs_) names += (names.empty() ? "" : ", ") + p.present;
  throw Error("KV cache has no present '" + present + "'; it holds: " + names);
}

}  // namespace ubfuse
