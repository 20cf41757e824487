// quant_matmul: onnxruntime's dynamic-quantizer chain as one op, in graph mode.
//
//   (q, s, z) = DynamicQuantizeLinear(x)
//   i = MatMulInteger(q, W, z, w_zp?)          W a constant [K, N]
//   y = Mul(Cast(i, f32), Mul(s, w_scale))     w_scale a constant, one element or one per column
//
// becomes y = DynamicQuantMatMul(x, W, w_scale, w_zp?), bit-exact with the chain (the same
// quantization, integer sums and f32 products), which fusion then treats as a MatMul: the bias
// Add, activation or residual norm after it run as its epilogue, on each block of rows while it is
// in cache. Every intermediate must be read by the chain alone, but for the
// DynamicQuantizeLinear's outputs, which several chains may share (one per projection of x).
// Each chain taken or left is a decision that `explain` reports: the edges inside the new op as
// Fused, and for a chain left apart, why.
#include <unordered_map>

#include "passes/pass.h"
#include "passes/rewrite_util.h"

namespace ubfuse {

namespace {

using passes::producer_if;
using passes::UseInfo;

// The operand of binary node n other than the one `one` produces, or null when n reads no output
// of `one` (checked on both sides: Mul is commutative and exporters write either order).
Value* other_operand(const Node* n, const Node* one) {
  if (n->inputs.size() != 2) return nullptr;
  if (n->inputs[0]->producer == one) return n->inputs[1];
  if (n->inputs[1]->producer == one) return n->inputs[0];
  return nullptr;
}

class QuantMatMulPass : public Pass {
 public:
  explicit QuantMatMulPass(std::vector<FusionDecision>* notes) : notes_(notes) {}
  std::string name() const override { return "quant_matmul"; }

  bool run(Graph& g) override {
    bool changed = false;
    row_range_.clear();
    UseInfo uses(g);
    for (Node* mmi : g.topo_order()) {
      const bool conv = mmi->op == OpKind::ConvInteger;
      if (mmi->op != OpKind::MatMulInteger && !conv) continue;
      Node* dql = producer_if(mmi->inputs[0], OpKind::DynamicQuantizeLinear);
      if (!dql) continue;  // not the dynamic quantizer's form
      const std::string op(op_name(mmi->op));
      const OpKind fused = conv ? OpKind::DynamicQuantConv : OpKind::DynamicQuantMatMul;
      std::string why;
      Node* root = match(g, mmi, dql, uses, why);
      if (!root) {
        note(FusionReason::NotFusible, dql->name, mmi->name,
             "the chain from DynamicQuantizeLinear '" + dql->name + "' through " + op + " '" +
                 mmi->name + "' stays op by op: " + why,
             "the quant_matmul pass takes DynamicQuantizeLinear -> MatMulInteger or ConvInteger "
             "(constant weights) -> Cast(f32) -> Mul(x_scale * w_scale) whose intermediates "
             "nothing else reads");
        continue;
      }
      // Names before the rewrite parks the root's.
      const std::vector<std::pair<std::string, std::string>> edges = chain_edges_;
      std::vector<Value*> ins = {dql->inputs[0], mmi->inputs[1], w_scale_};
      if (mmi->inputs.size() > 3) ins.push_back(mmi->inputs[3]);
      if (!conv) add_row_range(g, ins, mmi->inputs[1]);
      const std::string root_name = root->name;
      if (!passes::replace_node(g, root, fused, ins, conv ? mmi->attrs : Attrs{})) {
        note(FusionReason::NotFusible, dql->name, mmi->name,
             "the chain through " + op + " '" + mmi->name + "' does not infer as " +
                 std::string(op_name(fused)) + " (its shapes or dtypes differ)",
             "");
        continue;
      }
      for (auto& [p, c] : edges) {
        note(FusionReason::Fused, p, c,
             "'" + p + "' -> '" + c + "' is inside " + std::string(op_name(fused)) + " '" +
                 root_name +
                 "' (the quant_matmul pass: quantize, int8 product, rescale in one kernel)",
             "");
      }
      changed = true;
      uses.rebuild(g);
    }
    if (changed) g.remove_dead_nodes();
    return changed;
  }

 private:
  // The rescale Mul that ends the chain from mmi, or null with `why` set.
  Node* match(Graph& g, Node* mmi, Node* dql, const UseInfo& uses, std::string& why) {
    const bool conv = mmi->op == OpKind::ConvInteger;
    chain_edges_.clear();
    const Value* q = dql->outputs[0];
    const Value* s = dql->outputs[1];
    const Value* z = dql->outputs[2];
    if (mmi->inputs.size() < 3 || mmi->inputs[0] != q || mmi->inputs[2] != z) {
      why = "its A and a_zero_point are not the DynamicQuantizeLinear's y and zero point";
      return nullptr;
    }
    if (!chain_reads_only(uses, dql)) {
      why = "the quantized activation, its scale or its zero point is read elsewhere too";
      return nullptr;
    }
    if (dql->inputs[0]->shape.size() < 2) {
      why = "the activation is not a matrix";
      return nullptr;
    }
    const size_t w_rank = mmi->inputs[1]->shape.size();
    if (!passes::is_constant(mmi->inputs[1]) || (!conv && w_rank != 2)) {
      why =
          "its weights '" + mmi->inputs[1]->name + "' are not a constant" + (conv ? "" : " matrix");
      return nullptr;
    }
    if (mmi->inputs.size() > 3 && !passes::is_constant(mmi->inputs[3])) {
      why = "its b_zero_point is not a constant";
      return nullptr;
    }
    const std::vector<Node*>& after = uses.users(mmi->out());
    Node* cast = after.size() == 1 ? after[0] : nullptr;
    if (!cast || cast->op != OpKind::Cast || cast->out()->dtype != DType::f32 ||
        !uses.single_use(mmi->out())) {
      why = "its i32 result is not read by one Cast to f32 alone";
      return nullptr;
    }
    const std::vector<Node*>& rescale = uses.users(cast->out());
    Node* root = rescale.size() == 1 ? rescale[0] : nullptr;
    Value* factor = root && root->op == OpKind::Mul ? other_operand(root, cast) : nullptr;
    Node* scales = factor ? producer_if(factor, OpKind::Mul) : nullptr;
    Value* ws = scales ? other_operand(scales, dql) : nullptr;
    if (!factor || !uses.single_use(cast->out())) {
      why = "the Cast's result is not read by one Mul alone";
      return nullptr;
    }
    if (!ws || !uses.single_use(factor) || ws == s) {
      why = "the Mul's factor is not x_scale * w_scale read by it alone";
      return nullptr;
    }
    if (!passes::is_constant(ws) || ws->dtype != DType::f32) {
      why = "w_scale '" + ws->name + "' is not a constant f32";
      return nullptr;
    }
    if (conv) {
      if (!(w_scale_ = per_channel_scale(g, ws, mmi))) {
        why = "w_scale '" + ws->name + "' " + shape_str(ws->shape) +
              " is neither one element nor one per output channel of " +
              shape_str(mmi->out()->shape);
        return nullptr;
      }
    } else {
      const Dim& nd = mmi->inputs[1]->shape[1];
      const int64_t n = nd.is_static() ? nd.value() : -1;
      const bool per_column =
          ws->shape.size() >= 1 && ws->shape.back() == Dim(n) && numel_static(ws->shape) == n;
      if (!(numel_static(ws->shape) == 1 || per_column) || ws->shape.size() > 2) {
        why = "w_scale '" + ws->name + "' is not one element or one per column";
        return nullptr;
      }
      w_scale_ = ws;
    }
    chain_edges_ = {{dql->name, mmi->name},
                    {mmi->name, cast->name},
                    {cast->name, root->name},
                    {dql->name, scales->name},
                    {scales->name, root->name}};
    return root;
  }

  // True when the outputs of `dql` are read only as chains of this pass read them: q and z as a
  // MatMulInteger's or ConvInteger's operands 0 and 2, s by Muls (the scale products), none a
  // graph output. onnxruntime's quantizer writes one DynamicQuantizeLinear per activation, read
  // by every projection of it (q, k and v): each chain becomes its own op, which quantizes x
  // itself, and the DynamicQuantizeLinear goes once the last chain is taken.
  static bool chain_reads_only(const UseInfo& uses, const Node* dql) {
    for (size_t o = 0; o < 3; o++) {
      const Value* v = dql->outputs[o];
      if (uses.is_output(v)) return false;
      for (const Node* n : uses.users(v)) {
        if (o == 1) {
          if (n->op != OpKind::Mul) return false;
          continue;
        }
        if (n->op != OpKind::MatMulInteger && n->op != OpKind::ConvInteger) return false;
        for (size_t i = 0; i < n->inputs.size(); i++) {
          if (n->inputs[i] == v && i != (o == 0 ? 0u : 2u)) return false;
        }
      }
    }
    return true;
  }

  // A ConvInteger's scale factor as DynamicQuantConv takes it: itself when one element, else a
  // new [M] constant of the same values when its shape puts them along the output's channel axis
  // ([M, 1, ...] or [1, M, 1, ...] against [N, M, ...]); null otherwise.
  static Value* per_channel_scale(Graph& g, Value* ws, const Node* convi) {
    if (numel_static(ws->shape) == 1) return ws;
    const Shape& out = convi->out()->shape;
    const Shape& s = ws->shape;
    if (s.size() > out.size() || s.size() + 1 < out.size() || !out[1].is_static()) return nullptr;
    const size_t lead = out.size() - s.size();  // 0 or 1
    for (size_t i = 0; i < s.size(); i++) {
      const bool channel = i + lead == 1;
      if (!(s[i] == (channel ? out[1] : Dim(int64_t(1))))) return nullptr;
    }
    const Tensor& t = ws->producer->payload;
    Node* c = g.add_node(OpKind::Constant, {}, {}, g.unique_name(ws->name + ".per_channel"));
    c->payload = t.reshaped({out[1].value()});
    infer_node(*c);
    return c->out();
  }

  // Where x comes from a kernel that fusion can give row reductions (an elementwise op, a norm, a
  // MatMul's epilogue), x's rows' maxima of x and -x join the op's inputs: that kernel computes
  // them while each row is in its UB, and the op's quantization reads x once instead of twice.
  // An f32 x only; a w_zero_point of 0 is added where the chain had none (inputs are positional).
  // One pair of reductions per x: the projections that share it (q, k, v) share them.
  void add_row_range(Graph& g, std::vector<Value*>& ins, const Value* w) {
    Value* x = ins[0];
    const Node* p = x->producer;
    const FusionClass fc = p ? fusion_class(p->op) : FusionClass::Opaque;
    const bool fusible = p && (fc == FusionClass::Elementwise || fc == FusionClass::Broadcast ||
                               fc == FusionClass::RowReduction || p->op == OpKind::MatMul ||
                               p->op == OpKind::DynamicQuantMatMul);
    if (!fusible || x->dtype != DType::f32) return;
    if (ins.size() == 3) {
      Node* z = g.add_node(OpKind::Constant, {}, {}, g.unique_name(w->name + ".zero_point"));
      z->payload = Tensor::zeros(w->dtype, {});
      infer_node(*z);
      ins.push_back(z->out());
    }
    auto [it, fresh] = row_range_.try_emplace(x);
    if (fresh) {
      Node* mx = g.add_node(OpKind::ReduceMax, {x}, {{"keepdims", int64_t(1)}},
                            g.unique_name(x->name + ".row_max"));
      infer_node(*mx);
      Node* neg = g.add_node(OpKind::Neg, {x}, {}, g.unique_name(x->name + ".neg"));
      infer_node(*neg);
      Node* nmx = g.add_node(OpKind::ReduceMax, {neg->out()}, {{"keepdims", int64_t(1)}},
                             g.unique_name(x->name + ".row_neg_max"));
      infer_node(*nmx);
      it->second = {mx->out(), nmx->out()};
    }
    ins.push_back(it->second.first);
    ins.push_back(it->second.second);
  }

  static int64_t numel_static(const Shape& s) { return is_static(s) ? numel(static_sizes(s)) : -1; }

  void note(FusionReason r, std::string p, std::string c, std::string msg, std::string hint) {
    if (notes_) notes_->push_back({r, std::move(p), std::move(c), std::move(msg), std::move(hint)});
  }

  std::vector<FusionDecision>* notes_;
  std::unordered_map<const Value*, std::pair<Value*, Value*>> row_range_;  // x -> its row maxima
  Value* w_scale_ = nullptr;
  std::vector<std::pair<std::string, std::string>> chain_edges_;
};

}  // namespace

std::unique_ptr<Pass> make_quant_matmul_pass(std::vector<FusionDecision>* notes) {
  return std::make_unique<QuantMatMulPass>(notes);
}

}  // namespace ubfuse
