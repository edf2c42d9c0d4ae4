// The exact route of GEMM+ReduceScatter/AllReduce (gemm_rs.cu, runExact): the last step, from the
// fp32 reduced sum to C (kernels/gemm_rs/finish.cuh).
#include <cuda_runtime.h>
#include <algorithm>
#include "kernels/gemm_rs/finish.cuh"
#include "ops/gemm_rs/host.h"
#include "base/check.h"

namespace mkccl {
namespace rs {

mkcclResult_t finishLaunch(const float* S, int64_t rows, int64_t N, void* C, int64_t ldc, mkcclDataType_t outType,
                           const void* bias, mkcclDataType_t biasType, int smCount, cudaStream_t stream) {
  const int64_t total = rows * N;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, int64_t(smCount) * 8));
  if (outType == mkcclFloat32)
    finishRowsKernel<float><<<blocks, threads, 0, stream>>>(S, rows, N, static_cast<float*>(C), ldc, bias, biasType);
  else if (outType == mkcclFloat16)
    finishRowsKernel<__half><<<blocks, threads, 0, stream>>>(S, rows, N, static_cast<__half*>(C), ldc, bias, biasType);
  else
    finishRowsKernel<__nv_bfloat16>
        <<<blocks, threads, 0, stream>>>(S, rows, N, static_cast<__nv_bfloat16*>(C), ldc, bias, biasType);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

mkcclResult_t finishPreload() {
  cudaFuncAttributes a;
  CUDA_CHECK(cudaFuncGetAttributes(&a, finishRowsKernel<float>));
  CUDA_CHECK(cudaFuncGetAttributes(&a, finishRowsKernel<__half>));
  CUDA_CHECK(cudaFuncGetAttributes(&a, finishRowsKernel<__nv_bfloat16>));
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
