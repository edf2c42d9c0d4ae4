// Copies the rows of a matrix to a new row pitch (16-byte chunks). The GEMM engine packs A and W
// whose row pitch (K elements) is not a multiple of 128 bytes into a 128-byte pitch first: TMA
// loads of rows that start off a 128-byte boundary measured ~1.8x slower over the whole GEMM
// (8192 x 8192 x 4104 against 8192 x 8192 x 4160, H100), far more than the copy costs.
#pragma once
#include <stdint.h>

namespace mkccl {

struct PackRowsArgs {
  const uint4* src[2];
  uint4* dst[2];
  int64_t rows[2];       // rows of each matrix (0: none)
  int64_t srcChunks;     // 16-byte chunks per source row (the data: K * 2 / 16)
  int64_t dstChunks;     // 16-byte chunks per destination row (the pitch)
};

constexpr int kPackRowsThreads = 256;
constexpr int kPackRowsUnroll = 4;  // loads in flight per thread before its stores

// One warp per row (grid-stride over the rows of both matrices), each lane moving up to
// kPackRowsUnroll chunks per pass with every load issued before the first store: a copy is bound
// by the bytes in flight per SM, and the earlier one-chunk-per-thread loop (with a 64-bit division
// per chunk) reached ~2.1 TB/s. The destination's padding columns are left as they are (the
// tensor maps say K columns: TMA never reads them).
__global__ void __launch_bounds__(kPackRowsThreads) packRowsKernel(const PackRowsArgs a) {
  const uint32_t lane = threadIdx.x % 32u;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kPackRowsThreads / 32);
  const int64_t total = a.rows[0] + a.rows[1];
  const uint32_t chunks = static_cast<uint32_t>(a.srcChunks);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kPackRowsThreads / 32) + threadIdx.x / 32u; r < total;
       r += warps) {
    const int m = r < a.rows[0] ? 0 : 1;
    const int64_t row = m == 0 ? r : r - a.rows[0];
    const uint4* src = a.src[m] + row * a.srcChunks;
    uint4* dst = a.dst[m] + row * a.dstChunks;
    for (uint32_t c0 = lane; c0 < chunks; c0 += 32u * kPackRowsUnroll) {
      uint4 v[kPackRowsUnroll];
#pragma unroll
      for (int u = 0; u < kPackRowsUnroll; ++u)
        if (c0 + 32u * u < chunks) v[u] = __ldcs(src + c0 + 32u * u);
#pragma unroll
      for (int u = 0; u < kPackRowsUnroll; ++u)
        if (c0 + 32u * u < chunks) dst[c0 + 32u * u] = v[u];
    }
  }
}

}  // namespace mkccl
