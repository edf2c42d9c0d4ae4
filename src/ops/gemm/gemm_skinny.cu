// Host side of the skinny GEMM: the choice, the launch (one CTA per 16 rows of W, 8 warps splitting
// K; kernels/gemm/skinny.cuh).
#include "ops/gemm/gemm_skinny.h"
#include <stdint.h>
#include "base/check.h"
#include "kernels/gemm/skinny.cuh"
#include "ops/gemm/gemm_plain.cuh"

namespace mkccl {

// Auto's rule, from the decode shapes timed with it forced beside the engine's plans (one H200,
// perf/results/20261128-s11/7-skinny-h200/): up to 8 rows it was faster up to 64 Mi elements of W
// (1 x 4096 x 4096 13.2 against 17.7 us, cuBLAS 15.1; 1 x 8192 x 8192 38.2 against 41.3) and within
// 2% beyond (1 x 14336 x 4096 35.4 against 35.1; 8 x 8192 x 28672 5% slower); up to 16 rows up to
// 32 Mi (16 x 8192 x 4096 23.5 against 25.0; 16 x 8192 x 8192 4% slower); above 16 rows it is
// about half as fast as the engine (its four token groups hold one CTA per SM).
constexpr int64_t kSkinnyAutoElems8 = int64_t(1) << 26, kSkinnyAutoElems16 = int64_t(1) << 25;

bool gemmSkinnyWanted(const GemmProblem& p, GemmVariant v, const GemmDeviceInfo&) {
  if (p.M > skinny::kMaxRows) return false;
  if (((reinterpret_cast<uintptr_t>(p.A) | reinterpret_cast<uintptr_t>(p.W)) & 15u) != 0) return false;
  // Whole 16-byte pieces of k: with a pitch K may be off 8, and a piece would reach past it.
  if (p.K % 8 != 0) return false;
  if (v == GemmVariant::Skinny) return true;
  if (v != GemmVariant::Auto || p.splitK > 1) return false;  // a forced part count is the engine's split K
  const int64_t elems = p.N * p.K;
  return (p.M <= 8 && elems <= kSkinnyAutoElems8) || (p.M <= 16 && elems <= kSkinnyAutoElems16);
}

namespace {
template <class In, int kGroups, int kUnroll>
mkcclResult_t launch(const skinny::Args& a, cudaStream_t stream) {
  const int64_t blocks = (a.N + skinny::kRows - 1) / skinny::kRows;
  skinny::skinnyGemmKernel<In, kGroups, kUnroll>
      <<<static_cast<unsigned>(blocks), skinny::kWarps * 32, 0, stream>>>(a);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}
}  // namespace

template <class In>
mkcclResult_t skinnyGemm(const GemmProblem& p, cudaStream_t stream) {
  const int64_t lda = p.lda ? p.lda : p.K, ldw = p.ldw ? p.ldw : p.K, ldc = p.ldc ? p.ldc : p.N;
  const skinny::Args a{p.A, p.W, p.C, p.bias, p.M, p.N, p.K, lda, ldw, ldc,
                       static_cast<int>(p.outType), static_cast<int>(p.biasType)};
  // Loads in flight per warp: the next stage, two k-chunks (4 KiB of W) for one token group, one
  // for more (128 registers: two CTAs per SM up to 16 tokens).
  if (p.M <= 8) return launch<In, 1, 2>(a, stream);
  if (p.M <= 16) return launch<In, 2, 1>(a, stream);
  return launch<In, 4, 1>(a, stream);
}

template mkcclResult_t skinnyGemm<dev::Bf16>(const GemmProblem&, cudaStream_t);
template mkcclResult_t skinnyGemm<dev::F16>(const GemmProblem&, cudaStream_t);

}  // namespace mkccl
