// Attention groups (GroupKind::Attention, fusion/attention_match.h) run through the flash-style
// CPU kernel (kernels/cpu/attention.h): this maps the group's tensors onto its problem.
#pragma once

#include <memory>

#include "fusion/group.h"
#include "runtime/kernel.h"

namespace ubfuse {

std::unique_ptr<Kernel> make_attention_kernel(const FusedGroup& g);

}  // namespace ubfuse
