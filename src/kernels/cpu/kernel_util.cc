// Error helpers and small shared pieces of the eager CPU kernels.
#include "kernels/cpu/kernel_util.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ubfuse::cpu {

namespace {
std::atomic<size_t> g_stream_min_bytes{kStreamMinBytes};
}  // namespace

size_t stream_min_bytes() { return g_stream_min_bytes.load(std::memory_order_relaxed); }
void set_stream_min_bytes(size_t bytes) {
  g_stream_min_bytes.store(bytes, std::memory_order_relaxed);
}

int float_code(DType t) {
  switch (t) {
    case DType::f32:
      return kF32;
    case DType::bf16:
      return kBF16;
    case DType::f16:
      return kF16;
    default:
      break;
  }
  internal_check_failed("is_float(t)", __FILE__, __LINE__,
                        "float_code of non-float dtype " + std::string(dtype_name(t)));
}

void kernel_fail(const std::string& who, const std::string& what, const std::string& hint) {
  throw Error(who + ": " + what + (hint.empty() ? "" : "; hint: " + hint));
}

std::string tensors_str(const std::vector<Tensor>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i) s += ", ";
    s += sizes_str(ts[i].sizes()) + " " + std::string(dtype_name(ts[i].dtype()));
  }
  return s;
}

void KernelBase::check_arity(const std::vector<Tensor>& in, size_t nin_min, size_t nin_max,
                             const std::vector<Tensor>& out) const {
  UBF_CHECK(in.size() >= nin_min && in.size() <= nin_max,
            who_ + ": kernel got " + std::to_string(in.size()) + " inputs");
  UBF_CHECK(out.size() == 1 && (out[0].defined() || out[0].numel() == 0),
            who_ + ": kernel needs one allocated output");
  for (const auto& t : in) UBF_CHECK(t.defined() || t.numel() == 0, who_ + ": undefined input");
}

void parallel_copy(void* dst, const void* src, size_t bytes, ThreadPool& pool) {
  constexpr int64_t kLine = 64;
  const int64_t lines = int64_t((bytes + kLine - 1) / kLine);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  pool.parallel_for(lines, kMinParallelElems * 4 / kLine, [&](int64_t lo, int64_t hi, int) {
    const size_t b = size_t(lo * kLine), e = std::min(bytes, size_t(hi * kLine));
    std::memcpy(d + b, s + b, e - b);
  });
}

}  // namespace ubfuse::cpu
