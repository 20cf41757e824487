// Which Highway targets the eager kernels compile for (include before any Highway header in the
// foreach_target files of kernels/cpu). SSSE3/SSE4 are dropped to halve compile time: machines
// without AVX2 run the portable scalar target instead (correct, slower).
#pragma once

#ifdef HIGHWAY_HWY_DETECT_TARGETS_H_
#error "include kernels/cpu/hwy_targets.h before any Highway header"
#endif

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
