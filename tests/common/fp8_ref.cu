#include "fp8_ref.h"
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

namespace mkccl {
namespace test {

namespace {
// R[m, n] = sum_k (A[m, k] sA(m, k)) (W[n, k] sW(n, k)), fp32, one thread per element.
__global__ void fp8RefKernel(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* W, const float* sA, const float* sW,
                             bool block, float* R, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N || m >= M) return;
  const int kb = (K + 127) / 128;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) {
    const float a = static_cast<float>(A[size_t(m) * K + k]) * (block ? sA[size_t(m) * kb + k / 128] : sA[0]);
    const float w = static_cast<float>(W[size_t(n) * K + k]) * (block ? sW[size_t(n / 128) * kb + k / 128] : sW[0]);
    acc = fmaf(a, w, acc);
  }
  R[size_t(m) * N + n] = acc;
}

void launchRef(const void* A, const void* W, const float* sA, const float* sW, bool block, float* R, int M, int N,
               int K, cudaStream_t stream) {
  fp8RefKernel<<<dim3(unsigned((N + 127) / 128), unsigned(M)), 128, 0, stream>>>(
      static_cast<const __nv_fp8_e4m3*>(A), static_cast<const __nv_fp8_e4m3*>(W), sA, sW, block, R, M, N, K);
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

std::vector<float> randomFp8Scales(size_t n, std::mt19937_64& rng, float minExp, float maxExp) {
  std::vector<float> v(n);
  for (auto& x : v) x = randomFp8Scale(rng, minExp, maxExp);
  return v;
}

void fp8TensorRef(const void* A, const void* W, const float* sA, const float* sW, float* R, int M, int N, int K,
                  cudaStream_t stream) {
  launchRef(A, W, sA, sW, false, R, M, N, K, stream);
}

void fp8BlockRef(const void* A, const void* W, const float* sA, const float* sW, float* R, int M, int N, int K,
                 cudaStream_t stream) {
  launchRef(A, W, sA, sW, true, R, M, N, K, stream);
}

}  // namespace test
}  // namespace mkccl
