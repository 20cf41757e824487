// oneDNN runs on OpenMP (Debian's libdnnl links libgomp), whose idle threads spin for about a
// millisecond after each parallel region unless OMP_WAIT_POLICY says otherwise. ubfuse's own
// pool needs those cores between oneDNN calls: with 2 cores, a spinning OpenMP thread and a pool
// worker time-share one core and every kernel after a MatMul waits (the speech encoder at 64
// frames ran 29-400 ms instead of 14). libgomp reads its environment when it is loaded, so a
// program can only change it for itself by starting again.
#pragma once

namespace ubfuse {

// libgomp's spin before it sleeps (GOMP_SPINCOUNT): none. Small oneDNN calls run on one OpenMP
// thread (kernels/cpu/dnnl_util.h), and any spin of the others takes the cores the pool needs
// (docs/performance.md, "What limits these numbers").
inline constexpr const char* kGompSpinCount = "0";

// In main(): when OMP_WAIT_POLICY is unset, sets it to PASSIVE (and GOMP_SPINCOUNT to
// kGompSpinCount unless set) and execs this program again with the same arguments (once;
// UBFUSE_KEEP_OMP_WAIT=1 skips it). Returns if the exec fails.
void reexec_with_passive_omp_wait(char** argv);

}  // namespace ubfuse
