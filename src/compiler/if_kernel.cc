#include "compiler/if_kernel.h"

#include "ubfuse/error.h"

namespace ubfuse {

namespace {

class IfKernel : public Kernel {
 public:
  struct Branch {
    CompiledModel model;
    std::vector<int64_t> input_of;  // branch input j reads If input input_of[j]
    std::vector<std::string> input_names, output_names;
  };

  IfKernel(std::string who, Branch then_b, Branch else_b)
      : who_(std::move(who)), branches_{std::move(then_b), std::move(else_b)} {}

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ExecContext& ctx) const override {
    UBF_CHECK(!in.empty() && in[0].numel() == 1, who_ + ": the condition must have one element");
    const Branch& b = branches_[in[0].get(0) != 0 ? 0 : 1];
    std::map<std::string, Tensor> inputs, outputs;
    for (size_t j = 0; j < b.input_of.size(); j++) {
      inputs[b.input_names[j]] = in.at(size_t(b.input_of[j]));
    }
    UBF_CHECK(out.size() == b.output_names.size(), who_ + ": output count differs from branch");
    for (size_t k = 0; k < out.size(); k++) outputs[b.output_names[k]] = out[k];
    // An empty output has no buffer: run_into allocates one for it, and there is nothing to copy.
    b.model.run_into(inputs, outputs);
    ctx.variant_used = &b == &branches_[0] ? "then" : "else";
  }

 private:
  std::string who_;
  Branch branches_[2];
};

}  // namespace

std::unique_ptr<Kernel> make_if_kernel(const Node& n, const Options& options,
                                       const CompileProgressFn& on_progress) {
  if (n.op != OpKind::If) return nullptr;
  Options branch_options;
  for (auto& [k, v] : options) {
    if (k == "ge.dynamic_dims" || k == "ge.dynamicDims" || k == "ge.inputShape" ||
        k == "ge.dynamic_dims_strict" || k == "dynamic_dims_strict") {
      continue;
    }
    branch_options[k] = v;
  }
  IfKernel::Branch b[2];
  for (size_t i = 0; i < 2; i++) {
    const Graph& g = *n.branches.at(i);
    try {
      b[i].model = compile(g, branch_options, on_progress);
    } catch (const Error& e) {
      throw Error(n.describe() + ": compiling its " + (i == 0 ? "then" : "else") +
                  " branch: " + e.what());
    }
    b[i].input_of = n.attr_ints(i == 0 ? "then_inputs" : "else_inputs");
    for (const Value* v : g.inputs()) b[i].input_names.push_back(v->name);
    for (auto& [name, v] : g.outputs()) b[i].output_names.push_back(name);
  }
  auto k = std::make_unique<IfKernel>(n.describe(), std::move(b[0]), std::move(b[1]));
  k->info.variant = "if";
  return k;
}

}  // namespace ubfuse
