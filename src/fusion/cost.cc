#include "fusion/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "ir/views.h"
#include "ubfuse/error.h"

namespace ubfuse {

namespace {

// d's size with every symbol at kSymbolSize (at least 1 where symbolic).
int64_t estimated_size(const Dim& d) {
  if (d.is_static()) return d.value();
  SymbolBindings b;
  for (const std::string& s : d.symbols()) b[s] = kSymbolSize;
  return std::max<int64_t>(1, eval_dim(d, b).value_or(kSymbolSize));
}

// Elements of v with every symbol at kSymbolSize.
double numel(const Value* v) {
  double n = 1;
  for (const Dim& d : v->shape) n *= double(estimated_size(d));
  return n;
}

double bytes_of(const Value* v) { return numel(v) * double(dtype_size(v->dtype)); }

// 2 * M * N * K of a MatMul-like node (its output's elements times the inner dim); 0 otherwise.
double matmul_flops(const Node* n) {
  if (n->op != OpKind::MatMul && n->op != OpKind::DynamicQuantMatMul) return 0;
  const Value* a = n->inputs.at(0);
  if (a->shape.empty()) return 0;
  Value k;
  k.shape = {a->shape.back()};
  return 2.0 * numel(n->out()) * numel(&k);
}

double kernel_seconds(double bytes, double flops, const CostParams& p) {
  return p.launch_s + std::max(bytes / p.bytes_per_s, flops / p.matmul_flops_per_s);
}

// Rate at key length `len`, between the two calibrated lengths in log(length), held beyond.
double at_length(const double (&rate)[2], const int64_t (&lens)[2], double len) {
  const double l0 = std::log(double(lens[0])), l1 = std::log(double(lens[1]));
  const double t = std::clamp((std::log(std::max(1.0, len)) - l0) / (l1 - l0), 0.0, 1.0);
  return rate[0] + t * (rate[1] - rate[0]);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string CostEstimate::str() const {
  const double us = seconds * 1e6;
  return fmt(us < 100 ? "%.1f us" : "%.0f us", us) + " (" + std::to_string(kernels) +
         (kernels == 1 ? " kernel, " : " kernels, ") + fmt("%.2f MB", bytes / 1e6) +
         (flops > 0 ? fmt(", %.2f GFLOP", flops / 1e9) : "") + ")";
}

std::string CostParams::summary() const {
  return fmt("%.1f GB/s", bytes_per_s / 1e9) + ", launch " + fmt("%.1f us", launch_s * 1e6) +
         ", MatMul " + fmt("%.0f GFLOP/s", matmul_flops_per_s / 1e9) + ", attention f32 at " +
         std::to_string(attention_lengths[0]) + "/" + std::to_string(attention_lengths[1]) +
         " keys " + fmt("%.0f", flash_flops_per_s[0][0] / 1e9) + "/" +
         fmt("%.0f", flash_flops_per_s[0][1] / 1e9) + " GFLOP/s as one kernel, " +
         fmt("%.0f", split_flops_per_s[0][0] / 1e9) + "/" +
         fmt("%.0f", split_flops_per_s[0][1] / 1e9) + " as MatMuls; bf16 " +
         fmt("%.0f", flash_flops_per_s[1][0] / 1e9) + "/" +
         fmt("%.0f", flash_flops_per_s[1][1] / 1e9) + " and " +
         fmt("%.0f", split_flops_per_s[1][0] / 1e9) + "/" +
         fmt("%.0f", split_flops_per_s[1][1] / 1e9) + " (" + source + ")";
}

CostEstimate estimate_parts(const Graph& g, const std::vector<const Node*>& nodes,
                            const CostParams& p) {
  CostEstimate e;
  for (const Node* n : nodes) {
    if (runs_as_view(g, *n)) continue;  // no kernel, no copy
    double bytes = 0;
    for (const Value* v : n->inputs) bytes += bytes_of(v);
    for (const Value* v : n->outputs) bytes += bytes_of(v);
    const double flops = matmul_flops(n);
    e.seconds += kernel_seconds(bytes, flops, p);
    e.bytes += bytes;
    e.flops += flops;
    e.kernels++;
  }
  return e;
}

CostEstimate estimate_fused(const Graph& graph, const FusedGroup& g, bool op_by_op,
                            const CostParams& p) {
  if (op_by_op) {
    // Its parts one after another, plus per member a shape inference and allocation (about a
    // launch) and each intermediate first touched per call.
    CostEstimate e = estimate_parts(graph, g.nodes, p);
    const std::set<const Value*> outs(g.outputs.begin(), g.outputs.end());
    for (const Node* n : g.nodes) {
      e.seconds += p.launch_s;
      for (const Value* v : n->outputs) {
        if (!outs.count(v)) e.seconds += bytes_of(v) / p.bytes_per_s;
      }
    }
    e.kernels = 1;
    return e;
  }
  CostEstimate e;
  // A row reduction's kernel takes a row at a time, a row narrower than kVectorValues in one
  // masked vector (and a horizontal reduction): its row-length inputs count as that wide.
  double narrow = 1;
  const Dim cols = g.domain.empty() ? Dim(int64_t(0)) : g.domain.back();
  if (g.kind == GroupKind::RowReduction && cols.is_static() && cols.value() > 0 &&
      cols.value() < kVectorValues) {
    narrow = double(kVectorValues) / double(cols.value());
  }
  for (const Value* v : g.inputs) {
    const bool row = !v->shape.empty() && v->shape.back() == cols;
    e.bytes += bytes_of(v) * (g.reread ? 2 : 1) * (row ? narrow : 1);
  }
  for (const Value* v : g.outputs) e.bytes += bytes_of(v);
  for (const Node* n : g.nodes) e.flops += matmul_flops(n);
  e.seconds = kernel_seconds(e.bytes, e.flops, p);
  e.kernels = 1;
  return e;
}

AttentionProbe attention_probe(const Node* scores, const Node* context) {
  auto size = [](const Dim& d) { return std::max<int64_t>(1, estimated_size(d)); };
  const Shape& sc = scores->out()->shape;  // [..., q_len, k_len]
  const Shape& q = scores->inputs.at(0)->shape;
  AttentionProbe p;
  p.dtype = context->out()->dtype;
  UBF_CHECK(sc.size() >= 2 && !q.empty(), "attention_probe: scores of rank < 2");
  for (size_t i = 0; i + 2 < sc.size(); i++) p.heads *= size(sc[i]);
  p.q_len = size(sc[sc.size() - 2]);
  p.k_len = size(sc.back());
  p.head_dim = size(q.back());
  return p;
}

std::string AttentionProbe::key() const {
  return std::string(dtype_name(dtype)) + " h" + std::to_string(heads) + " q" +
         std::to_string(q_len) + " k" + std::to_string(k_len) + " d" + std::to_string(head_dim);
}

CostEstimate estimate_attention(const Node* scores, const Node* context, bool flash,
                                const CostParams& p) {
  UBF_CHECK(scores->op == OpKind::MatMul && context->op == OpKind::MatMul,
            "estimate_attention: '" + scores->name + "' .. '" + context->name +
                "' is not a MatMul .. MatMul chain");
  CostEstimate e;
  e.flops = matmul_flops(scores) + matmul_flops(context);
  // The key length: the scores' last dim.
  const Dim& keys = scores->out()->shape.back();
  const double len = keys.is_static() ? double(keys.value()) : double(kSymbolSize);
  const int dt = context->out()->dtype == DType::bf16 ? 1 : 0;
  const double rate = at_length(flash ? p.flash_flops_per_s[dt] : p.split_flops_per_s[dt],
                                p.attention_lengths, len);
  e.kernels = flash ? 1 : 2;
  for (const Value* v : scores->inputs) e.bytes += bytes_of(v);
  e.bytes += bytes_of(context->inputs.at(1));  // V
  e.bytes += bytes_of(context->out());
  if (!flash) e.bytes += 2 * bytes_of(scores->out());  // the probabilities, written and read
  e.seconds = e.kernels * p.launch_s + std::max(e.flops / rate, e.bytes / p.bytes_per_s);
  return e;
}

}  // namespace ubfuse
