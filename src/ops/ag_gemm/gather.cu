// Launch of the sequential plan's AllGather (kernels/ag_gemm/gather.cuh).
#include "kernels/ag_gemm/gather.cuh"
#include "ops/ag_gemm/host.h"
#include "ops/gemm/kernel_launch.h"
#include "base/check.h"

namespace mkccl {
namespace ag {

mkcclResult_t gatherPreload(int dev) {
  int unused = 0;
  return persistentPrepare(reinterpret_cast<const void*>(&gatherKernel), dev, 1, kGatherThreads, 0, 1, &unused);
}

mkcclResult_t gatherLaunch(const PushArgs& p, int dev, int ctas, cudaStream_t stream) {
  if (ctas < 1) return setError(mkcclInternalError, "AllGather+GEMM gather: %d CTAs", ctas);
  return persistentLaunch(&gatherKernel, ctas, kGatherThreads, 0, 1, stream, p);
}

}  // namespace ag
}  // namespace mkccl
