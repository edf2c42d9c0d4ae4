// The sequential plan's AllGather: whole CTAs run the fused kernel's communication teams
// (ag_gemm_push.cuh: same layout, counters and protocol, so ranks that chose different plans
// still agree), then wait for every peer's shard, so the GEMM that follows on the stream reads
// a complete region. With PushArgs::bulk the CTAs push through the bulk-copy engine (their
// dynamic shared memory holds the lanes' stages).
#include "kernels/fused/ag_gemm_host.cuh"
#include "kernels/gemm/kernel_launch.h"
#include "runtime/check.h"

namespace mkccl {
namespace ag {
namespace {

constexpr int kGatherThreads = 512;
constexpr int64_t kGatherUnit = 4;  // slices per claim

__global__ void __launch_bounds__(kGatherThreads) gatherKernel(const __grid_constant__ PushArgs p) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Team team{threadIdx.x, blockDim.x, 1};
  const BulkSmem sm{dev::smemAddr(smem), p.bulk ? kBulkSmemBytes : 0u};
  if (!commTeam(p, team, blockIdx.x == 0, kGatherUnit, sm)) return;
  // gatherOut already waited for every peer slice when it copied them out.
  if (p.gathered == nullptr) waitArrivals(p, team, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

}  // namespace

mkcclResult_t gatherPreload(int dev) {
  int unused = 0;
  return persistentPrepare(reinterpret_cast<const void*>(&gatherKernel), dev, 1, kGatherThreads, kBulkSmemBytes, 1,
                           &unused);
}

mkcclResult_t gatherLaunch(const PushArgs& p, int dev, int ctas, cudaStream_t stream) {
  if (ctas < 1) return setError(mkcclInternalError, "AllGather+GEMM gather: %d CTAs", ctas);
  const size_t smem = p.bulk ? kBulkSmemBytes : 0;
  int unused = 0;
  MKCCL_CHECK(persistentPrepare(reinterpret_cast<const void*>(&gatherKernel), dev, ctas, kGatherThreads,
                                kBulkSmemBytes, 1, &unused));  // the shared-memory opt-in (once)
  return persistentLaunch(&gatherKernel, ctas, kGatherThreads, smem, 1, stream, p);
}

}  // namespace ag
}  // namespace mkccl
