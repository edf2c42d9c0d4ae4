// The plain GEMM (mkcclGemm): three kernel configurations per input type, chosen per shape, and
// split K (128 x 128 tiles) for shapes with fewer tiles than SMs.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include "ops/gemm/gemm_plan.h"
#include "mkccl.h"

namespace mkccl {

struct GemmProblem {
  const void* A;
  const void* W;
  void* C;
  int64_t M, N, K;
  mkcclDataType_t inType, outType;
  int splitK = 0;  // the tuner's gemm.split_k
  int packK = 0;   // the tuner's gemm.pack_k
  int streamK = 0;  // the tuner's gemm.stream_k
  bool pdl = false;  // launched as a programmatic dependent (the tuner's gemm.pdl)
  int clusterN = 0;  // the tuner's gemm.cluster_n (0 auto, 1, 2, 4)
  int64_t lda = 0, ldw = 0, ldc = 0;  // row pitches in elements (0: K, K, N)
  const void* bias = nullptr;         // [N], added in fp32 before the conversion, or null
  mkcclDataType_t biasType = mkcclBfloat16;
};

// Plans and launches C = A . W^T with In = dev::Bf16 or dev::F16 (instantiated in gemm_bf16.cu
// and gemm_f16.cu, one file each so that the two compile in parallel).
template <class In>
mkcclResult_t plainGemm(const GemmProblem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                        cudaStream_t stream);
// Loads every plain GEMM kernel of this input type on `dev` (src/ops/preload.cu).
template <class In>
mkcclResult_t plainGemmPreload(int dev, int smCount);

}  // namespace mkccl
