// Device helpers of the MoE GPU tests (moe_check.cu).
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include "mkccl.h"

namespace mkccl {
namespace moetest {

// Y[row, c] = recvX[row, c] * (1 + 0.25 * rowInfo[row].expert) in the dtype, for the rows in use.
void expertScale(const void* recvX, const mkcclMoeRowInfo* info, const int32_t* offsets, int El, void* Y, size_t pitch,
                 size_t H, bool fp16, cudaStream_t s);

}  // namespace moetest
}  // namespace mkccl
