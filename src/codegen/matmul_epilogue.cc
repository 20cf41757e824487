#include "codegen/matmul_epilogue.h"

#include <algorithm>

#include "ir/shape_util.h"
#include "kernels/cpu/dyn_quant_matmul.h"
#include "kernels/cpu/matmul_info.h"
#include "kernels/cpu/op_kernel.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

// Bytes of one block of the product: the option when set; else kRepackingBlockBytes for oneDNN
// kernels that copy B into their own panels on every call (each block costs a pass over the
// weights), kEpilogueBlockBytes for the others.
int64_t block_bytes(const cpu::MatMulCallInfo& mi, const ExecContext& ctx) {
  if (ctx.matmul_block_bytes > 0) return ctx.matmul_block_bytes;
  return mi.repacks_weights ? kRepackingBlockBytes : kEpilogueBlockBytes;
}

// [batch..., M, N] of A [..., M, K] times B [..., K, N] (both of rank >= 2: the partitioner
// puts row reductions only behind such MatMuls).
Sizes matmul_sizes(const Sizes& a, const Sizes& b) {
  UBF_CHECK(a.size() >= 2 && b.size() >= 2, "MatMul epilogue with a row reduction needs matrices");
  std::string why;
  auto batch = broadcast_shapes(to_shape(Sizes(a.begin(), a.end() - 2)),
                                to_shape(Sizes(b.begin(), b.end() - 2)), &why);
  UBF_CHECK(batch.has_value(), "MatMul epilogue operands' batch dims: " + why);
  Sizes d = static_sizes(*batch);
  d.push_back(a[a.size() - 2]);
  d.push_back(b.back());
  return d;
}

// The output sizes of Conv node n on inputs x and w (its attributes are complete: shape
// inference writes them back).
Sizes conv_sizes(const Node& n, const Sizes& x, const Sizes& w) {
  const auto st = n.attr_ints("strides"), dl = n.attr_ints("dilations"), pd = n.attr_ints("pads");
  const std::string ap = n.attr_str("auto_pad", "NOTSET");
  const size_t sp = x.size() - 2;
  Sizes out{x[0], w[0]};
  for (size_t i = 0; i < sp; i++) {
    out.push_back(conv_axis(x[2 + i], w[2 + i], st[i], dl[i], ap, pd[i], pd[sp + i]).out);
  }
  return out;
}

// `bytes` of the workspace's block scratch, grown as needed, from a 64-byte boundary (a vector's
// own data is 16-byte aligned; oneDNN's products write, and the epilogue reads, whole cache
// lines).
char* aligned_scratch(std::vector<char>& scratch, int64_t bytes) {
  if (scratch.size() < size_t(bytes) + 64) scratch.resize(size_t(bytes) + 64);
  const auto at = reinterpret_cast<uintptr_t>(scratch.data());
  return scratch.data() + ((64 - at % 64) % 64);
}

class MatMulEpilogueKernel : public Kernel {
 public:
  MatMulEpilogueKernel(const FusedGroup& g, LoweredGroup lg, Engine eng)
      : lg_(std::move(lg)), eng_(std::move(eng)) {
    for (const Node* n : g.nodes) {
      if (fusion::heads_epilogue(n)) mm_ = n;
    }
    UBF_CHECK(mm_ != nullptr, "MatMulEpilogue group " + g.name + " has no MatMul or Conv");
    matmul_ = cpu::make_op_kernel(*mm_);
    dq_ = dynamic_cast<const cpu::DynamicQuantMatMulKernel*>(matmul_.get());
    for (const Value* v : mm_->inputs) {
      const auto it = std::find(g.inputs.begin(), g.inputs.end(), v);
      UBF_CHECK(it != g.inputs.end(), "an operand of " + mm_->name + " is no input of " + g.name);
      operands_.push_back(int(it - g.inputs.begin()));
    }
    a_ = operands_[0];
    b_ = operands_[1];
    for (size_t i = 0; i < g.outputs.size(); i++) {
      if (g.outputs[i] == mm_->out()) mm_out_ = int(i);
    }
  }

  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out,
           ExecContext& ctx) const override {
    if (out.empty()) return;  // dead nodes (no DCE ran)
    const Tensor& A = in[size_t(a_)];
    const Tensor& B = in[size_t(b_)];
    const DType dt = mm_->out()->dtype;
    const bool conv = mm_->op == OpKind::Conv || mm_->op == OpKind::DynamicQuantConv;
    // The domain is the MatMul's output: every column output has its sizes.
    Sizes D;
    for (size_t o = 0; o < out.size() && D.empty(); o++) {
      if (!lg_.prog->exprs[size_t(lg_.prog->outputs[o].expr)].row) D = out[o].sizes();
    }
    // Only per-row outputs (a reduction of the product): the domain is the product's shape.
    if (D.empty())
      D = conv ? conv_sizes(*mm_, A.sizes(), B.sizes()) : matmul_sizes(A.sizes(), B.sizes());
    const int64_t esize = int64_t(dtype_size(dt));
    bool b_batched = B.rank() < 2;
    for (int i = 0; i + 2 < B.rank(); i++) b_batched = b_batched || B.sizes()[size_t(i)] != 1;
    // A Conv's output rows do not map onto rows of its input: it runs whole, then the epilogue.
    const bool blocked = !conv && A.rank() >= 2 && !b_batched && !D.empty();
    int64_t out_bytes = 0;
    for (auto& t : out) out_bytes += int64_t(t.nbytes());
    std::vector<Tensor> ins = in;
    std::vector<char> local;
    std::vector<char>& scratch = ctx.block_scratch ? *ctx.block_scratch : local;
    if (!blocked) {
      // The whole product: in the group's output when it is needed outside, else in the block
      // scratch the workspace keeps across runs.
      Tensor m;
      if (mm_out_ >= 0) {
        m = out[size_t(mm_out_)];
      } else {
        m = Tensor::view(dt, D, aligned_scratch(scratch, numel(D) * esize));
      }
      std::vector<Tensor> mo = {m};
      std::vector<Tensor> operands;
      for (int i : operands_) operands.push_back(in[size_t(i)]);
      matmul_->run(operands, mo, *ctx.pool);
      ins.push_back(m);
      RowArgs ra;
      make_row_args(*lg_.prog, lg_.reads, ins, out, ra);
      choose_variant(lg_, ra, ins, out_bytes, ctx);
      run_rows(eng_, ra, 0, ra.args.rows, ctx);
      return;
    }
    const int64_t K = A.dim(-1), N = D.back();
    const int64_t rows = N ? numel(D) / N : 0;
    if (rows == 0) return;
    // A DynamicQuantMatMul quantizes all of A first (its scale is over the whole tensor), then
    // makes each block from those rows.
    std::vector<Tensor> operands;
    cpu::DynamicQuantMatMulKernel::Quantized q;
    if (dq_) {
      for (int i : operands_) operands.push_back(in[size_t(i)]);
      dq_->quantize(operands, q, *ctx.pool);
    }
    const cpu::MatMulCallInfo mi =
        dq_ ? cpu::MatMulCallInfo{}
            : cpu::matmul_call_info(*matmul_, {rows, K}, B.sizes(), dt, ctx.pool->size());
    int64_t br = block_bytes(mi, ctx) / std::max<int64_t>(1, N * esize);
    br = std::min(rows, std::max<int64_t>(br / 16 * 16, kEpilogueMinBlockRows));
    // Where the blocks go: the group's output when the raw product is needed outside, else the
    // call's block scratch (kept by the workspace across runs: no page faults per call).
    char* base = nullptr;
    if (mm_out_ >= 0) {
      base = static_cast<char*>(out[size_t(mm_out_)].data());
    }
    char* block = base ? nullptr : aligned_scratch(scratch, br * N * esize);
    ins.push_back(Tensor::view(dt, D, base ? base : block));
    RowArgs ra;
    make_row_args(*lg_.prog, lg_.reads, ins, out, ra);
    choose_variant(lg_, ra, ins, out_bytes, ctx);
    const size_t blk = ra.in.size() - 1;
    const char* a_data = static_cast<const char*>(A.data());
    const int64_t a_es = int64_t(dtype_size(A.dtype()));
    bool per_part = false;
    for (int64_t r0 = 0; r0 < rows; r0 += br) {
      const int64_t r1 = std::min(rows, r0 + br);
      char* cblock = base ? base + r0 * N * esize : block;
      // Row r of the domain is row r - r0 of this block.
      ra.in[blk].data = cblock - r0 * N * esize;
      if (dq_) {
        dq_->rows(operands, q, r0, r1, reinterpret_cast<float*>(cblock), *ctx.pool);
      } else {
        Tensor av =
            Tensor::view(A.dtype(), {r1 - r0, K}, const_cast<char*>(a_data + r0 * K * a_es));
        Tensor cv = Tensor::view(dt, {r1 - r0, N}, cblock);
        // Where the product is split by rows over the pool, each part's thread runs the
        // epilogue on its rows while they are in its cache: no second pass over the pool.
        if (cpu::matmul_rows_then(*matmul_, av, B, cv, *ctx.pool, [&](int64_t b, int64_t e, int w) {
              run_rows_on(eng_, ra, r0 + b, r0 + e, w, ctx);
            })) {
          per_part = true;
          continue;
        }
        std::vector<Tensor> cvs = {cv};
        matmul_->run({av, B}, cvs, *ctx.pool);
      }
      run_rows(eng_, ra, r0, r1, ctx);
    }
    // What ran, for the trace: how the product was split, and by which oneDNN kernel.
    const int64_t blocks = (rows + br - 1) / br;
    const std::string impl =
        dq_ ? std::string(cpu::int8_product_impl())
        : blocks == 1
            ? mi.impl
            : cpu::matmul_call_info(*matmul_, {br, K}, B.sizes(), dt, ctx.pool->size()).impl;
    ctx.variant_used = (ctx.variant_used.empty() ? info.variant : ctx.variant_used) + ", " +
                       std::to_string(blocks) + (blocks == 1 ? " block of " : " blocks of ") +
                       std::to_string(br) + " rows, " + impl +
                       (per_part ? ", epilogue on each part's thread" : "");
  }

 private:
  LoweredGroup lg_;
  Engine eng_;
  const Node* mm_ = nullptr;
  std::unique_ptr<cpu::OpKernel> matmul_;              // the MatMul's (Conv's) eager kernel
  const cpu::DynamicQuantMatMulKernel* dq_ = nullptr;  // matmul_, when a DynamicQuantMatMul
  std::vector<int> operands_;                          // its inputs' indices among the group's
  int a_ = -1, b_ = -1, mm_out_ = -1;
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_epilogue_kernel(const FusedGroup& g, LoweredGroup lg,
                                                    Engine eng) {
  return std::make_unique<MatMulEpilogueKernel>(g, std::move(lg), std::move(eng));
}

}  // namespace ubfuse
