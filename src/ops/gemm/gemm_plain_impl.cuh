// Body of plainGemm<In> (gemm_plain.cuh), included by the per-type instantiation files.
#pragma once
#include <string.h>
#include "kernels/gemm/gemm_config.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "ops/gemm/gemm_plain.cuh"
#include "ops/gemm/split_k_model.h"
#include "ops/gemm/split_k_workspace.h"
#include "kernels/gemm/split_k.cuh"
#include "base/log.h"

namespace mkccl {

template <class In>
mkcclResult_t plainGemm(const GemmProblem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                        cudaStream_t stream) {
  using Fast256 = GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, PlainGemmOp>;
  using Fast128 = GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, PlainGemmOp>;
  using Simple = GemmLauncher<GemmCfg<In, 128, EpilogueRegStore>, PlainGemmOp>;
  using SplitK = GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, SplitKGemmOp>;

  int maxClusters2 = 0;
  MKCCL_CHECK(Fast256::prepare(dev, info.smCount, 2, &maxClusters2));
  GemmPlan plan = gemmPlanFor(p.M, p.N, p.K, v, info.smCount, maxClusters2);
  SplitKWorkspace ws;
  if (p.splitK != 1 && !plan.simple) {
    // The workspace exists from the stream's first call outside capture (split_k_workspace.h).
    MKCCL_CHECK(splitKWorkspace(dev, info.smCount, stream, &ws));
    plan = gemmSplitKPlan(plan, p.M, p.N, p.K, v, p.splitK, info.smCount, ws.maxUnits);
  }

  GemmArgs g;
  memset(&g, 0, sizeof(g));
  gemmArgsFor(plan, p.M, p.N, p.K, &g);
  g.outType = p.outType;
  g.C = p.C;
  g.ldc = p.N;
  g.waitTimeoutNs = kGemmWaitTimeoutNs;
  MKCCL_CHECK(gemmFaultWord(&g.fault));

  alignas(64) CUtensorMap mapA, mapB, mapC;
  memset(&mapC, 0, sizeof(mapC));
  MKCCL_CHECK(encodeTileMap(&mapA, p.A, p.inType, p.M, p.K, p.K, 128));
  MKCCL_CHECK(encodeTileMap(&mapB, p.W, p.inType, p.N, p.K, p.K, static_cast<uint32_t>(plan.bn / plan.clusterSize)));
  if (!plan.simple) MKCCL_CHECK(encodeTileMap(&mapC, p.C, p.outType, p.M, p.N, p.N, 64));

  MKCCL_TRACE("mkcclGemm %lldx%lldx%lld: %s tile 128x%d cluster %d, %d CTAs, %d k-blocks, split K %d",
              (long long)p.M, (long long)p.N, (long long)p.K, plan.simple ? "simple" : "fast", plan.bn,
              plan.clusterSize, plan.ctas, g.kBlocks, plan.splits);
  int unused = 0;
  if (plan.simple) {
    MKCCL_CHECK(Simple::prepare(dev, info.smCount, 1, &unused));
    return Simple::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream);
  }
  if (plan.splits > 1) {
    MKCCL_CHECK(SplitK::prepare(dev, info.smCount, 1, &unused));
    const SplitKParams sp{ws.partials, ws.counters, plan.splits};
    return SplitK::launch(mapA, mapB, mapC, g, sp, plan.ctas, stream);
  }
  if (plan.bn == 256) return Fast256::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream);
  MKCCL_CHECK(Fast128::prepare(dev, info.smCount, plan.clusterSize, &unused));
  return Fast128::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream);
}

// Loads (and opts into shared memory) every plain GEMM kernel of this input type on `dev`.
template <class In>
mkcclResult_t plainGemmPreload(int dev, int smCount) {
  int unused = 0;
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, PlainGemmOp>::prepare(dev, smCount, 2, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, PlainGemmOp>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, SplitKGemmOp>::prepare(dev, smCount, 1, &unused)));
  return GemmLauncher<GemmCfg<In, 128, EpilogueRegStore>, PlainGemmOp>::prepare(dev, smCount, 1, &unused);
}

}  // namespace mkccl
