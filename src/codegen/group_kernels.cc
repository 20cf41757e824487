// FusedGroup -> Kernel. Single groups run their eager kernel; the others are lowered to the
// kernel IR (codegen/kernel_ir.h) and run as generated C++ (distinct kernels spread over a few
// translation units compiled in parallel, each cached on disk) or by the tile interpreter
// (codegen=interpreter, or no compiler). A group the IR cannot express runs op by op, and its
// variant says why.
#include "codegen/group_kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "codegen/attention_kernel.h"
#include "codegen/cpp_compile.h"
#include "codegen/cpp_render.h"
#include "codegen/fused_kernel.h"
#include "codegen/matmul_epilogue.h"
#include "codegen/op_by_op_kernel.h"
#include "kernels/cpu/node_kernel.h"
#include "util/env.h"

namespace ubfuse {

int64_t ub_bytes_per_row(const FusedGroup& g, int64_t cols) {
  if (g.kind == GroupKind::Single || g.kind == GroupKind::Attention) return 0;
  auto prog = kir::lower_group(g, nullptr);
  if (!prog) return 0;
  kir::Schedule s = kir::schedule(*prog, /*ub=*/true);
  return int64_t(s.num_slots) * kir::slot_floats(cols) * int64_t(sizeof(float));
}

namespace {

void fill_info(const FusedGroup& g, Kernel& k) {
  k.info.name = g.name;
  k.info.node_names.clear();
  k.info.op_types.clear();
  for (const Node* n : g.nodes) {
    k.info.node_names.push_back(n->name);
    k.info.op_types.push_back(std::string(op_name(n->op)));
  }
  k.inputs = g.inputs;
  k.outputs = g.outputs;
  k.info.input_values.clear();
  k.info.output_values.clear();
  for (const Value* v : g.inputs) k.info.input_values.push_back(v->name);
  for (const Value* v : g.outputs) k.info.output_values.push_back(v->name);
}

// Says once per process why generated code is not used.
void note_no_compiler(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "[ubfuse] note: %s; fused groups run on the tile interpreter (slower). Option "
                 "codegen=interpreter asks for it explicitly.\n",
                 why.c_str());
  });
}

struct Pending {
  const FusedGroup* group = nullptr;
  LoweredGroup lowered;
  std::string symbol;  // generated function, when compiled
};

// Spreads the distinct kernels over up to `jobs` units of about equal source size (largest first
// onto the smallest unit), so parallel compilers finish together. Each unit costs about 0.5 s of
// compiler time of its own (the shared Highway code it instantiates again; a 227 KB unit took 2.0 s
// alone, its two halves 1.3 + 1.7 s), so a unit gets at least kMinUnitBytes of source (about a
// second of compiling) and there are never more units than jobs. The split depends only on the
// kernels and `jobs`, so the same model finds its units in the cache again.
constexpr size_t kMinUnitBytes = 96 << 10;

std::vector<cpp::UnitSource> split_units(std::vector<cpp::RenderedKernel> kernels,
                                         const std::map<std::string, std::string>& names, int jobs,
                                         std::map<std::string, size_t>* unit_of) {
  std::sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) {
    return a.code.size() != b.code.size() ? a.code.size() > b.code.size() : a.symbol < b.symbol;
  });
  size_t total = 0;
  for (auto& k : kernels) total += k.code.size();
  const size_t n = std::max<size_t>(
      1, std::min({kernels.size(), size_t(std::max(1, jobs)), total / kMinUnitBytes}));
  std::vector<std::vector<cpp::RenderedKernel>> parts(n);
  std::vector<size_t> bytes(n, 0);
  for (auto& k : kernels) {
    size_t u = size_t(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
    bytes[u] += k.code.size();
    (*unit_of)[k.symbol] = u;
    parts[u].push_back(std::move(k));
  }
  std::vector<cpp::UnitSource> units;
  for (auto& part : parts) {
    std::string what;
    for (auto& k : part) {
      const std::string& g = names.at(k.symbol);
      if (what.size() < 200 && what.find(g) == std::string::npos) {
        what += (what.empty() ? "" : ", ") + g;
      }
    }
    what = std::to_string(part.size()) + " fused group(s) (" + what + ")";
    units.push_back({cpp::render_unit(part), what, int(part.size())});
  }
  return units;
}

}  // namespace

std::vector<std::unique_ptr<Kernel>> make_group_kernels(const std::vector<FusedGroup>& groups,
                                                        const CodegenConfig& config) {
  bool cpp = config.engine == "cpp";
  std::string engine_note;
  if (cpp && !cpp::toolchain().available) {
    note_no_compiler(cpp::toolchain().why_not);
    engine_note = " (" + cpp::toolchain().why_not + ")";
    cpp = false;
  }
  // Lower everything first, then compile the distinct generated functions together.
  std::vector<std::unique_ptr<Kernel>> out(groups.size());
  std::vector<Pending> pending;
  std::vector<cpp::RenderedKernel> rendered;  // distinct symbols
  std::map<std::string, std::string> names;   // symbol -> the first group that uses it
  for (size_t i = 0; i < groups.size(); i++) {
    const FusedGroup& g = groups[i];
    if (g.kind == GroupKind::Single) {
      out[i] = make_node_kernel(*g.nodes.at(0), config.own_kernel);
      continue;
    }
    if (g.kind == GroupKind::Attention) {
      out[i] = make_attention_kernel(g);
      fill_info(g, *out[i]);
      out[i]->info.variant = "flash attention";
      continue;
    }
    std::string why;
    std::shared_ptr<const kir::Program> prog = kir::lower_group(g, &why);
    if (!prog) {
      out[i] = make_op_by_op_kernel(g, why);
      fill_info(g, *out[i]);
      continue;
    }
    Pending p;
    p.group = &g;
    p.lowered.prog = prog;
    p.lowered.ub = kir::schedule(*prog, true);
    p.lowered.reread = kir::schedule(*prog, false);
    p.lowered.force_reread = g.reread;
    p.lowered.compute_bound = kir::has_expensive_column_op(*prog);
    p.lowered.reads = row_reads(*prog);
    if (env_on("UBFUSE_DUMP_KERNELS")) {
      std::fprintf(stderr, "[ubfuse] kernel IR of %s:\n%s%s%s", g.name.c_str(),
                   kir::to_string(*prog).c_str(), kir::to_string(*prog, p.lowered.ub).c_str(),
                   kir::to_string(*prog, p.lowered.reread).c_str());
    }
    if (cpp) {
      p.lowered.pipelined = cpp::has_pipelined_variant(p.lowered.ub);
      cpp::RenderedKernel r = cpp::render_kernel(*prog, p.lowered.ub, p.lowered.reread);
      p.symbol = r.symbol;
      if (names.emplace(r.symbol, g.name).second) rendered.push_back(std::move(r));
    }
    pending.push_back(std::move(p));
  }
  std::map<std::string, std::shared_ptr<void>> lib_of;  // symbol -> its unit's library
  if (!rendered.empty()) {
    std::map<std::string, size_t> unit_of;
    std::vector<cpp::UnitSource> units = split_units(rendered, names, config.jobs, &unit_of);
    std::vector<std::shared_ptr<void>> libs =
        cpp::build_libraries(units, config.cache_dir, config.jobs, config.progress, config.report);
    for (auto& [symbol, u] : unit_of) lib_of[symbol] = libs.at(u);
  }
  size_t next = 0;
  for (size_t i = 0; i < groups.size(); i++) {
    if (out[i]) continue;
    Pending& p = pending[next++];
    const FusedGroup& g = *p.group;
    Engine eng;
    std::shared_ptr<void> lib = p.symbol.empty() ? nullptr : lib_of.at(p.symbol);
    if (lib) {
      eng.fn = reinterpret_cast<UbfKernelFn>(cpp::library_symbol(lib, p.symbol));
      eng.library = lib;
    } else {
      eng.tiles = interp::make_tile_program(*p.lowered.prog, p.lowered.ub, p.lowered.reread);
    }
    if (g.kind == GroupKind::MatMulEpilogue) {
      out[i] = make_matmul_epilogue_kernel(g, std::move(p.lowered), std::move(eng));
    } else {
      out[i] = std::make_unique<FusedKernel>(std::move(p.lowered), std::move(eng));
    }
    fill_info(g, *out[i]);
    out[i]->info.variant = std::string(lib ? "codegen" : "interpreter") +
                           (g.reread ? "/two-pass" : "") + (lib ? "" : engine_note);
  }
  return out;
}

}  // namespace ubfuse
