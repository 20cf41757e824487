// Builds the run decomposition of numpy broadcasting (see broadcast_plan.h).
#include "kernels/cpu/broadcast_plan.h"

#include "ubfuse/error.h"

namespace ubfuse::cpu {

BroadcastPlan plan_broadcast(const std::vector<Sizes>& ins, const Sizes& out,
                             const std::string& who) {
  UBF_CHECK(!ins.empty() && int(ins.size()) <= kMaxOperands, who + ": bad operand count");
  BroadcastPlan p;
  p.num_operands = int(ins.size());
  const size_t R = out.size();
  const int no = p.num_operands;
  // Aligned sizes and contiguous strides per operand.
  std::vector<std::vector<int64_t>> sz(static_cast<size_t>(no)), st(static_cast<size_t>(no));
  for (int k = 0; k < no; ++k) {
    const Sizes& s = ins[size_t(k)];
    if (s.size() > R) {
      throw Error(who + ": input " + std::to_string(k) + " " + sizes_str(s) +
                  " has more dims than the output " + sizes_str(out));
    }
    auto& a = sz[size_t(k)];
    a.assign(R - s.size(), 1);
    a.insert(a.end(), s.begin(), s.end());
    auto& t = st[size_t(k)];
    t.assign(R, 0);
    int64_t stride = 1;
    for (size_t d = R; d-- > 0;) {
      if (a[d] != out[d] && a[d] != 1) {
        throw Error(who + ": input " + std::to_string(k) + " " + sizes_str(s) +
                    " does not broadcast to the output " + sizes_str(out) +
                    "; hint: sizes must match or be 1 in each dim, aligned from the right");
      }
      t[d] = a[d] == 1 ? 0 : stride;
      stride *= a[d];
    }
  }
  // Merge dims from the innermost outwards; dims of size 1 are skipped.
  struct Group {
    int64_t size;
    int64_t stride[kMaxOperands];
    bool bcast[kMaxOperands];
  };
  std::vector<Group> groups;  // innermost first
  for (size_t d = R; d-- > 0;) {
    if (out[d] == 1) continue;
    Group g{out[d], {0, 0, 0}, {false, false, false}};
    for (int k = 0; k < no; ++k) {
      g.bcast[k] = sz[size_t(k)][d] == 1;
      g.stride[k] = st[size_t(k)][d];
    }
    if (!groups.empty()) {
      Group& prev = groups.back();
      bool same = true;
      for (int k = 0; k < no; ++k) same = same && prev.bcast[k] == g.bcast[k];
      if (same) {
        prev.size *= g.size;  // the inner dim's strides stay those of the merged group
        continue;
      }
    }
    groups.push_back(g);
  }
  if (groups.empty()) return p;  // every dim is 1: one run of one element
  const Group& in = groups.front();
  p.inner = in.size;
  for (int k = 0; k < no; ++k) p.inner_scalar[k] = in.bcast[k];
  if (groups.size() - 1 > size_t(kMaxOuterDims)) {
    throw Error(who + ": broadcasting " + sizes_str(out) + " needs more than " +
                std::to_string(kMaxOuterDims) + " dims; hint: reshape to fewer dims");
  }
  for (size_t gi = groups.size(); gi-- > 1;) {
    p.outer_sizes.push_back(groups[gi].size);
    for (int k = 0; k < no; ++k) p.outer_strides[k].push_back(groups[gi].stride[k]);
    p.rows *= groups[gi].size;
  }
  return p;
}

}  // namespace ubfuse::cpu
