// The GEMM engine as the other ops call it: C = A . W^T on one GPU with a tile configuration
// (GemmVariant::Auto: the planner's), arguments checked as mkcclGemm checks them.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include "mkccl.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

// splitK: the tuner's gemm.split_k (0: the model's choice; split_k_model.h); packK: gemm.pack_k
// (0 auto, 1 off; gemm_pack.h); streamK: gemm.stream_k (0 auto, 1 off, 2 on; stream_k_model.h);
// pdl: launched as a programmatic dependent of the stream's previous kernel (gemm.pdl); clusterN:
// gemm.cluster_n (0 auto, else 1, 2 or 4 CTAs along N sharing the A tile).
mkcclResult_t gemmRun(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                      mkcclDataType_t outType, GemmVariant v, cudaStream_t stream, int splitK = 0, int packK = 0,
                      int streamK = 0, bool pdl = false, int clusterN = 0);

// What the fused ops' argument struct adds to a GEMM (mkcclFusedGemmArgs_t): row pitches in
// elements (0: contiguous, K / K / N) and a bias[N] added in fp32 before the output conversion.
struct GemmExtras {
  size_t lda = 0, ldw = 0, ldc = 0;
  const void* bias = nullptr;
  mkcclDataType_t biasType = mkcclBfloat16;
};
mkcclResult_t gemmRunEx(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                        mkcclDataType_t outType, const GemmExtras& x, GemmVariant v, cudaStream_t stream,
                        int splitK = 0, int packK = 0, int streamK = 0, bool pdl = false, int clusterN = 0);

}  // namespace mkccl
