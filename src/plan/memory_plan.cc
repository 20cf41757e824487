// Run-time plans: concrete sizes of every value for one binding of the symbols, checked by
// re-running shape inference on concrete shapes, and arena offsets for intermediates with reuse:
// greedy best-fit over each buffer's live range [first write, last read] in kernel order.
#include <algorithm>

#include "runtime/compiled_model_impl.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

constexpr int64_t kAlign = 64;

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// No real tensor passes 2^48 bytes (256 TiB); below it, sums over a plan's buffers cannot
// overflow. Symbol values from gears or the fuzzer can ask for more.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

std::string bindings_str(const SymbolBindings& b) {
  std::string r;
  for (auto& [k, x] : b) r += (r.empty() ? "" : ", ") + k + "=" + std::to_string(x);
  return r;
}

void check_bytes(const Value* v, const Sizes& s, const SymbolBindings& b) {
  int64_t bytes = int64_t(dtype_size(v->dtype));
  bool over = false;
  for (int64_t d : s)
    over = over || __builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxTensorBytes;
  if (over) {
    throw Error("value '" + v->name + "' " + shape_str(v->shape) + " would be " + sizes_str(s) +
                " with " + bindings_str(b) + ", more than the 2^48 bytes one tensor may have" +
                "; hint: check the symbol values (input shapes, gears)");
  }
}

// Re-infers node n on concrete input sizes to catch symbol bindings that break it (a symbol bound
// to 5 broadcast against a fixed 4, say).
Sizes concrete_check(const Node& n, const std::unordered_map<const Value*, Sizes>& sizes) {
  Node copy;
  copy.op = n.op;
  copy.name = n.name;
  copy.attrs = n.attrs;
  copy.payload = n.payload;
  copy.host = n.host;
  std::vector<Value> ins(n.inputs.size()), outs(n.outputs.size());
  for (size_t i = 0; i < n.inputs.size(); i++) {
    ins[i].dtype = n.inputs[i]->dtype;
    ins[i].shape = to_shape(sizes.at(n.inputs[i]));
    copy.inputs.push_back(&ins[i]);
  }
  for (auto& o : outs) copy.outputs.push_back(&o);
  infer_node(copy);
  return static_sizes(outs[0].shape);
}

}  // namespace

std::shared_ptr<const Plan> CompiledModelImpl::build_plan(const SymbolBindings& b) const {
  auto plan = std::make_shared<Plan>();
  plan->symbols = b;
  for (auto* in : graph.inputs()) {
    plan->sizes[in] = eval_shape(in->shape, b);
    check_bytes(in, plan->sizes[in], b);
  }
  for (Node* n : graph.topo_order()) {
    for (size_t i = 0; i < n->outputs.size(); i++) {
      const Value* v = n->outputs[i];
      Sizes s = eval_shape(v->shape, b);
      check_bytes(v, s, b);
      if (i == 0) {
        Sizes c = concrete_check(*n, plan->sizes);
        if (c != s) {
          throw Error(n->describe() + ": with " + bindings_str(b) + " the output is " +
                      sizes_str(c) + " but the graph declares " + shape_str(v->shape) +
                      "; hint: the symbols bound from the inputs are inconsistent with this op");
        }
      }
      plan->sizes[v] = s;
    }
  }
  // Live ranges of intermediates over kernel indices.
  struct Buf {
    const Value* v;
    int64_t bytes;
    int first, last;
  };
  std::vector<Buf> bufs;
  std::unordered_map<const Value*, size_t> index;
  for (int k = 0; k < int(kernels.size()); k++) {
    for (auto* v : kernels[size_t(k)]->outputs) {
      if (graph.is_output(v)) continue;
      int64_t bytes = align_up(numel(plan->sizes.at(v)) * int64_t(dtype_size(v->dtype)));
      index[v] = bufs.size();
      bufs.push_back({v, bytes, k, k});
    }
    for (auto* v : kernels[size_t(k)]->inputs) {
      auto it = index.find(storage_of(v));  // a view keeps its storage alive
      if (it != index.end()) bufs[it->second].last = k;
    }
  }
  // Place biggest first into the lowest offset that does not overlap a live, placed buffer.
  std::vector<size_t> order(bufs.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return bufs[a].bytes > bufs[c].bytes; });
  std::vector<std::pair<int64_t, size_t>> placed;  // offset, buf index
  for (size_t i : order) {
    const Buf& bi = bufs[i];
    plan->naive_bytes += bi.bytes;
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (auto& [off, j] : placed) {
      const Buf& bj = bufs[j];
      if (bj.first <= bi.last && bi.first <= bj.last) busy.push_back({off, off + bj.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto& [s, e] : busy) {
      if (off + bi.bytes <= s) break;
      off = std::max(off, e);
    }
    placed.push_back({off, i});
    plan->offset[bi.v] = off;
    plan->arena_bytes = std::max(plan->arena_bytes, off + bi.bytes);
  }
  int64_t total = plan->arena_bytes;
  for (auto& [name, v] : graph.outputs()) {
    total += numel(plan->sizes.at(v)) * int64_t(dtype_size(v->dtype));
  }
  if (config.memory_limit > 0 && total > config.memory_limit) {
    throw Error("planned memory " + std::to_string(total) + " bytes (intermediates " +
                std::to_string(plan->arena_bytes) + " + outputs) exceeds memory_limit " +
                std::to_string(config.memory_limit) + " bytes" +
                (b.empty() ? std::string() : " for this shape") +
                "; hint: raise memory_limit or use smaller shapes");
  }
  return plan;
}

std::shared_ptr<const Plan> CompiledModelImpl::plan_for(const SymbolBindings& b) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(b);
    if (it != plans_.end()) {
      plan_hits_++;
      return it->second;
    }
  }
  auto p = build_plan(b);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = plans_.emplace(b, p);
  if (inserted) plan_builds_++;
  return it->second;
}

}  // namespace ubfuse
