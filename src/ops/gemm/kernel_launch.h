// Launch plumbing shared by every persistent kernel of the GEMM family (the plain GEMM and the fused
// ops' kernels): the shared-memory opt-in, how many clusters fit, and the cluster launch.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <utility>
#include "base/check.h"

namespace mkccl {

// Opts `kernel` into `smemBytes` of dynamic shared memory on device `dev` (once per kernel and
// device) and sets *maxClusters to how many clusters of `clusterSize` (1 or 2) CTAs of `threads`
// threads fit on the GPU at once (for 1: smCount). A cluster occupancy the driver cannot tell counts
// as 0: the planners then use single CTAs. Cached; safe from several threads.
mkcclResult_t persistentPrepare(const void* kernel, int dev, int smCount, int threads, size_t smemBytes,
                                int clusterSize, int* maxClusters);

// A launch config of `ctas` blocks (clusters of `clusterSize` along x when > 1; `attr` holds the
// cluster attribute and must outlive the config).
inline cudaLaunchConfig_t persistentConfig(int ctas, int threads, size_t smemBytes, int clusterSize,
                                           cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smemBytes;
  cfg.stream = stream;
  if (clusterSize > 1) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = static_cast<unsigned>(clusterSize);
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

// Launches `ctas` blocks of `kernel` (clusters of `clusterSize` along x) with `args`.
template <typename... KernelArgs, typename... Args>
mkcclResult_t persistentLaunch(void (*kernel)(KernelArgs...), int ctas, int threads, size_t smemBytes, int clusterSize,
                               cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = persistentConfig(ctas, threads, smemBytes, clusterSize, stream, &attr);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  return mkcclSuccess;
}

}  // namespace mkccl
