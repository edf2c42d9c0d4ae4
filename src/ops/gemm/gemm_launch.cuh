// Host launch of persistentGemmKernel<Cfg, Op>: shared-memory opt-in, cluster occupancy, grid.
// Fused ops call GemmLauncher<TheirCfg, TheirOp>::launch with their own tensor maps and Params.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_kernel.cuh"
#include "ops/gemm/kernel_launch.h"
#include "base/check.h"

namespace mkccl {

template <class Cfg, class Op>
struct GemmLauncher {
  static constexpr auto kernel() { return &persistentGemmKernel<Cfg, Op>; }

  // Opts the kernel into its shared memory on device `dev` (once) and returns how many clusters
  // of `clusterSize` CTAs fit on the GPU at once (for clusterSize 1: CTAs, i.e. smCount).
  static mkcclResult_t prepare(int dev, int smCount, int clusterSize, int* maxClusters) {
    return persistentPrepare(reinterpret_cast<const void*>(kernel()), dev, smCount, Cfg::kThreads, Cfg::kSmemBytes,
                             clusterSize, maxClusters);
  }

  // Launches g.nCommCtas + computeCtas blocks (computeCtas a multiple of g.clusterSize, and no
  // more than fit at once: the kernel is persistent). prepare() must have run on this device.
  // pdl: as a programmatic dependent of the stream's previous kernel, for ops built for it
  // (Op::kPdl; ignored otherwise).
  static mkcclResult_t launch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                              const GemmArgs& g, const typename Op::Params& op, int computeCtas,
                              cudaStream_t stream, bool pdl = false) {
    if (computeCtas < g.clusterSize || computeCtas % g.clusterSize != 0 || g.nCommCtas % g.clusterSize != 0)
      return setError(mkcclInternalError, "gemm launch: %d compute CTAs, %d comm CTAs, cluster %d", computeCtas,
                      g.nCommCtas, g.clusterSize);
    return persistentLaunchPdl(pdl && Op::kPdl, kernel(), g.nCommCtas + computeCtas, Cfg::kThreads, Cfg::kSmemBytes,
                               g.clusterSize, stream, mapA, mapB, mapC, g, op);
  }
};

}  // namespace mkccl
