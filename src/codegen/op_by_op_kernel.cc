#include "codegen/op_by_op_kernel.h"

#include <unordered_map>

#include "kernels/cpu/node_kernel.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

class OpByOpKernel : public Kernel {
 public:
  explicit OpByOpKernel(const FusedGroup& g) {
    for (const Node* n : g.nodes) steps_.push_back({n, make_node_kernel(*n)});
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ExecContext& ctx) const override {
    std::unordered_map<const Value*, Tensor> vals;
    for (size_t i = 0; i < inputs.size(); i++) vals[inputs[i]] = in[i];
    for (size_t i = 0; i < outputs.size(); i++) vals[outputs[i]] = out[i];
    std::vector<Tensor> a, b;
    for (auto& [n, k] : steps_) {
      a.clear();
      b.clear();
      for (const Value* v : n->inputs) a.push_back(value(v, vals));
      // Concrete output sizes: re-infer the node on its inputs' concrete shapes.
      Node copy;
      copy.op = n->op;
      copy.name = n->name;
      copy.attrs = n->attrs;
      std::vector<Value> ins(n->inputs.size()), outs(n->outputs.size());
      for (size_t i = 0; i < ins.size(); i++) {
        ins[i].dtype = a[i].dtype();
        ins[i].shape = to_shape(a[i].sizes());
        copy.inputs.push_back(&ins[i]);
      }
      for (auto& o : outs) copy.outputs.push_back(&o);
      infer_node(copy);
      for (size_t i = 0; i < n->outputs.size(); i++) {
        auto it = vals.find(n->outputs[i]);
        if (it == vals.end()) {
          it =
              vals.emplace(n->outputs[i], Tensor(outs[i].dtype, static_sizes(outs[i].shape))).first;
        }
        b.push_back(it->second);
      }
      k->run(a, b, ctx);
    }
  }

 private:
  static Tensor value(const Value* v, const std::unordered_map<const Value*, Tensor>& vals) {
    auto it = vals.find(v);
    if (it != vals.end()) return it->second;
    UBF_CHECK(v->producer && v->producer->op == OpKind::Constant,
              "op-by-op group: value '" + v->name + "' has no tensor");
    return v->producer->payload;
  }

  std::vector<std::pair<const Node*, std::unique_ptr<Kernel>>> steps_;
};

}  // namespace

std::unique_ptr<Kernel> make_op_by_op_kernel(const FusedGroup& g, const std::string& why) {
  auto k = std::make_unique<OpByOpKernel>(g);
  k->info.variant = "op-by-op (" + why + ")";
  return k;
}

}  // namespace ubfuse
