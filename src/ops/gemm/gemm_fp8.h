// The fp8 (e4m3) GEMM's host side: one problem, the plan, the two kinds' launchers (one .cu each so
// that their kernels compile in parallel).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "mkccl.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

struct Fp8Problem {
  const void* A;  // e4m3 [M, K]
  const void* W;  // e4m3 [N, K]
  void* C;        // outType [M, N]
  int64_t M, N, K;
  mkcclFp8ScaleKind_t kind;
  const float* scaleA;  // device
  const float* scaleW;  // device
  mkcclDataType_t outType;
};

// The tile configuration (gemm_fp8_plan.h).
GemmPlan gemmFp8Plan(const Fp8Problem& p, GemmVariant v, int smCount, int maxClusters2);

mkcclResult_t gemmFp8TensorLaunch(const Fp8Problem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                                  cudaStream_t stream);
mkcclResult_t gemmFp8BlockLaunch(const Fp8Problem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                                 cudaStream_t stream);

// The problem on `dev` at variant v: either kind's launcher (the fused ops' sequential and split
// routes, mkcclGemmFp8's world of one).
mkcclResult_t gemmFp8Run(const Fp8Problem& p, GemmVariant v, int dev, cudaStream_t stream);

// The block kind's 128 x 192 kernel (gemm_fp8_block_wide.cu), for a plan of bn 192.
struct Fp8Params;
mkcclResult_t gemmFp8BlockWideLaunch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                                     const GemmArgs& g, const Fp8Params& params, const GemmPlan& plan, int dev,
                                     const GemmDeviceInfo& info, cudaStream_t stream);

// Arguments, tensor maps and plan-independent fields shared by both kinds.
mkcclResult_t gemmFp8Prepare(const Fp8Problem& p, const GemmPlan& plan, GemmArgs* g, CUtensorMap* mapA,
                             CUtensorMap* mapB, CUtensorMap* mapC);

}  // namespace mkccl
