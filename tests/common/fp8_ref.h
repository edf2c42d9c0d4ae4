// fp8 helpers of the fused-op tests (AllGather+GEMM and GEMM+ReduceScatter / AllReduce with e4m3
// inputs): random e4m3 values and scales, and the fp32 reference of a GEMM with per-tensor scales.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <random>
#include <vector>

namespace mkccl {
namespace test {

// n e4m3 values (their bytes), uniform in [-4, 4) before rounding.
std::vector<uint8_t> randomFp8(size_t n, std::mt19937_64& rng);
// A scale 2^e, e uniform in [minExp, maxExp); never exactly 1 (1.5 instead), so that a kernel that
// ignores a scale is caught.
float randomFp8Scale(std::mt19937_64& rng, float minExp, float maxExp);
// R[m, n] = sum_k (A[m, k] sA) (W[n, k] sW) in fp32 on the current device (A [M, K], W [N, K]
// e4m3; sA, sW one float each in device memory), one thread per element, on `stream`.
void fp8TensorRef(const void* A, const void* W, const float* sA, const float* sW, float* R, int M, int N, int K,
                  cudaStream_t stream = 0);

}  // namespace test
}  // namespace mkccl
