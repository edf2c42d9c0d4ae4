// fp8 GEMM kernels with per-tensor scales: 128 x 256 (cluster 1 or 2) and 128 x 128 tiles.
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm/gemm_launch.cuh"
#include "base/log.h"

namespace mkccl {

mkcclResult_t gemmFp8TensorLaunch(const Fp8Problem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                                  cudaStream_t stream) {
  using Fast256 = GemmLauncher<GemmCfg<dev::E4m3, 256, EpilogueTmaStore>, Fp8TensorOp>;
  using Fast128 = GemmLauncher<GemmCfg<dev::E4m3, 128, EpilogueTmaStore>, Fp8TensorOp>;
  int maxClusters2 = 0;
  MKCCL_CHECK(Fast256::prepare(dev, info.smCount, 2, &maxClusters2));
  const GemmPlan plan = gemmFp8Plan(p, v, info.smCount, maxClusters2);
  GemmArgs g;
  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(gemmFp8Prepare(p, plan, &g, &mapA, &mapB, &mapC));
  const Fp8Params params{p.scaleA, p.scaleW, (p.K + 127) / 128};
  MKCCL_TRACE("mkcclGemmFp8 %lldx%lldx%lld tensor scales: tile 128x%d cluster %d, %d CTAs", (long long)p.M,
              (long long)p.N, (long long)p.K, plan.bn, plan.clusterSize, plan.ctas);
  if (plan.bn == 256) return Fast256::launch(mapA, mapB, mapC, g, params, plan.ctas, stream);
  int unused = 0;
  MKCCL_CHECK(Fast128::prepare(dev, info.smCount, plan.clusterSize, &unused));
  return Fast128::launch(mapA, mapB, mapC, g, params, plan.ctas, stream);
}

}  // namespace mkccl
