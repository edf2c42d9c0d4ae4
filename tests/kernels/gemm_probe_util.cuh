// What the two GEMM probes (gemm_probe_test.cu, gemm_streamk_probe_test.cu) share, so that their
// stamped kernels run on the same operands, arguments and launch, and print and time alike.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "ops/gemm/gemm_plan.h"
#include "test_util.h"

namespace mkccl {
namespace gemmprobe {

// Median, min and max of v ("med [min, max]", " (n=N)" after it with count); "-" when empty.
inline std::string spread(std::vector<double> v, int decimals = 0, bool count = false) {
  if (v.empty()) return "      -";
  std::sort(v.begin(), v.end());
  char b[96];
  const int n = snprintf(b, sizeof(b), "%7.*f [%6.*f, %7.*f]", decimals, v[v.size() / 2], decimals, v.front(),
                         decimals, v.back());
  if (count && n >= 0 && static_cast<size_t>(n) < sizeof(b))
    snprintf(b + n, sizeof(b) - n, " (n=%zu)", v.size());
  return b;
}

// A [M][K] and W [wRows][K] random (bf16, one fresh seed), C [M][N] poisoned: a tile the kernel
// never stores shows up in the check.
inline void fillOperands(void* A, void* W, size_t wRows, void* C, size_t M, size_t N, size_t K) {
  const uint64_t seed = test::freshSeed();
  test::fillRandom(A, M * K, mkcclBfloat16, seed);
  test::fillRandom(W, wRows * K, mkcclBfloat16, seed + 1);
  test::poison(C, M * N * 2);
}

// Plan's GemmArgs for bf16 C [M][N]; a wait gives up after 20 s into `fault`, so that a probe with
// a broken hook fails instead of hanging the GPU.
inline GemmArgs gemmArgs(const GemmPlan& plan, size_t M, size_t N, size_t K, void* C, void* fault) {
  GemmArgs g;
  memset(&g, 0, sizeof(g));
  gemmArgsFor(plan, M, N, K, &g);
  g.outType = mkcclBfloat16;
  g.C = C;
  g.ldc = static_cast<int64_t>(N);
  g.waitTimeoutNs = 20ull * 1000 * 1000 * 1000;
  g.fault = static_cast<int*>(fault);
  return g;
}

// The split-K op's params of plan; zeroed first, so that what a probe adds starts null.
template <class Params>
inline Params splitKParams(const GemmPlan& plan, void* partials, void* counters) {
  Params p;
  memset(&p, 0, sizeof(p));
  p.partials = static_cast<float*>(partials);
  p.counters = static_cast<int*>(counters);
  p.splits = plan.splits;
  p.ctas = plan.ctas;
  return p;
}

// A launch of `ctas` CTAs of Cfg's kernel, its dynamic shared memory allowed first.
template <class Cfg, class Kernel>
inline cudaError_t launchConfig(Kernel kernel, int ctas, cudaLaunchConfig_t* cfg) {
  *cfg = {};
  cfg->gridDim = dim3(static_cast<unsigned>(ctas));
  cfg->blockDim = dim3(Cfg::kThreads);
  cfg->dynamicSmemBytes = Cfg::kSmemBytes;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::kSmemBytes));
}

// C (bf16) against cuBLAS on A and W; fatal where the device faulted.
inline void expectMatchesCublas(const void* A, const void* W, const void* C, void* R, size_t M, size_t N, size_t K) {
  test::cublasGemmRef(A, W, R, M, N, K, mkcclBfloat16, mkcclBfloat16, 0);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const test::ErrStats e = test::compare(test::toHostDouble(C, M * N, mkcclBfloat16),
                                         test::toHostDouble(R, M * N, mkcclBfloat16), 1e-2);
  EXPECT_EQ(e.wrong, 0u);
}

// Microseconds per call of 20 calls back to back, after 3 to warm up (clocks, caches, TLB).
template <class Call>
inline double usPerCall(Call&& call) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) call();
  cudaEventRecord(e0);
  for (int i = 0; i < 20; ++i) call();
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms * 1000.0 / 20;
}

}  // namespace gemmprobe
}  // namespace mkccl
