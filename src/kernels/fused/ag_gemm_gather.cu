// The sequential plan's AllGather: whole CTAs run the fused kernel's communication teams
// (ag_gemm_push.cuh: same layout, counters and protocol, so ranks that chose different plans
// still agree), then wait for every peer's shard, so the GEMM that follows on the stream reads
// a complete region.
#include "kernels/fused/ag_gemm_host.cuh"
#include "runtime/check.h"

namespace mkccl {
namespace ag {
namespace {

constexpr int kGatherThreads = 512;
constexpr int64_t kGatherUnit = 4;  // slices per claim

__global__ void __launch_bounds__(kGatherThreads) gatherKernel(const __grid_constant__ PushArgs p) {
  const Team team{threadIdx.x, blockDim.x, 1};
  if (!commTeam(p, team, blockIdx.x == 0, kGatherUnit)) return;
  // gatherOut already waited for every peer slice when it copied them out.
  if (p.gathered == nullptr) waitArrivals(p, team, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

}  // namespace

mkcclResult_t gatherLaunch(const PushArgs& p, int ctas, cudaStream_t stream) {
  if (ctas < 1) return setError(mkcclInternalError, "AllGather+GEMM gather: %d CTAs", ctas);
  gatherKernel<<<ctas, kGatherThreads, 0, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
  return mkcclSuccess;
}

}  // namespace ag
}  // namespace mkccl
