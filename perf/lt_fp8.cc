#include "lt_fp8.h"
#include <stdint.h>

namespace mkccl {
namespace perf {

bool LtFp8Gemm::init(cublasLtHandle_t handle, size_t M, size_t N, size_t K, const float* sA, const float* sW,
                     bool fastAccum, cudaDataType_t out) {
  h = handle;
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  const int8_t fast = fastAccum ? 1 : 0;
  if (cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
  // cuBLASLt's A is our W, its B our A.
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sW, sizeof(sW));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sA, sizeof(sA));
  if (cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&lc, out, N, M, N) != CUBLAS_STATUS_SUCCESS)
    return false;
  if (cudaMalloc(&ws, wsBytes) != cudaSuccess) return false;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes, sizeof(wsBytes));
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  algo = res.algo;
  return true;
}

bool LtFp8Gemm::run(const void* A, const void* W, void* C, cudaStream_t s) const {
  const float one = 1.f, zero = 0.f;
  return cublasLtMatmul(h, desc, &one, W, la, A, lb, &zero, C, lc, C, lc, &algo, ws, wsBytes, s) ==
         CUBLAS_STATUS_SUCCESS;
}

LtFp8Gemm::~LtFp8Gemm() {
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (desc) cublasLtMatmulDescDestroy(desc);
  cudaFree(ws);
}

}  // namespace perf
}  // namespace mkccl
