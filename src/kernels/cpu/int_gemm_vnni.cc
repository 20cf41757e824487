#include "kernels/cpu/int_gemm_vnni.h"

#include <immintrin.h>

#include <cstdlib>
#include <cstring>

namespace ubfuse::cpu {

bool vnni_loop_available() {
  static const bool v = [] {
    const char* off = std::getenv("UBFUSE_INT8_NO_VNNI_LOOP");
    if (off && *off == '1') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return v;
}

namespace {

#define UBF_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

// One quad of K for R rows: each row's 4 bytes against the block's 64 columns x 4 bytes.
template <int R>
UBF_VNNI inline __attribute__((always_inline)) void quad(__m512i (&acc)[R][4], const int8_t* w,
                                                         const uint32_t* av) {
  const __m512i w0 = _mm512_loadu_si512(w), w1 = _mm512_loadu_si512(w + 64),
                w2 = _mm512_loadu_si512(w + 128), w3 = _mm512_loadu_si512(w + 192);
  for (int r = 0; r < R; r++) {
    const __m512i x = _mm512_set1_epi32(int(av[r]));
    acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, w0);
    acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, w1);
    acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], x, w2);
    acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], x, w3);
  }
}

// R rows of A against one 64-column block: R x 4 accumulators of 16 columns each.
template <int R>
UBF_VNNI void rows_block(const uint8_t* a, int64_t k, const int8_t* panel, int32_t* c, int64_t ldc,
                         int64_t cols) {
  __m512i acc[R][4];
  for (int r = 0; r < R; r++) {
    for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_si512();
  }
  const int64_t quads = k / 4;
  uint32_t av[R];
  for (int64_t q = 0; q < quads; q++) {
    for (int r = 0; r < R; r++) std::memcpy(&av[r], a + r * k + q * 4, 4);
    quad<R>(acc, panel + q * 256, av);
  }
  if (k % 4) {  // the last quad's missing bytes are 0 (B's padding rows are 0 too)
    for (int r = 0; r < R; r++) {
      av[r] = 0;
      std::memcpy(&av[r], a + r * k + quads * 4, size_t(k % 4));
    }
    quad<R>(acc, panel + quads * 256, av);
  }
  for (int r = 0; r < R; r++) {
    for (int j = 0; j < 4; j++) {
      const int64_t left = cols - j * 16;
      if (left <= 0) break;
      int32_t* dst = c + r * ldc + j * 16;
      if (left >= 16) {
        _mm512_storeu_si512(dst, acc[r][j]);
      } else {
        _mm512_mask_storeu_epi32(dst, __mmask16((1u << left) - 1), acc[r][j]);
      }
    }
  }
}

void block(const uint8_t* a, int64_t m, int64_t k, const int8_t* panel, int32_t* c, int64_t ldc,
           int64_t cols) {
  int64_t r = 0;
  for (; r + 4 <= m; r += 4) rows_block<4>(a + r * k, k, panel, c + r * ldc, ldc, cols);
  switch (m - r) {
    case 3:
      rows_block<3>(a + r * k, k, panel, c + r * ldc, ldc, cols);
      break;
    case 2:
      rows_block<2>(a + r * k, k, panel, c + r * ldc, ldc, cols);
      break;
    case 1:
      rows_block<1>(a + r * k, k, panel, c + r * ldc, ldc, cols);
      break;
    default:
      break;
  }
}

}  // namespace

void vnni_gemm_packed(const uint8_t* a, const int8_t* packed, int64_t block_bytes, int32_t* c,
                      int64_t m, int64_t k, int64_t n, ThreadPool& pool) {
  const int64_t blocks = (n + 63) / 64;
  pool.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; b++) {
      block(a, m, k, packed + b * block_bytes, c + b * 64, n, std::min<int64_t>(64, n - b * 64));
    }
  });
}

}  // namespace ubfuse::cpu
