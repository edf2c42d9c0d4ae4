// Internal entry point of the fp8 GEMM (src/ops/gemm/gemm_fp8.cu); arguments checked by
// mkcclGemmFp8 (api_fp8.cc).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include "mkccl.h"

namespace mkccl {

mkcclResult_t gemmFp8Op(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                        mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW, mkcclDataType_t outType,
                        cudaStream_t stream);

// mkcclAllGatherGemmFp8 (src/ops/ag_gemm/ag_gemm.cu): per-tensor or block scales (block: scaleA
// this rank's shard's [M / nranks][ceil(K/128)]); arguments checked by the API (api_ag_fp8.cc). K
// in e4m3 elements.
struct OpCtx;
mkcclResult_t allGatherGemmFp8Op(OpCtx& ctx, const void* A, const void* W, void* C, void* gatheredA, size_t M,
                                 size_t N, size_t K, mkcclFp8ScaleKind_t kind, const float* scaleA,
                                 const float* scaleW, mkcclDataType_t outType);

// mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8 (src/ops/gemm_rs/gemm_rs_fp8.cu): per-tensor or
// block scales (each rank's own, of its K slice), outType bf16 or fp16; arguments checked by the
// API (api_rs_fp8.cc). K in e4m3 elements.
mkcclResult_t gemmReduceScatterFp8Op(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N,
                                     size_t K, mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW,
                                     mkcclDataType_t outType);
mkcclResult_t gemmAllReduceFp8Op(OpCtx& ctx, const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                 mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW,
                                 mkcclDataType_t outType);

}  // namespace mkccl
