// Host launch of persistentGemmKernel<Cfg, Op>: shared-memory opt-in, cluster occupancy, grid.
// Fused ops call GemmLauncher<TheirCfg, TheirOp>::launch with their own tensor maps and Params.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <mutex>
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_kernel.cuh"
#include "runtime/check.h"

namespace mkccl {

template <class Cfg, class Op>
struct GemmLauncher {
  static constexpr auto kernel() { return &persistentGemmKernel<Cfg, Op>; }

  // Opts the kernel into its shared memory on device `dev` (once) and returns how many clusters
  // of `clusterSize` CTAs fit on the GPU at once (for clusterSize 1: CTAs, i.e. smCount).
  static mkcclResult_t prepare(int dev, int smCount, int clusterSize, int* maxClusters) {
    // One lock per device: a driver call here may load the kernel lazily, which waits for the
    // device to go idle; ranks on other devices of this process must not queue behind it.
    static std::mutex mu[64];
    static int cache[64][3];  // [dev][cs]: 0 unknown, else count + 1
    if (dev < 0 || dev >= 64 || clusterSize < 1 || clusterSize > 2)
      return setError(mkcclInternalError, "gemm launch: device %d / cluster %d", dev, clusterSize);
    std::lock_guard<std::mutex> lock(mu[dev]);
    if (cache[dev][0] == 0) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(Cfg::kSmemBytes)));
      cache[dev][0] = 1;
    }
    if (cache[dev][clusterSize] == 0) {
      int n = smCount;
      if (clusterSize > 1) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(static_cast<unsigned>(clusterSize * smCount));
        cfg.blockDim = dim3(Cfg::kThreads);
        cfg.dynamicSmemBytes = Cfg::kSmemBytes;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = static_cast<unsigned>(clusterSize);
        attr.val.clusterDim.y = 1;
        attr.val.clusterDim.z = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel(), &cfg));
      }
      cache[dev][clusterSize] = n + 1;
    }
    *maxClusters = cache[dev][clusterSize] - 1;
    return mkcclSuccess;
  }

  // Launches g.nCommCtas + computeCtas blocks (computeCtas a multiple of g.clusterSize, and no
  // more than fit at once: the kernel is persistent). prepare() must have run on this device.
  static mkcclResult_t launch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                              const GemmArgs& g, const typename Op::Params& op, int computeCtas,
                              cudaStream_t stream) {
    if (computeCtas < g.clusterSize || computeCtas % g.clusterSize != 0 || g.nCommCtas % g.clusterSize != 0)
      return setError(mkcclInternalError, "gemm launch: %d compute CTAs, %d comm CTAs, cluster %d", computeCtas,
                      g.nCommCtas, g.clusterSize);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(g.nCommCtas + computeCtas));
    cfg.blockDim = dim3(Cfg::kThreads);
    cfg.dynamicSmemBytes = Cfg::kSmemBytes;
    cfg.stream = stream;
    cudaLaunchAttribute attr;
    if (g.clusterSize > 1) {
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = static_cast<unsigned>(g.clusterSize);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
    }
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel(), mapA, mapB, mapC, g, op));
    return mkcclSuccess;
  }
};

}  // namespace mkccl
