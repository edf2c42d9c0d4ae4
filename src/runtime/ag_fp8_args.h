// mkcclAllGatherGemmFp8's argument checks that need no GPU (api_ag_fp8.cc calls them first). Pure
// host code, so that a CPU test compiles it in (tests/runtime/ag_fp8_args_test.cc).
#pragma once
#include <stddef.h>
#include "mkccl.h"

namespace mkccl {

// The call on rank `rank` of `nranks`: A [M / nranks, K] e4m3, W [N, K] e4m3, C [M, N] of outType,
// gatheredA [M, K] e4m3 or NULL; per-tensor scales, or block scales of this rank's shard
// ([M / nranks][ceil(K/128)]) and W. mkcclInvalidArgument with a message naming `op` and the
// argument. Nothing is dereferenced but `scales`.
mkcclResult_t agGemmFp8ArgsCheck(const char* op, int nranks, int rank, const void* A, const void* W, const void* C,
                                 const void* gatheredA, size_t M, size_t N, size_t K, const mkcclFp8Scales_t* scales,
                                 mkcclDataType_t outType);

}  // namespace mkccl
