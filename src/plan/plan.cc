#include "plan/plan.h"

#include <algorithm>
#include <cstring>

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

// Infers node n on concrete input sizes, its operands' values known where the plan knows them
// (constants, shape values, value inputs), so ops whose output sizes depend on values see them.
// This also catches symbol bindings that break an op (a symbol bound to 5 broadcast against a
// fixed 4, say). It runs shape inference on `s`, a copy of n over stand-in values, made once per
// node (a memo keeps it) and refilled per call.
std::vector<Sizes> concrete_infer(const Node& n, const Plan& plan,
                                  const std::function<const Tensor*(const Value*)>& known,
                                  InferScratch& s) {
  const size_t nin = n.inputs.size();
  if (!s.ready) {
    s.node.op = n.op;
    s.node.name = n.name;
    s.node.attrs = n.attrs;
    s.node.payload = n.payload;
    s.node.host = n.host;
    s.node.branches = n.branches;
    s.ins.resize(nin);
    s.outs.resize(n.outputs.size());
    s.consts.resize(nin);
    for (size_t i = 0; i < nin; i++) {
      s.ins[i].name = n.inputs[i]->name;
      s.ins[i].dtype = n.inputs[i]->dtype;
      s.consts[i].op = OpKind::Constant;
      s.consts[i].name = n.inputs[i]->name;
      s.consts[i].outputs = {&s.ins[i]};
      s.node.inputs.push_back(&s.ins[i]);
    }
    for (auto& o : s.outs) s.node.outputs.push_back(&o);
    s.ready = true;
  }
  for (size_t i = 0; i < nin; i++) {
    s.ins[i].shape = to_shape(plan.sizes.at(n.inputs[i]));
    const Tensor* t = known(n.inputs[i]);
    s.consts[i].payload = t ? *t : Tensor();
    s.ins[i].producer = t ? &s.consts[i] : nullptr;
  }
  for (auto& o : s.outs) o = Value();
  infer_node(s.node);
  std::vector<Sizes> out;
  for (auto& o : s.outs) out.push_back(static_sizes(o.shape));
  return out;
}

bool same_contents(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

// The contents of input v that the memo's key includes: what the plan knows of it, except a
// constant's (which never changes); null when none.
const Tensor* keyed_value(const Value* v, const std::function<const Tensor*(const Value*)>& known) {
  return v->producer && v->producer->op == OpKind::Constant ? nullptr : known(v);
}

// The entry of `list` that node n's inputs in this plan match (moved to the front), or null.
const PlanMemo::Entry* memo_find(std::vector<PlanMemo::Entry>& list, const Node& n,
                                 const Plan& plan,
                                 const std::function<const Tensor*(const Value*)>& known) {
  for (size_t e = 0; e < list.size(); e++) {
    const PlanMemo::Entry& c = list[e];
    bool same = true;
    for (size_t i = 0; i < n.inputs.size() && same; i++) {
      const Tensor* t = keyed_value(n.inputs[i], known);
      same = c.in_sizes[i] == plan.sizes.at(n.inputs[i]) && c.in_known[i] == (t != nullptr) &&
             (!t || same_contents(c.in_values[i], *t));
    }
    if (!same) continue;
    std::rotate(list.begin(), list.begin() + long(e), list.begin() + long(e) + 1);
    return &list.front();
  }
  return nullptr;
}

// A new entry's key: node n's input sizes and the contents the plan knows (value inputs are the
// caller's memory, so copied; shape values belong to the plan and never change). False when a
// known input is too large to compare.
bool memo_key(const Node& n, const Plan& plan,
              const std::function<const Tensor*(const Value*)>& known,
              const std::map<const Value*, Tensor>& value_inputs, PlanMemo::Entry& key) {
  for (const Value* v : n.inputs) {
    const Tensor* t = keyed_value(v, known);
    if (t && int64_t(t->nbytes()) > PlanMemo::kMaxKeyBytes) return false;
    key.in_sizes.push_back(plan.sizes.at(v));
    key.in_known.push_back(t != nullptr);
    key.in_values.push_back(!t ? Tensor() : value_inputs.count(v) ? t->clone() : *t);
  }
  return true;
}

void memo_store(std::vector<PlanMemo::Entry>& list, PlanMemo::Entry e) {
  if (list.size() >= PlanMemo::kPerNode) list.pop_back();
  list.insert(list.begin(), std::move(e));
}

// Ops that read only their input's sizes, not its data.
bool reads_only_sizes(const Node& n) { return n.op == OpKind::Shape; }

// Binds the symbols of v's declared shape that only the plan knows to the concrete sizes (one
// unknown per dim, solved: "past+seq" = 12 with seq=5 binds past=7), and checks the others.
void unify(const Node& n, const Value* v, const Sizes& got, SymbolBindings& b) {
  auto mismatch = [&](const std::string& why) {
    throw Error(n.describe() + ": with " + bindings_str(b) + " the output '" + v->name + "' is " +
                sizes_str(got) + " but the graph declares " + shape_str(v->shape) + why +
                "; hint: the symbols bound from the inputs are inconsistent with this op");
  };
  if (got.size() != v->shape.size()) mismatch("");
  for (size_t k = 0; k < got.size(); k++) {
    const Dim& d = v->shape[k];
    if (auto e = eval_dim(d, b)) {
      if (*e != got[k]) mismatch("");
      continue;
    }
    std::string why;
    auto sol = solve_dim(d, got[k], b, &why);
    if (!sol) mismatch(" (dim '" + d.symbol() + "' cannot be solved for its symbol: " + why + ")");
    b[sol->symbol] = sol->value;
  }
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
    if (plan.values.count(v)) continue;  // a shape value: copied from the plan
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
    } else if (auto pv = plan.values.find(s); pv != plan.values.end()) {
      r.kind = BufferRef::Kind::Constant;  // a shape value: constant for this plan
      r.constant = &pv->second;
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

std::shared_ptr<const Plan> build_plan(const PlanSpec& spec, const SymbolBindings& b,
                                       const std::map<const Value*, Tensor>& value_inputs,
                                       PlanMemo* memo) {
  const Graph& graph = *spec.graph;
  std::unique_lock<std::mutex> lock;
  if (memo) lock = std::unique_lock<std::mutex>(memo->mu);
  std::vector<const Node*> computed_order;
  if (spec.order.empty()) {
    for (const Node* n : graph.topo_order()) computed_order.push_back(n);
  }
  const std::vector<const Node*>& nodes = spec.order.empty() ? computed_order : spec.order;
  auto plan = std::make_shared<Plan>();
  plan->sizes.reserve(graph.inputs().size() + 2 * nodes.size());
  plan->symbols = b;
  SymbolBindings& syms = plan->symbols;
  for (auto* in : graph.inputs()) {
    plan->sizes[in] = eval_shape(in->shape, b);
    check_bytes(in, plan->sizes[in], b);
  }
  auto known = [&](const Value* v) -> const Tensor* {
    if (v->producer && v->producer->op == OpKind::Constant) return &v->producer->payload;
    auto it = plan->values.find(v);
    if (it != plan->values.end()) return &it->second;
    auto vi = value_inputs.find(v);
    return vi != value_inputs.end() ? &vi->second : nullptr;
  };
  const bool use_memo = memo && !spec.order.empty();
  if (use_memo) memo->nodes.resize(nodes.size());
  for (size_t k = 0; k < nodes.size(); k++) {
    const Node* n = nodes[k];
    PlanMemo::PerNode* pm = use_memo ? &memo->nodes[k] : nullptr;
    if (pm && pm->misses_in_a_row >= PlanMemo::kGiveUp && ++pm->skipped % PlanMemo::kRetry) {
      pm = nullptr;  // keeps its scratch below, skips the lookup
    }
    const PlanMemo::Entry* hit = pm ? memo_find(pm->entries, *n, *plan, known) : nullptr;
    if (pm) pm->misses_in_a_row = hit ? 0 : pm->misses_in_a_row + 1;
    if (use_memo) ++(hit ? memo->reused : memo->inferred);
    InferScratch local;
    std::vector<Sizes> got =
        hit ? hit->out_sizes
            : concrete_infer(*n, *plan, known, use_memo ? memo->nodes[k].scratch : local);
    for (size_t i = 0; i < n->outputs.size(); i++) {
      const Value* v = n->outputs[i];
      unify(*n, v, got[i], syms);
      check_bytes(v, got[i], syms);
      plan->sizes[v] = got[i];
    }
    const bool shape_node = spec.shape_nodes.count(n) != 0;
    if (hit && shape_node) {
      for (size_t i = 0; i < n->outputs.size(); i++)
        plan->values[n->outputs[i]] = hit->out_values[i];
    }
    PlanMemo::Entry key;
    const bool keyed = pm && !hit && memo_key(*n, *plan, known, value_inputs, key);
    if (keyed) key.out_sizes = got;
    if (hit || !shape_node) {
      if (keyed) memo_store(pm->entries, std::move(key));
      continue;
    }
    // A shape node: run it now, on the values it reads (a Shape node reads only sizes).
    std::vector<Tensor> in;
    for (const Value* v : n->inputs) {
      if (const Tensor* t = known(v)) {
        in.push_back(*t);
      } else {
        UBF_CHECK(reads_only_sizes(*n),
                  n->describe() + " is a shape node but input '" + v->name + "' has no value");
        in.push_back(Tensor::view(v->dtype, plan->sizes.at(v), nullptr));
      }
    }
    std::vector<Tensor> out;
    for (const Value* v : n->outputs) out.emplace_back(v->dtype, plan->sizes.at(v));
    spec.run_shape_node(*n, in, out);
    for (size_t i = 0; i < out.size(); i++) plan->values[n->outputs[i]] = out[i];
    if (keyed) {
      key.out_values = out;
      memo_store(pm->entries, std::move(key));
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
