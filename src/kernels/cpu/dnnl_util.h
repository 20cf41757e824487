// What the oneDNN kernels (matmul_dnnl.cc, conv_dnnl.cc) share: the one CPU engine and plain
// (row-major) memory descriptors.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace ubfuse::cpu {

inline dnnl::engine& dnnl_cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

inline dnnl::memory::dims dnnl_plain_strides(const dnnl::memory::dims& d) {
  dnnl::memory::dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

inline dnnl::memory::desc dnnl_plain_md(const dnnl::memory::dims& d, dnnl::memory::data_type t) {
  return {d, t, dnnl_plain_strides(d)};
}

}  // namespace ubfuse::cpu
