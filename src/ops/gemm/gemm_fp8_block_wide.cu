// fp8 GEMM kernel with DeepSeek-V3 block scales on 128 x 192 tiles (kernels/gemm/fp8_op.cuh).
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm/gemm_launch.cuh"

namespace mkccl {

mkcclResult_t gemmFp8BlockWideLaunch(const CUtensorMap& mapA, const CUtensorMap& mapB, const CUtensorMap& mapC,
                                     const GemmArgs& g, const Fp8Params& params, const GemmPlan& plan, int dev,
                                     const GemmDeviceInfo& info, GemmVariant v, cudaStream_t stream) {
  // EXPERIMENT: 256x1 runs the two-halves overlapped kernel (cluster as planned).
  using Wide = GemmLauncher<Fp8BlockCfg<192>, Fp8BlockOp<1, false>>;
  using WideHalves = GemmLauncher<Fp8BlockCfg<192>, Fp8BlockOp<2, true>>;
  int unused = 0;
  if (v == GemmVariant::F256C1) {
    MKCCL_CHECK(WideHalves::prepare(dev, info.smCount, plan.clusterSize, &unused));
    return WideHalves::launch(mapA, mapB, mapC, g, params, plan.ctas, stream);
  }
  MKCCL_CHECK(Wide::prepare(dev, info.smCount, plan.clusterSize, &unused));
  return Wide::launch(mapA, mapB, mapC, g, params, plan.ctas, stream);
}

}  // namespace mkccl
