// Which loops write their large outputs (cpu::stream_min_bytes() and more) with non-temporal
// stores. A memory-bound loop always does: it skips the read-for-ownership that is a third of a
// streaming op's traffic. For a compute-bound loop (a transcendental or a divide per element) the
// answer depends on the core, by up to 40% either way at [8,2048,4096]: on a Zen 4 eager SiLU f32
// runs 1.40x faster with them, on a Zen 3 Softmax runs slower (docs/performance.md). So the choice
// is a table of the cores it was measured on, picked by CPUID, with a generic row per vector ISA
// for the others.
#pragma once

#include <cstddef>
#include <string>

#include "ubfuse/dtype.h"

namespace ubfuse::cpu {

// The compute-bound loops whose kind of store is chosen per core.
enum class ComputeLoop { kUnary, kSoftmax, kFused };
inline constexpr int kNumComputeLoops = 3;

struct StoreProfile {
  const char* name;         // what UBFUSE_STORE_PROFILE takes: "zen4"
  const char* description;  // which CPUs get it, and where it was measured
  // streams[loop][0]: the loop writes f32 and streams; [1]: bf16. f16 outputs store plainly on
  // every core measured: its conversion makes the loop slower still.
  bool streams[kNumComputeLoops][2];
};

// The profile in effect: set_store_profile()'s, else UBFUSE_STORE_PROFILE's, else the CPU's. A
// bad UBFUSE_STORE_PROFILE throws an Error listing the names.
const StoreProfile& store_profile();
// The profile of the CPU this runs on, by CPUID.
const StoreProfile& detected_store_profile();
// The profile of an x86 CPU from its vendor string and display family and model; `avx512`
// chooses the generic row for a CPU that is not in the table.
const StoreProfile& store_profile_for(const std::string& vendor, int family, int model,
                                      bool avx512);
// Selects a profile by name ("" for the default again); throws an Error listing the names.
void set_store_profile(const std::string& name);
// "zen3, zen4, zen5, avx2, avx512, generic, plain, stream": for messages and docs.
std::string store_profile_names();

// Whether `loop` streams an output of dtype `out` once it is past stream_min_bytes().
bool streams_compute_bound(ComputeLoop loop, DType out);

// Whether a loop writes `out_bytes` of dtype `out` with non-temporal stores: past
// stream_min_bytes() when it is memory-bound, and then only where the profile says so when it is
// compute-bound.
bool stream_output(size_t out_bytes, ComputeLoop loop, bool compute_bound, DType out);

// The locality argument of the software prefetches that run ahead of streaming loops (eager
// LayerNorm/RMSNorm and Softmax, generated kernels): 0, non-temporal (into L1 only), on AMD cores,
// where it was chosen (Zen 3, 4, 5); 3, every cache level, elsewhere: on an Intel Xeon with AMX
// the non-temporal hint made the fused seed block 3x slower (13.3 against 4.3 ms) and eager
// LayerNorm's block 1.3x, as if its lines were dropped before their loads came.
int prefetch_locality();
int prefetch_locality_for(const std::string& vendor);

}  // namespace ubfuse::cpu
