// Parsed compile options. Keys accept the GE names users already write and native aliases; see
// docs/options.md (generated from the same table as option_table()). Each stage reads its own
// part (run_config, fusion_config, codegen_config), so the stages below the compiler never
// see this struct.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/group_kernels.h"
#include "fusion/partition.h"
#include "runtime/executable.h"
#include "ubfuse/compile.h"

namespace ubfuse {

struct CompileConfig {
  bool fusion = true;              // ge.exec.enableOperatorFusion, fusion
  bool graph_optimizer = true;     // ge.common_graph_optimizer: simplify + canonicalize passes
  std::string rules_path;          // ge.fusion_optimizer_config_path, ge.fusionSwitchFile, rules
  int64_t ub_bytes = 0;            // 0: derived from the core's cache at compile time
  int num_threads = 0;             // 0: the global pool
  int64_t matmul_block_bytes = 0;  // MatMul epilogue block; 0: chosen from oneDNN's kernel
  std::string codegen = "cpp";     // cpp | interpreter
  std::string dynamic_dims;        // ge.dynamic_dims / ge.dynamicDims: "1,128;4,512"
  std::string input_shape;         // ge.inputShape: "x:-1,-1,4096;r:-1,-1,4096"
  bool dynamic_dims_strict = false;
  int64_t memory_limit = 0;  // bytes; 0: none
  std::string cache_dir;     // generated kernel cache; "" -> user_cache_dir()
  int compile_jobs = 0;      // compiler processes at once; 0: one per core
  std::string progress = "auto";  // auto (a line on a terminal) | on | off
  // calibrated | builtin | off (fusion/cost.h); "" -> $UBFUSE_COST_MODEL, else calibrated
  std::string cost_model;
  // Set by compile(), not by options: its caller's progress callback and where the kernel
  // build's final state goes.
  CompileProgressFn on_progress;
  CompileProgress* kernel_build = nullptr;
  // Loaded by compile() from rules_path (null: every rule on, no patterns).
  std::shared_ptr<const FusionRules> rules;
};

struct OptionSpec {
  std::string key;
  std::string values;  // what it accepts
  std::string help;
};
const std::vector<OptionSpec>& option_table();

// Throws Error naming the key, the value and the valid keys/values.
CompileConfig parse_options(const Options& opts);

// What each stage reads (ub_bytes already resolved: default_ub_bytes() when 0).
RunConfig run_config(const CompileConfig& c);
FusionConfig fusion_config(const CompileConfig& c);
CodegenConfig codegen_config(const CompileConfig& c);

// The default UB size: a share of the per-core L2 cache, clamped to [64 KiB, 1 MiB].
int64_t default_ub_bytes();

}  // namespace ubfuse
