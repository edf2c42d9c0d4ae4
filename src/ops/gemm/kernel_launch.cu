// persistentPrepare (kernel_launch.h).
#include "ops/gemm/kernel_launch.h"
#include <map>
#include <mutex>
#include <tuple>
#include "base/log.h"

namespace mkccl {

namespace {
constexpr int kMaxDevices = 64;
// One lock per device: a driver call here may load the kernel lazily, which waits for the device to
// go idle; ranks on other devices of this process must not queue behind it.
std::mutex gMu[kMaxDevices];
// (kernel, cluster size) -> clusters that fit + 1 (cluster size 0: the shared-memory opt-in is done).
std::map<std::pair<const void*, int>, int> gCache[kMaxDevices];
}  // namespace

mkcclResult_t persistentPrepare(const void* kernel, int dev, int smCount, int threads, size_t smemBytes,
                                int clusterSize, int* maxClusters) {
  if (dev < 0 || dev >= kMaxDevices || clusterSize < 1 || clusterSize > 8)
    return setError(mkcclInternalError, "kernel launch: device %d / cluster %d", dev, clusterSize);
  std::lock_guard<std::mutex> lock(gMu[dev]);
  std::map<std::pair<const void*, int>, int>& cache = gCache[dev];
  if (cache[{kernel, 0}] == 0) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smemBytes)));
    cache[{kernel, 0}] = 1;
  }
  int& entry = cache[{kernel, clusterSize}];
  if (entry == 0) {
    int n = smCount;
    if (clusterSize > 1) {
      cudaLaunchAttribute attrs[2];
      const cudaLaunchConfig_t cfg =
          persistentConfig(clusterSize * smCount, threads, smemBytes, clusterSize, nullptr, attrs);
      if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
        cudaGetLastError();
        MKCCL_INFO("device %d: clusters of %d are not available for a GEMM kernel: single CTAs", dev, clusterSize);
        n = 0;
      }
    }
    entry = n + 1;
  }
  *maxClusters = entry - 1;
  return mkcclSuccess;
}

}  // namespace mkccl
