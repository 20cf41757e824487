// What the oneDNN kernels (matmul_dnnl.cc, conv_dnnl.cc) share: the one CPU engine, plain
// (row-major) memory descriptors, the per-thread f32 staging buffers and scratchpads.
#pragma once

#include <cstdint>
#include <memory>
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

// Per-thread f32 buffers, by slot (0, 1: converted (bf16/f16) inputs, 2: the output, 3: a pool
// thread's columns of a split product), reused across calls: a fresh buffer per call costs a zero
// fill and, at tens of MiB, page faults on every call. A kernel uses them within one run() on its
// thread.
inline float* dnnl_staging(int slot, int64_t n) {
  static thread_local std::unique_ptr<float[]> bufs[4];
  static thread_local int64_t caps[4] = {0, 0, 0, 0};
  if (caps[slot] < n) {
    bufs[slot].reset(new float[size_t(n)]);  // uninitialized: every element is written first
    caps[slot] = n;
  }
  return bufs[slot].get();
}

// The calling thread's scratchpad for a oneDNN call, reused across calls (uninitialized): a fresh
// one per call costs a zero fill and page faults (int8 matmuls with AMX want megabytes).
inline void* dnnl_scratchpad(size_t bytes) {
  static thread_local std::unique_ptr<uint8_t[]> buf;
  static thread_local size_t cap = 0;
  if (cap < bytes) {
    buf.reset(new uint8_t[bytes]);
    cap = bytes;
  }
  return buf.get();
}

// The primitive descriptor of a oneDNN matmul src x wei -> dst whose calls pass their own
// scratchpad (dnnl_scratchpad); attr may carry more (A's zero point). Empty where oneDNN has none.
inline dnnl::matmul::primitive_desc dnnl_matmul_pd(const dnnl::memory::desc& src,
                                                   const dnnl::memory::desc& wei,
                                                   const dnnl::memory::desc& dst,
                                                   dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return {dnnl::matmul::desc(src, wei, dst), attr, dnnl_cpu_engine(), /*allow_empty=*/true};
}

// oneDNN parallelizes with OpenMP (Debian's build links libgomp), not with the ThreadPool. A call
// runs on at most the pool's threads (the model's num_threads), and on one when it has fewer than
// kDnnlOneThreadMacs multiply-adds (about 100 us on one core): waking a sleeping OpenMP thread
// costs tens of microseconds, and spinning ones take the cores the pool needs (the bench speech
// encoder at 16 frames: 10.1 -> 6.3 ms from 2^18 to 2^22, Zen 4). Restores the calling thread's
// setting on exit.
inline constexpr int64_t kDnnlOneThreadMacs = int64_t(1) << 22;
class DnnlThreads {
 public:
  DnnlThreads(int64_t macs, int pool_threads);
  ~DnnlThreads();
  DnnlThreads(const DnnlThreads&) = delete;
  DnnlThreads& operator=(const DnnlThreads&) = delete;

 private:
  int saved_;
};

}  // namespace ubfuse::cpu
