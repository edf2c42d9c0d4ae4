// A stand-in for the experts' compute in the GPU tests, run on the device between dispatch and
// combine (no host in the loop): Y[row] = recvX[row] * (1 + 0.25 * expert of the row), rounded to
// the dtype, for the rows in use (expertOffsets[E_loc] of them, read on the device).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "moe_check.h"

namespace mkccl {
namespace moetest {

namespace {

template <class T>
__global__ void expertScaleKernel(const T* x, const mkcclMoeRowInfo* info, const int32_t* offsets, int El, T* y,
                                  size_t pitch, size_t H) {
  const long long rows = offsets[El];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const float f = 1.0f + 0.25f * (float)info[r].expert;
    for (size_t c = threadIdx.x; c < H; c += blockDim.x) y[r * pitch + c] = (T)((float)x[r * pitch + c] * f);
  }
}

}  // namespace

void expertScale(const void* recvX, const mkcclMoeRowInfo* info, const int32_t* offsets, int El, void* Y, size_t pitch,
                 size_t H, bool fp16, cudaStream_t s) {
  if (fp16)
    expertScaleKernel<<<264, 256, 0, s>>>(static_cast<const __half*>(recvX), info, offsets, El, static_cast<__half*>(Y),
                                          pitch, H);
  else
    expertScaleKernel<<<264, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(recvX), info, offsets, El,
                                          static_cast<__nv_bfloat16*>(Y), pitch, H);
}

}  // namespace moetest
}  // namespace mkccl
