#include "fp8_ref.h"
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

namespace mkccl {
namespace test {

namespace {
__global__ void fp8TensorRefKernel(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* W, const float* sA, const float* sW,
                                   float* R, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N || m >= M) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc = fmaf(static_cast<float>(A[size_t(m) * K + k]) * sA[0], static_cast<float>(W[size_t(n) * K + k]) * sW[0], acc);
  R[size_t(m) * N + n] = acc;
}
}  // namespace

std::vector<uint8_t> randomFp8(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<uint8_t> v(n);
  for (auto& x : v) {
    const __nv_fp8_e4m3 f(u(rng));
    memcpy(&x, &f, 1);
  }
  return v;
}

float randomFp8Scale(std::mt19937_64& rng, float minExp, float maxExp) {
  std::uniform_real_distribution<float> e(minExp, maxExp);
  const float s = exp2f(e(rng));
  return s == 1.f ? 1.5f : s;
}

void fp8TensorRef(const void* A, const void* W, const float* sA, const float* sW, float* R, int M, int N, int K,
                  cudaStream_t stream) {
  fp8TensorRefKernel<<<dim3(unsigned((N + 127) / 128), unsigned(M)), 128, 0, stream>>>(
      static_cast<const __nv_fp8_e4m3*>(A), static_cast<const __nv_fp8_e4m3*>(W), sA, sW, R, M, N, K);
}

}  // namespace test
}  // namespace mkccl
