// fp8 GEMM kernels with DeepSeek-V3 block scales (kernels/gemm/fp8_op.cuh): the plan, and the
// 128 x 128 kernel (two partial sets in flight); the 128 x 192 one is in gemm_fp8_block_wide.cu
// (one file per kernel, so that they compile in parallel).
#include "kernels/device/wgmma_fp8.cuh"
#include "kernels/gemm/fp8_op.cuh"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm/gemm_launch.cuh"
#include "base/log.h"

namespace mkccl {

mkcclResult_t gemmFp8BlockLaunch(const Fp8Problem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                                 cudaStream_t stream) {
  using Block128 = GemmLauncher<Fp8BlockCfg<128>, Fp8BlockOp<1>>;
  int maxClusters2 = 0;
  MKCCL_CHECK(Block128::prepare(dev, info.smCount, 2, &maxClusters2));
  const GemmPlan plan = gemmFp8Plan(p, v, info.smCount, maxClusters2);
  GemmArgs g;
  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(gemmFp8Prepare(p, plan, &g, &mapA, &mapB, &mapC));
  const Fp8Params params{p.scaleA, p.scaleW, (p.K + 127) / 128};
  MKCCL_TRACE("mkcclGemmFp8 %lldx%lldx%lld block scales: tile 128x%d cluster %d, %d CTAs", (long long)p.M,
              (long long)p.N, (long long)p.K, plan.bn, plan.clusterSize, plan.ctas);
  if (plan.bn == 192) return gemmFp8BlockWideLaunch(mapA, mapB, mapC, g, params, plan, dev, info, stream);
  int unused = 0;
  MKCCL_CHECK(Block128::prepare(dev, info.smCount, plan.clusterSize, &unused));
  return Block128::launch(mapA, mapB, mapC, g, params, plan.ctas, stream);
}

}  // namespace mkccl
