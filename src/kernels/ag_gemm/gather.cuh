// The sequential plan's AllGather: whole CTAs run the fused kernel's communication teams
// (push.cuh: same layout, counters and protocol, so ranks that chose different plans still agree),
// then wait for every peer's shard, so the GEMM that follows on the stream reads a complete region.
#pragma once
#include <stdint.h>
#include "kernels/ag_gemm/push.cuh"

namespace mkccl {
namespace ag {

constexpr int kGatherThreads = 512;
constexpr int kGatherUnit = 4;  // slices per claim

__global__ void __launch_bounds__(kGatherThreads) gatherKernel(const __grid_constant__ PushArgs p) {
  const Team team{threadIdx.x, blockDim.x, 1};
  if (!commTeam(p, team, blockIdx.x == 0, kGatherUnit)) return;
  // gatherOut already waited for every peer slice when it copied them out (not in place).
  if (p.gathered == nullptr || p.direct) waitArrivals(p, team, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

}  // namespace ag
}  // namespace mkccl
