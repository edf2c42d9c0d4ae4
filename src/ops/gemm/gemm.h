// The GEMM engine as the other ops call it: C = A . W^T on one GPU with a tile configuration
// (GemmVariant::Auto: the planner's), arguments checked as mkcclGemm checks them.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include "mkccl.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

// splitK: the tuner's gemm.split_k (0: the model's choice; split_k_model.h); packK: gemm.pack_k
// (0 auto, 1 off; gemm_pack.h).
mkcclResult_t gemmRun(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                      mkcclDataType_t outType, GemmVariant v, cudaStream_t stream, int splitK = 0, int packK = 0);

}  // namespace mkccl
