// The small kernel that runs before each Ring Attention launch (attn_ring.cuh): advances the ring's
// flag epoch, E = max(E + 1, seq), and zeroes the per-call state (per-tile flags, per-step
// counters). A memset could zero; only a kernel can advance an epoch that a replayed CUDA graph
// (whose sequence number is frozen in its launch parameters) must still see grow.
#include <cuda_runtime.h>
#include <stdint.h>
#include "ops/attention/attn_launch.h"
#include "base/check.h"

namespace mkccl {
namespace attn {

namespace {
__global__ void ringPrepKernel(uint64_t* epoch, uint64_t seq, uint64_t* zero, size_t words) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t n = static_cast<size_t>(gridDim.x) * blockDim.x;
  if (i == 0) {
    const uint64_t e = *epoch + 1;
    *epoch = e > seq ? e : seq;
  }
  for (size_t k = i; k < words; k += n) zero[k] = 0;
}
}  // namespace

mkcclResult_t ringPrep(uint64_t* epoch, uint64_t seq, void* zero, size_t bytes, cudaStream_t stream) {
  const size_t words = bytes / 8;
  const unsigned blocks = static_cast<unsigned>(words / 256 + 1 < 264 ? words / 256 + 1 : 264);
  ringPrepKernel<<<blocks, 256, 0, stream>>>(epoch, seq, static_cast<uint64_t*>(zero), words);
  return mkcclSuccess;
}

mkcclResult_t ringPrepLoad() {
  cudaFuncAttributes a;
  CUDA_CHECK(cudaFuncGetAttributes(&a, ringPrepKernel));
  return mkcclSuccess;
}

}  // namespace attn
}  // namespace mkccl
