// The unfused MoE baseline's elementwise steps (mkccl-perf moe), on the GPU so that they are timed
// like the rest of the baseline: the SwiGLU between the expert GEMMs and the weighted sum of the
// returned rows. Inputs bf16 or fp16 (t), fp32 arithmetic, outputs in t.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "mkccl.h"

namespace mkccl {
namespace perf {

// act[r, i] = silu(h[r, i]) * h[r, I + i] for r < rows, i < I (h is [rows, 2I]: gate then up).
void moeSwiglu(const void* h, void* act, size_t rows, size_t I, mkcclDataType_t t, cudaStream_t s);

// out[tok, :] = sum_j w[tok * k + j] * rows[rowOf[tok * k + j], :] over the slots with rowOf >= 0,
// summed in fp32 (the returned rows are [*, H]).
void moeWeightedSum(const void* rows, const int32_t* rowOf, const float* w, void* out, size_t T, int k, size_t H,
                    mkcclDataType_t t, cudaStream_t s);

}  // namespace perf
}  // namespace mkccl
