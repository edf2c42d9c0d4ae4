// mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8's argument checks that need no GPU
// (api_rs_fp8.cc calls them first). Pure host code, so that a CPU test compiles it in
// (tests/runtime/rs_fp8_args_test.cc).
#pragma once
#include <stddef.h>
#include "mkccl.h"

namespace mkccl {

// The call on a communicator of `nranks` ranks: A [M, K] e4m3, W [N, K] e4m3, C of outType,
// [M / nranks, N] (allReduce false) or [M, N]; per-tensor or block scales of this rank's A and W
// (block: [M][ceil(K/128)], [ceil(N/128)][ceil(K/128)]). mkcclInvalidArgument with a message
// naming `op` and the argument. Nothing is dereferenced but `scales`.
mkcclResult_t gemmReduceFp8ArgsCheck(const char* op, bool allReduce, int nranks, const void* A,
                                     const void* W, const void* C, size_t M, size_t N, size_t K,
                                     const mkcclFp8Scales_t* scales, mkcclDataType_t outType);

}  // namespace mkccl
