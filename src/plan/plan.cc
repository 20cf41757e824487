#include "plan/plan.h"

#include <algorithm>

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

const Value* PlanSpec::storage_of(const Value* v) const {
  if (!view_of) return v;
  for (auto it = view_of->find(v); it != view_of->end(); it = view_of->find(v)) v = it->second;
  return v;
}

namespace {

// Where each operand lives, now that sizes and arena offsets are known.
void bind_operands(const PlanSpec& spec, Plan& plan) {
  const Graph& graph = *spec.graph;
  std::unordered_map<const Value*, BufferRef> owner;  // values that own their bytes
  for (size_t i = 0; i < graph.inputs().size(); i++) {
    BufferRef r;
    r.kind = BufferRef::Kind::Input;
    r.index = int(i);
    owner[graph.inputs()[i]] = r;
  }
  // A graph output computed by a kernel is written straight into the caller's buffer (the first
  // name it is returned under).
  const auto& outs = graph.outputs();
  for (size_t i = 0; i < outs.size(); i++) {
    const Value* v = outs[i].second;
    if (!v->producer || v->producer->op == OpKind::Constant || owner.count(v)) continue;
    BufferRef r;
    r.kind = BufferRef::Kind::Output;
    r.index = int(i);
    owner[v] = r;
  }
  auto ref_of = [&](const Value* v) {
    const Value* s = spec.storage_of(v);
    BufferRef r;
    auto it = owner.find(s);
    if (it != owner.end()) {
      r = it->second;
    } else if (s->producer && s->producer->op == OpKind::Constant) {
      r.kind = BufferRef::Kind::Constant;
      r.constant = &s->producer->payload;
    } else {
      auto off = plan.offset.find(s);
      UBF_CHECK(off != plan.offset.end(), "value '" + s->name + "' has no buffer");
      r.kind = BufferRef::Kind::Arena;
      r.offset = off->second;
    }
    r.dtype = v->dtype;
    r.sizes = plan.sizes.at(v);
    return r;
  };
  for (auto& step : spec.steps) {
    Plan::Operands ops;
    for (auto* v : step.inputs) ops.inputs.push_back(ref_of(v));
    for (auto* v : step.outputs) ops.outputs.push_back(ref_of(v));
    plan.steps.push_back(std::move(ops));
  }
  for (size_t i = 0; i < outs.size(); i++) {
    BufferRef r = ref_of(outs[i].second);
    plan.output_sizes.push_back(r.sizes);
    if (r.kind != BufferRef::Kind::Output || r.index != int(i))
      plan.output_copies.push_back({r, int(i)});
  }
}

}  // namespace

std::shared_ptr<const Plan> build_plan(const PlanSpec& spec, const SymbolBindings& b) {
  const Graph& graph = *spec.graph;
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
  for (int k = 0; k < int(spec.steps.size()); k++) {
    for (auto* v : spec.steps[size_t(k)].outputs) {
      if (graph.is_output(v)) continue;
      int64_t bytes = align_up(numel(plan->sizes.at(v)) * int64_t(dtype_size(v->dtype)));
      index[v] = bufs.size();
      bufs.push_back({v, bytes, k, k});
    }
    for (auto* v : spec.steps[size_t(k)].inputs) {
      auto it = index.find(spec.storage_of(v));  // a view keeps its storage alive
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
  if (spec.memory_limit > 0 && total > spec.memory_limit) {
    throw Error("planned memory " + std::to_string(total) + " bytes (intermediates " +
                std::to_string(plan->arena_bytes) + " + outputs) exceeds memory_limit " +
                std::to_string(spec.memory_limit) + " bytes" +
                (b.empty() ? std::string() : " for this shape") +
                "; hint: raise memory_limit or use smaller shapes");
  }
  bind_operands(spec, *plan);
  return plan;
}

}  // namespace ubfuse
