// Launch plumbing shared by every persistent kernel of the GEMM family (the plain GEMM and the fused
// ops' kernels): the shared-memory opt-in, how many clusters fit, and the cluster launch.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <utility>
#include "base/check.h"

namespace mkccl {

// Opts `kernel` into `smemBytes` of dynamic shared memory on device `dev` (once per kernel and
// device) and sets *maxClusters to how many clusters of `clusterSize` (1 to 8) CTAs of `threads`
// threads fit on the GPU at once (for 1: smCount). A cluster occupancy the driver cannot tell counts
// as 0: the planners then use single CTAs. Cached; safe from several threads.
mkcclResult_t persistentPrepare(const void* kernel, int dev, int smCount, int threads, size_t smemBytes,
                                int clusterSize, int* maxClusters);

// A launch config of `ctas` blocks (clusters of `clusterSize` along x when > 1), launched as a
// programmatic dependent of the stream's previous kernel when `pdl` (the kernel must then call
// dev::gridDepWait before touching memory that kernel writes: kernels/device/pdl.cuh). `attrs`
// holds the attributes and must outlive the config.
inline cudaLaunchConfig_t persistentConfig(int ctas, int threads, size_t smemBytes, int clusterSize,
                                           cudaStream_t stream, cudaLaunchAttribute (&attrs)[2], bool pdl = false) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smemBytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  if (clusterSize > 1) {
    cudaLaunchAttribute& a = attrs[cfg.numAttrs++];
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = static_cast<unsigned>(clusterSize);
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
  }
  if (pdl) {
    cudaLaunchAttribute& a = attrs[cfg.numAttrs++];
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
  }
  return cfg;
}

// Launches `ctas` blocks of `kernel` (clusters of `clusterSize` along x) with `args`, as a
// programmatic dependent when `pdl` (persistentConfig).
template <typename... KernelArgs, typename... Args>
mkcclResult_t persistentLaunchPdl(bool pdl, void (*kernel)(KernelArgs...), int ctas, int threads, size_t smemBytes,
                                  int clusterSize, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t cfg = persistentConfig(ctas, threads, smemBytes, clusterSize, stream, attrs, pdl);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  return mkcclSuccess;
}
template <typename... KernelArgs, typename... Args>
mkcclResult_t persistentLaunch(void (*kernel)(KernelArgs...), int ctas, int threads, size_t smemBytes, int clusterSize,
                               cudaStream_t stream, Args&&... args) {
  return persistentLaunchPdl(false, kernel, ctas, threads, smemBytes, clusterSize, stream, std::forward<Args>(args)...);
}

}  // namespace mkccl
