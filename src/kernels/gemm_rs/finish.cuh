// The exact route's last step (GEMM+ReduceScatter/AllReduce with a bias, another output type or a
// pitch of C: ops/gemm_rs/finish.cu): C[r, j] = convert(S[r, j] + bias[j]) from the fp32 reduced
// sum S (rows x N, contiguous) into C (rows x N at pitch ldc, of Out). The bias is added once, to
// the sum, in fp32, before the one rounding.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <type_traits>
#include "mkccl.h"

namespace mkccl {
namespace rs {

__device__ __forceinline__ float finishBias(const void* bias, int biasType, int64_t j) {
  if (bias == nullptr) return 0.f;
  if (biasType == mkcclFloat32) return static_cast<const float*>(bias)[j];
  if (biasType == mkcclFloat16) return __half2float(static_cast<const __half*>(bias)[j]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[j]);
}

template <class Out>
__device__ __forceinline__ Out finishConvert(float v) {
  if constexpr (sizeof(Out) == 4) return v;
  else if constexpr (std::is_same<Out, __half>::value) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

template <class Out>
__global__ void finishRowsKernel(const float* __restrict__ S, int64_t rows, int64_t N, Out* __restrict__ C,
                                 int64_t ldc, const void* bias, int biasType) {
  const int64_t total = rows * N;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / N, j = e - r * N;
    C[r * ldc + j] = finishConvert<Out>(S[e] + finishBias(bias, biasType, j));
  }
}

}  // namespace rs
}  // namespace mkccl
