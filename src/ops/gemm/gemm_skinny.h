// The skinny GEMM (kernels/gemm/skinny.cuh) as the plain GEMM's planner calls it: decode-sized M.
#pragma once
#include <cuda_runtime.h>
#include "mkccl.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

struct GemmProblem;
struct GemmDeviceInfo;

// Whether the plain GEMM runs `p` on the skinny kernel: forced (gemm.variant=skinny) or auto's rule
// (not with a forced gemm.split_k), for M up to 32 rows, 16-byte aligned A and W and K a multiple
// of 8 (its loads are 16 bytes wide).
bool gemmSkinnyWanted(const GemmProblem& p, GemmVariant v, const GemmDeviceInfo& info);

template <class In>
mkcclResult_t skinnyGemm(const GemmProblem& p, cudaStream_t stream);

}  // namespace mkccl
