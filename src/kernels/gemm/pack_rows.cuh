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

// Grid-stride over both matrices' chunks; the destination's padding columns are left as they are
// (the tensor maps say K columns: TMA never reads them).
__global__ void __launch_bounds__(256) packRowsKernel(const PackRowsArgs a) {
  const int64_t n0 = a.rows[0] * a.srcChunks, total = n0 + a.rows[1] * a.srcChunks;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int m = i < n0 ? 0 : 1;
    const int64_t j = m == 0 ? i : i - n0;
    const int64_t row = j / a.srcChunks, col = j - row * a.srcChunks;
    a.dst[m][row * a.dstChunks + col] = __ldcs(a.src[m] + j);
  }
}

}  // namespace mkccl
