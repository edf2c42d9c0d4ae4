// Body of plainGemm<In> (gemm_plain.cuh), included by the per-type instantiation files.
#pragma once
#include <stdint.h>
#include <string.h>
#include "kernels/gemm/gemm_config.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "ops/gemm/gemm_plain.cuh"
#include "ops/gemm/gemm_narrow.h"
#include "ops/gemm/gemm_pack.h"
#include "ops/gemm/gemm_skinny.h"
#include "ops/gemm/split_k_model.h"
#include "ops/gemm/stream_k_model.h"
#include "ops/gemm/split_k_workspace.h"
#include "kernels/gemm/split_k.cuh"
#include "base/log.h"

namespace mkccl {

template <class In>
mkcclResult_t plainGemm(const GemmProblem& p, GemmVariant v, int dev, const GemmDeviceInfo& info,
                        cudaStream_t stream) {
  using Fast256 = GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, PlainGemmOp>;
  using Fast128 = GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, PlainGemmOp>;
  using Fast192 = GemmLauncher<GemmCfg<In, 192, EpilogueTmaStore>, PlainGemmOp>;
  using Simple = GemmLauncher<GemmCfg<In, 128, EpilogueRegStore>, PlainGemmOp>;
  using SplitK = GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, SplitKGemmOp>;
  using StreamK256 = GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, SplitKGemmOp>;
  using SplitK192 = GemmLauncher<GemmCfg<In, 192, EpilogueTmaStore>, SplitKGemmOp>;
  using SplitK64 = GemmLauncher<GemmCfg<In, kSplitKNarrowWidth, EpilogueTmaStore>, SplitKGemmOp>;

  // Decode-sized M on the skinny kernel (forced, or auto's rule: gemm_skinny.h); forced above its
  // 32 rows, auto.
  if (gemmSkinnyWanted(p, v, info)) {
    MKCCL_TRACE("mkcclGemm %lldx%lldx%lld: skinny kernel", (long long)p.M, (long long)p.N, (long long)p.K);
    return skinnyGemm<In>(p, stream);
  }
  if (v == GemmVariant::Skinny) v = GemmVariant::Auto;

  int maxClusters2 = 0;
  MKCCL_CHECK(Fast256::prepare(dev, info.smCount, 2, &maxClusters2));
  const int64_t lda = p.lda ? p.lda : p.K, ldw = p.ldw ? p.ldw : p.K, ldc = p.ldc ? p.ldc : p.N;
  // Operands whose rows are off a multiple of 128 bytes and stay so (not packed, below): the
  // planner weighs the tiles by their efficiencies on such rows.
  const bool aligned16 = ((reinterpret_cast<uintptr_t>(p.A) | reinterpret_cast<uintptr_t>(p.W)) & 15u) == 0;
  const bool packAsked =
      aligned16 && lda == p.K && ldw == p.K && gemmShouldPack(p.M, p.N, p.K, v == GemmVariant::Simple, p.packK);
  const bool misalignedRows = !packAsked && ((lda * 2) % 128 != 0 || (ldw * 2) % 128 != 0);
  const GemmTileRates& rates = gemmTileRatesFor(info.hbmPeakBytesPerUs, misalignedRows);
  GemmPlan plan = gemmPlainPreferCluster(gemmPlanFor(p.M, p.N, p.K, v, info.smCount, maxClusters2, &rates, true), p.M,
                                         p.N, v, info.smCount, maxClusters2);
  SplitKWorkspace ws;
  const GemmPlan split = gemmSplitKPlan(plan, p.M, p.N, p.K, v, p.splitK, info.smCount, splitKUnits(info.smCount),
                                        splitKRatesFor(info.hbmPeakBytesPerUs));
  if (split.splits > 1) {
    // The workspace exists from the stream's first split-K call outside capture; without it (a
    // capture) the unsplit plan runs (split_k_workspace.h).
    MKCCL_CHECK(splitKWorkspace(dev, info.smCount, stream, &ws));
    if (ws.maxUnits > 0) plan = split;
  } else {
    if (split.bn != plan.bn) plan = split;  // whole 128 x 64 tiles at decode M (split_k_model.h)
    // A partly empty last wave (stream_k_model.h), on the same workspace: the split remainder
    // (gemm.stream_k auto or split), or stream-K's ranges when forced (on).
    const GemmPlan sk = p.streamK == 2 ? gemmStreamKPlan(plan, p.M, p.N, p.K, v, p.streamK, info.smCount,
                                                         splitKSlotUnits(info.smCount))
                                       : gemmSplitRemainderPlan(plan, p.M, p.N, p.K, v, p.streamK, info.smCount,
                                                                splitKSlotUnits(info.smCount),
                                                                splitKUnits(info.smCount), kSplitKMaxRows, rates,
                                                                misalignedRows);
    if (sk.splits != 1) {
      MKCCL_CHECK(splitKWorkspace(dev, info.smCount, stream, &ws));
      if (ws.slotUnits > 0) plan = sk;
    }
  }

  // Clusters along N sharing the A tile (gemm.cluster_n; auto: none yet): whole tiles, full A boxes.
  if (p.clusterN > 1 && plan.splits == 1 && !plan.simple && p.M >= 128) {
    int maxClusters = 0;  // every plain kernel holds one CTA per SM: the 128 x 256 one's count serves
    MKCCL_CHECK(Fast256::prepare(dev, info.smCount, plan.clusterSize * p.clusterN, &maxClusters));
    plan = gemmWithClusterN(plan, p.M, p.N, p.clusterN, maxClusters);
  }

  GemmArgs g;
  memset(&g, 0, sizeof(g));
  gemmArgsFor(plan, p.M, p.N, p.K, &g);
  g.outType = p.outType;
  g.C = p.C;
  g.ldc = ldc;
  g.bias = p.bias;
  g.biasType = p.biasType;
  g.waitTimeoutNs = kGemmWaitTimeoutNs;
  MKCCL_CHECK(gemmFaultWord(&g.fault));

  // On request (gemm.pack_k=on), rows off a multiple of 128 bytes are copied to a pitch that is
  // (gemm_pack.h).
  const void* opA = p.A;
  const void* opW = p.W;
  int64_t ldk = p.K, ldA = lda, ldW = ldw;
  // (Strided operands are not packed: their pitch is the caller's.)
  if (packAsked && !plan.simple) {
    const void* Ap = nullptr;
    const void* Wp = nullptr;
    MKCCL_CHECK(gemmPackOperands(p.A, p.W, p.M, p.N, p.K, dev, stream, &Ap, &Wp));
    if (Ap != nullptr) {
      opA = Ap;
      opW = Wp;
      ldk = gemmPackedPitch(p.K);
      ldA = ldW = ldk;
    }
  }

  alignas(64) CUtensorMap mapA, mapB, mapC;
  memset(&mapC, 0, sizeof(mapC));
  // M < 128: an A box of M rows (rounded up to the 8-row swizzle atom) instead of 128 rows mostly
  // zero-filled; TMA's zero fill of rows past M measured slow (M = 16 took 1.34x the time of M = 128
  // on the same 64 tiles of 8192 x 8192, H100).
  // With clusters along N each CTA loads 128 / clusterN rows of the A tile (M >= 128: full boxes).
  const int aRows = p.M < 128 ? static_cast<int>((p.M + 7) / 8 * 8) : 128;
  g.aBoxRows = aRows < 128 ? aRows : 0;
  MKCCL_CHECK(encodeTileMap(&mapA, opA, p.inType, p.M, p.K, ldA, static_cast<uint32_t>(aRows / plan.clusterN)));
  MKCCL_CHECK(encodeTileMap(&mapB, opW, p.inType, p.N, p.K, ldW, static_cast<uint32_t>(plan.bn / plan.clusterSize)));
  if (!plan.simple) MKCCL_CHECK(encodeTileMap(&mapC, p.C, p.outType, p.M, p.N, ldc, 64));

  MKCCL_TRACE("mkcclGemm %lldx%lldx%lld: %s tile 128x%d cluster %dx%d, %d CTAs, %d k-blocks, split K %d%s",
              (long long)p.M, (long long)p.N, (long long)p.K, plan.simple ? "simple" : "fast", plan.bn,
              plan.clusterSize, plan.clusterN, plan.ctas, g.kBlocks, plan.splits,
              plan.splits == 0 ? " (stream-K)" : plan.dpTiles > 0 ? " (split remainder)" : "");
  if (ldk != p.K) MKCCL_TRACE("mkcclGemm: A and W packed to a pitch of %lld elements", (long long)ldk);
  int unused = 0;
  if (plan.simple) {
    MKCCL_CHECK(Simple::prepare(dev, info.smCount, 1, &unused));
    return Simple::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream, p.pdl);
  }
  if (plan.splits != 1) {
    SplitKParams sp{ws.partials, ws.counters, plan.splits};
    sp.dpTiles = plan.dpTiles;
    sp.skTiles = plan.skTiles;
    sp.ctas = plan.ctas;
    if (plan.bn == 256) {
      MKCCL_CHECK(StreamK256::prepare(dev, info.smCount, 1, &unused));
      return StreamK256::launch(mapA, mapB, mapC, g, sp, plan.ctas, stream, p.pdl);
    }
    if (plan.bn == 192) {
      MKCCL_CHECK(SplitK192::prepare(dev, info.smCount, 1, &unused));
      return SplitK192::launch(mapA, mapB, mapC, g, sp, plan.ctas, stream, p.pdl);
    }
    if (plan.bn == kSplitKNarrowWidth) {
      MKCCL_CHECK(SplitK64::prepare(dev, info.smCount, 1, &unused));
      return SplitK64::launch(mapA, mapB, mapC, g, sp, plan.ctas, stream, p.pdl);
    }
    MKCCL_CHECK(SplitK::prepare(dev, info.smCount, 1, &unused));
    return SplitK::launch(mapA, mapB, mapC, g, sp, plan.ctas, stream, p.pdl);
  }
  if (plan.bn == 256) return Fast256::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream, p.pdl);
  if (plan.bn != 128 && plan.bn != 192)
    return plainGemmNarrow<In>(NarrowLaunch{plan.bn, &mapA, &mapB, &mapC, &g, plan.ctas, dev, info.smCount, stream, p.pdl});
  if (plan.bn == 192) {
    MKCCL_CHECK(Fast192::prepare(dev, info.smCount, g.clusterSize, &unused));
    return Fast192::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream, p.pdl);
  }
  MKCCL_CHECK(Fast128::prepare(dev, info.smCount, g.clusterSize, &unused));
  return Fast128::launch(mapA, mapB, mapC, g, PlainGemmOp::Params{}, plan.ctas, stream, p.pdl);
}

// Loads (and opts into shared memory) every plain GEMM kernel of this input type on `dev`.
template <class In>
mkcclResult_t plainGemmPreload(int dev, int smCount) {
  int unused = 0;
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, PlainGemmOp>::prepare(dev, smCount, 2, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, PlainGemmOp>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 192, EpilogueTmaStore>, PlainGemmOp>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, SplitKGemmOp>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, SplitKGemmOp>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, 192, EpilogueTmaStore>, SplitKGemmOp>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GemmLauncher<GemmCfg<In, kSplitKNarrowWidth, EpilogueTmaStore>, SplitKGemmOp>::prepare(dev, smCount, 1,
                                                                                                      &unused)));
  return GemmLauncher<GemmCfg<In, 128, EpilogueRegStore>, PlainGemmOp>::prepare(dev, smCount, 1, &unused);
}

}  // namespace mkccl
