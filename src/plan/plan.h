// Run-time plans: the concrete sizes of every value for one binding of the symbols, checked by
// re-running shape inference on concrete shapes, and where each kernel's operands live: a graph
// input or output buffer, a constant, a value the plan holds, or an offset in one arena that
// intermediates share (greedy best-fit over each buffer's live range [first write, last read] in
// kernel order). A plan is built once per binding and read by every run with that binding.
//
// Shape values: where a shape depends on the values of a small integer tensor (a Reshape's
// target, Slice bounds, a Range's limit), the nodes that compute it are shape nodes: the plan
// runs them while it is built, in graph order, each as soon as its inputs are known, and keeps
// their results. Their inputs are constants, other shape values, sizes (Shape), or graph inputs
// whose contents the caller passes (value inputs, part of the plan's key). Dims that depend on
// such values are symbols the compiler made up ("$node.out.dim"); shape inference on concrete
// sizes and values binds them here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ubfuse/graph.h"
#include "ubfuse/tensor.h"

namespace ubfuse {

// Where one operand's bytes live during a run.
struct BufferRef {
  enum class Kind : uint8_t { Input, Output, Constant, Arena };
  Kind kind = Kind::Arena;
  int index = -1;                    // Input: graph input; Output: graph output
  int64_t offset = 0;                // Arena: byte offset
  const Tensor* constant = nullptr;  // Constant: the node's payload
  DType dtype = DType::f32;
  // The operand's own sizes (a view's differ from its storage's): an entry of its plan's sizes.
  const Sizes* sizes = nullptr;
};

// What a plan is built over: the graph, the operands of its kernels in launch order, and the
// values that are views of another value's bytes (Reshapes that run without a kernel).
struct PlanSpec {
  const Graph* graph = nullptr;
  struct Step {
    std::vector<const Value*> inputs, outputs;
  };
  std::vector<Step> steps;
  const std::unordered_map<const Value*, const Value*>* view_of = nullptr;
  int64_t memory_limit = 0;  // bytes of intermediates + outputs; 0: none
  // Nodes the plan runs while it is built (shape values), and how: the executor runs the node's
  // kernel on inputs of concrete sizes (a Shape node's input has sizes but no data), into
  // outputs the plan allocated.
  std::unordered_set<const Node*> shape_nodes;
  std::function<void(const Node&, const std::vector<Tensor>& in, std::vector<Tensor>& out)>
      run_shape_node;
  // Kernels whose inputs are all known to the plan (constants, shape values, the outputs of
  // kernels run so) run once while it is built, and its runs skip them: a decoder's positions,
  // rotary cos/sin and causal mask depend only on the lengths. run_step runs kernel k on such
  // inputs; step_pure[k] says whether kernel k may run so (a Host callback may not). Unset: none
  // runs. A plan keeps at most kPrecomputeBytes of their outputs (a long prompt's causal mask
  // runs per call instead).
  std::function<void(size_t k, const std::vector<Tensor>& in, std::vector<Tensor>& out)> run_step;
  std::vector<char> step_pure;
  static constexpr int64_t kPrecomputeBytes = 256 << 10;

  // The graph's nodes in topological order; computed by build_plan when empty.
  std::vector<const Node*> order;
  // Its values numbered (index_plan_spec); computed by build_plan when null.
  std::shared_ptr<const struct PlanIndex> index;

  // The value whose buffer holds v's bytes: v itself unless v is a view (of a view...).
  const Value* storage_of(const Value* v) const;
};

// A spec's operands and node edges as value ids (Value::id, dense in a graph), so that building
// a plan indexes arrays instead of hashing pointers: a decode step builds one per new length.
struct PlanIndex {
  std::vector<const Value*> value;      // by id; null for ids the graph no longer uses
  std::vector<int> storage;             // by id: the id holding its bytes (PlanSpec::storage_of)
  std::vector<const Tensor*> constant;  // by id: a Constant node's payload, else null
  std::vector<int> output_of;           // by id: the first graph output it is, else -1
  std::vector<std::vector<char>> lone;  // by id, per declared dim: a lone symbol ("seq")
  std::vector<std::vector<int>> node_in, node_out;  // by position in PlanSpec::order
  std::vector<std::vector<int>> step_in, step_out;  // by kernel
  std::vector<int> inputs, outputs;                 // graph inputs, graph outputs
};
// Numbers spec's values; spec.order must be set. Executors call it once per spec.
std::shared_ptr<const PlanIndex> index_plan_spec(const PlanSpec& spec);

// A node's copy over stand-in input values, on which a plan runs shape inference with concrete
// sizes (plan.cc); made once per node, refilled per plan.
struct InferScratch {
  bool ready = false;
  Node node;
  std::vector<Value> ins, outs;
  std::vector<Node> consts;  // Constant producers of the inputs whose contents the plan knows
};

// What planning learned about each node on concrete inputs: its output sizes and, for a shape
// node, its output values. A node's inference is a function of its input sizes and of the
// contents of the inputs the plan knows (shape values, value inputs; constants never change), so
// a later plan whose node sees the same reuses it: a decode step's new past length re-infers
// only the nodes that see the past. Shared by the plans of one model (build_plan locks it);
// indexed like PlanSpec::order, so used only with a spec whose order and index are set.
class PlanMemo {
 public:
  struct Entry {
    std::vector<Sizes> in_sizes;
    std::vector<bool> in_known;     // per input: whether the plan knew its contents
    std::vector<Tensor> in_values;  // those contents (constants excepted: they never change)
    std::vector<Sizes> out_sizes;
    std::vector<Tensor> out_values;  // a shape node's results
  };
  // Entries kept per node, the most recently used first.
  static constexpr size_t kPerNode = 4;
  // Known inputs larger than this are not compared (the node is inferred afresh instead).
  static constexpr int64_t kMaxKeyBytes = 4096;
  // A node that missed this many plans in a row (it sees a size that changes every time, like a
  // decoder's past length) is inferred without the memo, and tried again every kRetry plans.
  static constexpr uint32_t kGiveUp = 8, kRetry = 64;

  struct PerNode {
    std::vector<Entry> entries;
    InferScratch scratch;
    uint32_t misses_in_a_row = 0, skipped = 0;
  };
  std::mutex mu;
  std::vector<PerNode> nodes;
  int64_t reused = 0, inferred = 0;  // nodes, over every plan built with this memo
};

struct Plan {
  SymbolBindings symbols;  // the input sizes' symbols and those bound while planning
  std::shared_ptr<const PlanIndex> index;
  std::vector<Sizes> sizes;  // by value id (index->value)
  // Shape values and the outputs of precomputed kernels, owned by the plan.
  std::unordered_map<const Value*, Tensor> values;
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;  // what the intermediates would take without reuse
  // Per step, its operands in the order the kernel takes them.
  struct Operands {
    std::vector<BufferRef> inputs, outputs;  // empty when precomputed
    bool precomputed = false;                // run while the plan was built (PlanSpec::run_step)
  };
  std::vector<Operands> steps;
  std::vector<Sizes> output_sizes;  // per graph output
  // Graph outputs that no kernel writes (a graph input or constant returned as it is, or one
  // value returned under two names): copied from `from` after the kernels ran.
  struct Copy {
    BufferRef from;
    int output = -1;
  };
  std::vector<Copy> output_copies;

  // v's sizes in this plan; null for a value the plan does not size.
  const Sizes* find_sizes(const Value* v) const;
};

// `value_inputs`: the contents of the graph inputs that shape nodes read. Throws Error when a
// binding or a value breaks an op's shape rules, or the plan exceeds the memory limit.
std::shared_ptr<const Plan> build_plan(const PlanSpec& spec, const SymbolBindings& b,
                                       const std::map<const Value*, Tensor>& value_inputs = {},
                                       PlanMemo* memo = nullptr);

}  // namespace ubfuse
