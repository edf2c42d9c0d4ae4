// cuBLASLt's fp8 (e4m3) GEMM with per-tensor scales in device memory, planned once per shape: the
// baseline of every fp8 op of mkccl-perf (gemm_fp8, ag_gemm_fp8, gemm_rs_fp8 / gemm_ar_fp8).
// In cuBLASLt's column-major terms D^T[N, M] = W^T(op T) . A(op N), i.e. row-major C[M, N] = A . W^T.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>

namespace mkccl {
namespace perf {

struct LtFp8Gemm {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  void* ws = nullptr;
  size_t wsBytes = 64ull << 20;

  LtFp8Gemm() = default;
  LtFp8Gemm(const LtFp8Gemm&) = delete;
  LtFp8Gemm& operator=(const LtFp8Gemm&) = delete;
  ~LtFp8Gemm();

  // fastAccum: CUBLASLT_MATMUL_DESC_FAST_ACCUM (the whole of K in the tensor cores' accumulators, as
  // our per-tensor kernels do); out: C's type (CUDA_R_16BF, CUDA_R_16F). false when cuBLASLt offers
  // no algorithm or a call fails.
  bool init(cublasLtHandle_t handle, size_t M, size_t N, size_t K, const float* sA, const float* sW, bool fastAccum,
            cudaDataType_t out = CUDA_R_16BF);
  bool run(const void* A, const void* W, void* C, cudaStream_t s) const;
};

}  // namespace perf
}  // namespace mkccl
