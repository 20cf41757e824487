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

// What a plan knows of each value's contents while it is built, by id: constants, shape values
// the plan computed, value inputs the caller passed.
using Known = std::vector<const Tensor*>;

// Infers node n (at position k of the spec's order) on concrete input sizes, its operands'
// values known where the plan knows them, so ops whose output sizes depend on values see them.
// This also catches symbol bindings that break an op (a symbol bound to 5 broadcast against a
// fixed 4, say). It runs shape inference on `s`, a copy of n over stand-in values, made once per
// node (a memo keeps it) and refilled per call.
std::vector<Sizes> concrete_infer(const Node& n, const std::vector<int>& in_ids, const Plan& plan,
                                  const Known& known, InferScratch& s) {
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
    const int id = in_ids[i];
    const Sizes& sz = plan.sizes[size_t(id)];
    s.ins[i].shape.assign(sz.begin(), sz.end());
    const Tensor* t = known[size_t(id)];
    s.consts[i].payload = t ? *t : Tensor();
    s.ins[i].producer = t ? &s.consts[i] : nullptr;
  }
  for (auto& o : s.outs) {
    o.shape.clear();
    o.known.reset();
  }
  infer_node(s.node);
  std::vector<Sizes> out;
  out.reserve(s.outs.size());
  for (auto& o : s.outs) out.push_back(static_sizes(o.shape));
  return out;
}

bool same_contents(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

// The contents of input `id` that the memo's key includes: what the plan knows of it, except a
// constant's (which never changes); null when none.
const Tensor* keyed_value(const PlanIndex& ix, int id, const Known& known) {
  return ix.constant[size_t(id)] ? nullptr : known[size_t(id)];
}

// The entry of `list` that the node's inputs in this plan match (moved to the front), or null.
const PlanMemo::Entry* memo_find(std::vector<PlanMemo::Entry>& list, const std::vector<int>& in,
                                 const PlanIndex& ix, const Plan& plan, const Known& known) {
  for (size_t e = 0; e < list.size(); e++) {
    const PlanMemo::Entry& c = list[e];
    bool same = true;
    for (size_t i = 0; i < in.size() && same; i++) {
      const Tensor* t = keyed_value(ix, in[i], known);
      same = c.in_sizes[i] == plan.sizes[size_t(in[i])] && c.in_known[i] == (t != nullptr) &&
             (!t || same_contents(c.in_values[i], *t));
    }
    if (!same) continue;
    std::rotate(list.begin(), list.begin() + long(e), list.begin() + long(e) + 1);
    return &list.front();
  }
  return nullptr;
}

// A new entry's key: the node's input sizes and the contents the plan knows (value inputs are
// the caller's memory, so copied; shape values belong to the plan and never change). False when
// a known input is too large to compare.
bool memo_key(const std::vector<int>& in, const PlanIndex& ix, const Plan& plan, const Known& known,
              const std::vector<char>& is_value_input, PlanMemo::Entry& key) {
  for (int id : in) {
    const Tensor* t = keyed_value(ix, id, known);
    if (t && int64_t(t->nbytes()) > PlanMemo::kMaxKeyBytes) return false;
    key.in_sizes.push_back(plan.sizes[size_t(id)]);
    key.in_known.push_back(t != nullptr);
    key.in_values.push_back(!t ? Tensor() : is_value_input[size_t(id)] ? t->clone() : *t);
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
// `lone` flags the dims that are one symbol, which need no parsing.
void unify(const Node& n, const Value* v, const std::vector<char>& lone, const Sizes& got,
           SymbolBindings& b) {
  auto mismatch = [&](const std::string& why) {
    throw Error(n.describe() + ": with " + bindings_str(b) + " the output '" + v->name + "' is " +
                sizes_str(got) + " but the graph declares " + shape_str(v->shape) + why +
                "; hint: the symbols bound from the inputs are inconsistent with this op");
  };
  if (got.size() != v->shape.size()) mismatch("");
  for (size_t k = 0; k < got.size(); k++) {
    const Dim& d = v->shape[k];
    if (d.is_static()) {
      if (d.value() != got[k]) mismatch("");
      continue;
    }
    if (lone[k]) {
      if (auto it = b.find(d.symbol()); it != b.end()) {
        if (it->second != got[k]) mismatch("");
        continue;
      }
    } else if (auto e = eval_dim(d, b)) {
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

const Sizes* Plan::find_sizes(const Value* v) const {
  if (!index || v->id < 0 || size_t(v->id) >= sizes.size() || index->value[size_t(v->id)] != v)
    return nullptr;
  return &sizes[size_t(v->id)];
}

std::shared_ptr<const PlanIndex> index_plan_spec(const PlanSpec& spec) {
  const Graph& graph = *spec.graph;
  auto ix = std::make_shared<PlanIndex>();
  auto add = [&](const Value* v) {
    UBF_CHECK(v->id >= 0, "value '" + v->name + "' has no id");
    const size_t id = size_t(v->id);
    if (id >= ix->value.size()) ix->value.resize(id + 1, nullptr);
    UBF_CHECK(!ix->value[id] || ix->value[id] == v, "values '" + ix->value[id]->name + "' and '" +
                                                        v->name + "' share id " +
                                                        std::to_string(id));
    ix->value[id] = v;
    return int(id);
  };
  for (const Value* v : graph.inputs()) ix->inputs.push_back(add(v));
  for (const Node* n : spec.order) {
    std::vector<int> in, out;
    for (const Value* v : n->inputs) in.push_back(add(v));
    for (const Value* v : n->outputs) out.push_back(add(v));
    ix->node_in.push_back(std::move(in));
    ix->node_out.push_back(std::move(out));
  }
  for (auto& [name, v] : graph.outputs()) ix->outputs.push_back(add(v));
  auto id_of = [&](const Value* v) {
    UBF_CHECK(v->id >= 0 && size_t(v->id) < ix->value.size() && ix->value[size_t(v->id)] == v,
              "value '" + v->name + "' is not in the graph the plan is built over");
    return v->id;
  };
  for (auto& step : spec.steps) {
    std::vector<int> in, out;
    for (const Value* v : step.inputs) in.push_back(id_of(v));
    for (const Value* v : step.outputs) out.push_back(id_of(v));
    ix->step_in.push_back(std::move(in));
    ix->step_out.push_back(std::move(out));
  }
  const size_t nv = ix->value.size();
  ix->storage.assign(nv, -1);
  ix->constant.assign(nv, nullptr);
  ix->output_of.assign(nv, -1);
  ix->lone.resize(nv);
  for (size_t id = 0; id < nv; id++) {
    const Value* v = ix->value[id];
    if (!v) continue;
    for (const Dim& d : v->shape) ix->lone[id].push_back(d.is_symbol());
    ix->storage[id] = id_of(spec.storage_of(v));
    if (v->producer && v->producer->op == OpKind::Constant)
      ix->constant[id] = &v->producer->payload;
  }
  for (size_t i = ix->outputs.size(); i-- > 0;) ix->output_of[size_t(ix->outputs[i])] = int(i);
  return ix;
}

namespace {

// Where each operand lives, now that sizes and arena offsets (by id, -1: none) are known.
void bind_operands(const PlanSpec& spec, const PlanIndex& ix, const std::vector<int64_t>& offset,
                   const std::vector<char>& precomputed, Plan& plan) {
  const Graph& graph = *spec.graph;
  // Values that own their bytes: graph inputs, and graph outputs computed by a kernel, which are
  // written straight into the caller's buffer (the first name each is returned under).
  std::vector<BufferRef> owner(ix.value.size());
  std::vector<char> owns(ix.value.size(), 0);
  for (size_t i = 0; i < ix.inputs.size(); i++) {
    BufferRef& r = owner[size_t(ix.inputs[i])];
    r.kind = BufferRef::Kind::Input;
    r.index = int(i);
    owns[size_t(ix.inputs[i])] = 1;
  }
  const auto& outs = graph.outputs();
  for (size_t i = 0; i < outs.size(); i++) {
    const int id = ix.outputs[i];
    const Value* v = outs[i].second;
    if (!v->producer || ix.constant[size_t(id)] || owns[size_t(id)]) continue;
    if (plan.values.count(v)) continue;  // a shape value: copied from the plan
    owner[size_t(id)].kind = BufferRef::Kind::Output;
    owner[size_t(id)].index = int(i);
    owns[size_t(id)] = 1;
  }
  auto ref_of = [&](int id) {
    const int s = ix.storage[size_t(id)];
    const Value* sv = ix.value[size_t(s)];
    BufferRef r;
    if (owns[size_t(s)]) {
      r = owner[size_t(s)];
    } else if (ix.constant[size_t(s)]) {
      r.kind = BufferRef::Kind::Constant;
      r.constant = ix.constant[size_t(s)];
    } else if (auto pv = plan.values.find(sv); pv != plan.values.end()) {
      r.kind = BufferRef::Kind::Constant;  // a shape value: constant for this plan
      r.constant = &pv->second;
    } else {
      UBF_CHECK(offset[size_t(s)] >= 0, "value '" + sv->name + "' has no buffer");
      r.kind = BufferRef::Kind::Arena;
      r.offset = offset[size_t(s)];
    }
    r.dtype = ix.value[size_t(id)]->dtype;
    r.sizes = &plan.sizes[size_t(id)];
    return r;
  };
  plan.steps.resize(ix.step_in.size());
  for (size_t k = 0; k < ix.step_in.size(); k++) {
    Plan::Operands& ops = plan.steps[k];
    if (precomputed[k]) {
      ops.precomputed = true;
      continue;
    }
    ops.inputs.reserve(ix.step_in[k].size());
    ops.outputs.reserve(ix.step_out[k].size());
    for (int id : ix.step_in[k]) ops.inputs.push_back(ref_of(id));
    for (int id : ix.step_out[k]) ops.outputs.push_back(ref_of(id));
  }
  for (size_t i = 0; i < outs.size(); i++) {
    BufferRef r = ref_of(ix.outputs[i]);
    plan.output_sizes.push_back(*r.sizes);
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
  // A spec an executor did not prepare (tests, reports) gets its order and index here.
  PlanSpec local_spec;
  const PlanSpec* sp = &spec;
  if (spec.order.empty() || !spec.index) {
    local_spec.graph = spec.graph;
    local_spec.steps = spec.steps;
    local_spec.view_of = spec.view_of;
    local_spec.order = spec.order;
    if (local_spec.order.empty()) {
      for (const Node* n : graph.topo_order()) local_spec.order.push_back(n);
    }
    local_spec.index = index_plan_spec(local_spec);
    sp = &local_spec;
  }
  const std::vector<const Node*>& nodes = sp->order;
  const PlanIndex& ix = *sp->index;
  const size_t nv = ix.value.size();
  auto plan = std::make_shared<Plan>();
  plan->index = sp->index;
  plan->sizes.resize(nv);
  plan->symbols = b;
  SymbolBindings& syms = plan->symbols;
  for (int id : ix.inputs) {
    const Value* in = ix.value[size_t(id)];
    plan->sizes[size_t(id)] = eval_shape(in->shape, b);
    check_bytes(in, plan->sizes[size_t(id)], b);
  }
  Known known(ix.constant);
  std::vector<char> is_value_input(nv, 0);
  for (auto& [v, t] : value_inputs) {
    if (v->id < 0 || size_t(v->id) >= nv || ix.value[size_t(v->id)] != v) continue;
    if (!known[size_t(v->id)]) known[size_t(v->id)] = &t;
    is_value_input[size_t(v->id)] = 1;
  }
  // Only a memo over the executor's own spec: its entries are indexed by that spec's order.
  const bool use_memo = memo && sp == &spec;
  if (use_memo) memo->nodes.resize(nodes.size());
  for (size_t k = 0; k < nodes.size(); k++) {
    const Node* n = nodes[k];
    const std::vector<int>& in_ids = ix.node_in[k];
    const std::vector<int>& out_ids = ix.node_out[k];
    PlanMemo::PerNode* pm = use_memo ? &memo->nodes[k] : nullptr;
    if (pm && pm->misses_in_a_row >= PlanMemo::kGiveUp && ++pm->skipped % PlanMemo::kRetry) {
      pm = nullptr;  // keeps its scratch below, skips the lookup
    }
    const PlanMemo::Entry* hit = pm ? memo_find(pm->entries, in_ids, ix, *plan, known) : nullptr;
    if (pm) pm->misses_in_a_row = hit ? 0 : pm->misses_in_a_row + 1;
    if (use_memo) ++(hit ? memo->reused : memo->inferred);
    InferScratch scratch;
    std::vector<Sizes> got =
        hit ? hit->out_sizes
            : concrete_infer(*n, in_ids, *plan, known, use_memo ? memo->nodes[k].scratch : scratch);
    for (size_t i = 0; i < out_ids.size(); i++) {
      const Value* v = n->outputs[i];
      unify(*n, v, ix.lone[size_t(out_ids[i])], got[i], syms);
      check_bytes(v, got[i], syms);
      plan->sizes[size_t(out_ids[i])] = std::move(got[i]);
    }
    const bool shape_node = spec.shape_nodes.count(n) != 0;
    if (hit && shape_node) {
      for (size_t i = 0; i < out_ids.size(); i++) {
        Tensor& t = plan->values[n->outputs[i]] = hit->out_values[i];
        known[size_t(out_ids[i])] = &t;
      }
    }
    PlanMemo::Entry key;
    const bool keyed = pm && !hit && memo_key(in_ids, ix, *plan, known, is_value_input, key);
    if (keyed) {
      for (int id : out_ids) key.out_sizes.push_back(plan->sizes[size_t(id)]);
    }
    if (hit || !shape_node) {
      if (keyed) memo_store(pm->entries, std::move(key));
      continue;
    }
    // A shape node: run it now, on the values it reads (a Shape node reads only sizes).
    std::vector<Tensor> in;
    for (int id : in_ids) {
      if (const Tensor* t = known[size_t(id)]) {
        in.push_back(*t);
      } else {
        UBF_CHECK(reads_only_sizes(*n), n->describe() + " is a shape node but input '" +
                                            ix.value[size_t(id)]->name + "' has no value");
        in.push_back(Tensor::view(ix.value[size_t(id)]->dtype, plan->sizes[size_t(id)], nullptr));
      }
    }
    std::vector<Tensor> out;
    for (int id : out_ids) out.emplace_back(ix.value[size_t(id)]->dtype, plan->sizes[size_t(id)]);
    spec.run_shape_node(*n, in, out);
    for (size_t i = 0; i < out.size(); i++) {
      Tensor& t = plan->values[n->outputs[i]] = out[i];
      known[size_t(out_ids[i])] = &t;
    }
    if (keyed) {
      key.out_values = std::move(out);
      memo_store(pm->entries, std::move(key));
    }
  }
  // Kernels whose inputs are all known now run once, here (PlanSpec::run_step).
  std::vector<char> precomputed(ix.step_in.size(), 0);
  if (spec.run_step) {
    UBF_CHECK(spec.step_pure.size() == ix.step_in.size(), "step_pure has a flag per kernel");
    int64_t budget = PlanSpec::kPrecomputeBytes;
    for (size_t k = 0; k < ix.step_in.size(); k++) {
      bool ok = spec.step_pure[k] && !ix.step_out[k].empty();
      for (int id : ix.step_in[k]) ok = ok && known[size_t(ix.storage[size_t(id)])];
      int64_t bytes = 0;
      for (int id : ix.step_out[k]) {
        ok = ok && ix.output_of[size_t(id)] < 0 && ix.storage[size_t(id)] == id;
        bytes += numel(plan->sizes[size_t(id)]) * int64_t(dtype_size(ix.value[size_t(id)]->dtype));
      }
      if (!ok || bytes > budget) continue;
      budget -= bytes;
      std::vector<Tensor> in, out;
      for (int id : ix.step_in[k]) {
        const Tensor* t = known[size_t(ix.storage[size_t(id)])];
        const Sizes& s = plan->sizes[size_t(id)];
        in.push_back(t->sizes() == s ? *t
                                     : Tensor::view(ix.value[size_t(id)]->dtype, s, t->data()));
      }
      for (int id : ix.step_out[k])
        out.emplace_back(ix.value[size_t(id)]->dtype, plan->sizes[size_t(id)]);
      spec.run_step(k, in, out);
      for (size_t i = 0; i < out.size(); i++) {
        const int id = ix.step_out[k][i];
        Tensor& t = plan->values[ix.value[size_t(id)]] = std::move(out[i]);
        known[size_t(id)] = &t;
      }
      precomputed[k] = 1;
    }
  }
  // Live ranges of intermediates over kernel indices.
  struct Buf {
    int id;
    int64_t bytes;
    int first, last;
  };
  std::vector<Buf> bufs;
  std::vector<int> buf_of(nv, -1);
  for (int k = 0; k < int(ix.step_in.size()); k++) {
    if (precomputed[size_t(k)]) continue;
    for (int id : ix.step_out[size_t(k)]) {
      if (ix.output_of[size_t(id)] >= 0) continue;
      const Value* v = ix.value[size_t(id)];
      int64_t bytes = align_up(numel(plan->sizes[size_t(id)]) * int64_t(dtype_size(v->dtype)));
      buf_of[size_t(id)] = int(bufs.size());
      bufs.push_back({id, bytes, k, k});
    }
    for (int id : ix.step_in[size_t(k)]) {
      const int bi = buf_of[size_t(ix.storage[size_t(id)])];  // a view keeps its storage alive
      if (bi >= 0) bufs[size_t(bi)].last = k;
    }
  }
  // Place biggest first into the lowest offset that does not overlap a live, placed buffer.
  std::vector<size_t> order(bufs.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return bufs[a].bytes > bufs[c].bytes; });
  std::vector<int64_t> offset(nv, -1);
  std::vector<std::pair<int64_t, size_t>> placed;  // offset, buf index
  std::vector<std::pair<int64_t, int64_t>> busy;
  placed.reserve(bufs.size());
  for (size_t i : order) {
    const Buf& bi = bufs[i];
    plan->naive_bytes += bi.bytes;
    busy.clear();
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
    offset[size_t(bi.id)] = off;
    plan->arena_bytes = std::max(plan->arena_bytes, off + bi.bytes);
  }
  int64_t total = plan->arena_bytes;
  for (int id : ix.outputs) {
    total += numel(plan->sizes[size_t(id)]) * int64_t(dtype_size(ix.value[size_t(id)]->dtype));
  }
  if (spec.memory_limit > 0 && total > spec.memory_limit) {
    throw Error("planned memory " + std::to_string(total) + " bytes (intermediates " +
                std::to_string(plan->arena_bytes) + " + outputs) exceeds memory_limit " +
                std::to_string(spec.memory_limit) + " bytes" +
                (b.empty() ? std::string() : " for this shape") +
                "; hint: raise memory_limit or use smaller shapes");
  }
  bind_operands(*sp, ix, offset, precomputed, *plan);
  return plan;
}

}  // namespace ubfuse
