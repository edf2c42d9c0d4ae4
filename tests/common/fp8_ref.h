// fp8 helpers of the fused-op tests (AllGather+GEMM and GEMM+ReduceScatter / AllReduce with e4m3
// inputs): random e4m3 values and scales, and the fp32 reference of a GEMM with per-tensor or
// DeepSeek-V3 block scales.
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
// The same with block scales: sA [M][ceil(K/128)], sW [ceil(N/128)][ceil(K/128)] (device memory).
void fp8BlockRef(const void* A, const void* W, const float* sA, const float* sW, float* R, int M, int N, int K,
                 cudaStream_t stream = 0);
// n scales 2^e, e uniform in [minExp, maxExp) each (block scales; randomFp8Scale's rule for 1).
std::vector<float> randomFp8Scales(size_t n, std::mt19937_64& rng, float minExp, float maxExp);
// The scale counts of a GEMM's A [M, K] and W [N, K] with block scales.
inline size_t fp8BlockScalesA(size_t M, size_t K) { return M * ((K + 127) / 128); }
inline size_t fp8BlockScalesW(size_t N, size_t K) { return (N + 127) / 128 * ((K + 127) / 128); }

}  // namespace test
}  // namespace mkccl
