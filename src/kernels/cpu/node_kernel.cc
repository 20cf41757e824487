#include "kernels/cpu/node_kernel.h"

#include <cstring>

#include "kernels/cpu/op_kernel.h"

namespace ubfuse {

namespace {

class OpKernelAdapter : public Kernel {
 public:
  explicit OpKernelAdapter(std::unique_ptr<cpu::OpKernel> k) : k_(std::move(k)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ExecContext& ctx) const override {
    if (ctx.in_storage) {
      k_->run_pitched(in, *ctx.in_storage, out, *ctx.pool);
    } else {
      k_->run(in, out, *ctx.pool);
    }
  }
  bool reads_pitched(size_t i, int axis, int rank) const override {
    return k_->reads_pitched(i, axis, rank);
  }

 private:
  std::unique_ptr<cpu::OpKernel> k_;
};

// A Host node: copy the tensor out of the compute stream, hand it to the user's callback.
class HostKernel : public Kernel {
 public:
  explicit HostKernel(HostFn fn) : fn_(std::move(fn)) {}
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out, ExecContext&) const override {
    if (in[0].nbytes()) std::memcpy(out[0].data(), in[0].data(), in[0].nbytes());
    fn_(out[0]);
  }

 private:
  HostFn fn_;
};

}  // namespace

std::unique_ptr<Kernel> make_node_kernel(const Node& n, const OwnKernelFn& own) {
  std::unique_ptr<Kernel> k;
  if (own) k = own(n);
  if (k) {
  } else if (n.op == OpKind::Host) {
    k = std::make_unique<HostKernel>(n.host);
    k->info.host = true;
  } else {
    k = std::make_unique<OpKernelAdapter>(cpu::make_op_kernel(n));
  }
  k->info.name = std::string(op_name(n.op));
  k->info.node_names = {n.name};
  k->info.op_types = {std::string(op_name(n.op))};
  if (k->info.variant.empty()) k->info.variant = n.op == OpKind::Host ? "host" : "eager";
  for (auto* v : n.inputs) {
    k->inputs.push_back(v);
    k->info.input_values.push_back(v->name);
  }
  for (auto* v : n.outputs) {
    k->outputs.push_back(v);
    k->info.output_values.push_back(v->name);
  }
  return k;
}

std::vector<std::unique_ptr<Kernel>> build_eager_kernels(
    const Graph& g, const std::function<bool(const Node&)>& planned, const OwnKernelFn& own) {
  std::vector<std::unique_ptr<Kernel>> out;
  for (Node* n : g.topo_order()) {
    if (n->op == OpKind::Constant || (planned && planned(*n))) continue;
    out.push_back(make_node_kernel(*n, own));
  }
  return out;
}

}  // namespace ubfuse
