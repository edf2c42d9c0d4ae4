// Body of fusedPlan<In> / fusedLaunch<In> (host.h), included by the per-type files.
#pragma once
#include <string.h>
#include <algorithm>
#include <type_traits>
#include "kernels/ag_gemm/op.cuh"
#include "ops/ag_gemm/host.h"
#include "ops/ag_gemm/model.h"
#include "kernels/gemm/gemm_config.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm/kernel_launch.h"
#include "base/check.h"

namespace mkccl {
namespace ag {

// The debugging variant (register epilogue) is not built for the fused kernel: 128 x 128 without
// a cluster is the closest; nor are 128 x 192 tiles (gemmVariantWide) for 16-bit inputs.
inline GemmVariant fusedVariant(GemmVariant v) {
  return v == GemmVariant::Simple ? GemmVariant::F128C1 : gemmVariantWide(v);
}

// The kernels of an input type: two tile widths (the wide one, and 128) with their configuration
// and op, and the planner that picks between them. AllGatherGemmOp on 128 x 256 / 128 x 128 tiles;
// e4m3 specialises it (launch_fp8.cu: the fp8 mainloop, the scales in the parameters), and so does
// the block-scaled e4m3 tag Fp8Block (launch_fp8_block.cu: 128 x 192 / 128 x 128), declared there
// before their instantiations.
template <class In>
struct FusedOpOf {
  using WideCfg = GemmCfg<In, 256, EpilogueTmaStore>;
  using NarrowCfg = GemmCfg<In, 128, EpilogueTmaStore>;
  using WideOp = AllGatherGemmOp;
  using NarrowOp = AllGatherGemmOp;
  static void scales(FusedParams&, const FusedCall&) {}
  // v: fusedVariant's.
  static GemmPlan plan(const FusedCall& c, GemmVariant v, int ctas, int clusters2) {
    return gemmPlanFor(c.M, c.N, c.K, v, ctas, clusters2);
  }
};

template <class In>
using FusedWide = GemmLauncher<typename FusedOpOf<In>::WideCfg, typename FusedOpOf<In>::WideOp>;
template <class In>
using FusedNarrow = GemmLauncher<typename FusedOpOf<In>::NarrowCfg, typename FusedOpOf<In>::NarrowOp>;

// Comm CTAs (blocks [0, n) of the launch, whole clusters): chooseFused (model.h).
// Clusters of 2 only when gemm.variant asks for them: the fused kernel's 2-CTA path has not
// been timed on a GPU yet.
template <class In>
mkcclResult_t fusedPlan(const FusedCall& c, FusedPlan* out) {
  int maxClusters2 = 0;
  MKCCL_CHECK(FusedWide<In>::prepare(c.dev, c.smCount, 2, &maxClusters2));
  const GemmVariant v = fusedVariant(c.variant);
  out->full = FusedOpOf<In>::plan(c, v, c.smCount, maxClusters2);
  const bool clusters = v == GemmVariant::F256C2 || v == GemmVariant::F128C2;
  const int clusters2 = clusters ? maxClusters2 : 0;
  auto planFor = [&](int taken, GemmPlan* g) {
    *g = FusedOpOf<In>::plan(c, v, c.smCount - taken, std::max(0, clusters2 - taken / 2));
    int idle = c.smCount - taken - g->ctas;
    if (g->clusterSize == 2) idle = std::min(idle, 2 * (clusters2 - taken / 2 - g->ctas / 2));
    return std::max(0, std::min(kMaxFreeCommCtas, idle) / 2 * 2);
  };
  const FusedChoice f =
      chooseFused(c.push.L, c.N, c.K, c.smCount, c.commCtas, c.push.gathered != nullptr, planFor, kCtaPushGBps);
  out->gemm = f.gemm;
  out->commCtas = f.commCtas;
  out->sideTeams = f.side ? 1 : 0;
  out->commFromBudget = f.fromBudget;
  out->est = f.est;
  return mkcclSuccess;
}

template <class In>
mkcclResult_t fusedPreload(int dev, int smCount) {
  int unused = 0;
  MKCCL_CHECK(FusedWide<In>::prepare(dev, smCount, 2, &unused));
  return FusedNarrow<In>::prepare(dev, smCount, 1, &unused);
}

template <class In>
mkcclResult_t fusedLaunch(const FusedCall& c, const FusedPlan& plan, cudaStream_t stream) {
  const GemmPlan& gp = plan.gemm;
  const Layout& L = c.push.L;
  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, c.push.region[c.push.lme], c.type, c.M, c.K, c.K, 128));
  MKCCL_CHECK(encodeTileMap(&mapB, c.W, c.type, c.N, c.K, c.ldw, static_cast<uint32_t>(gp.bn / gp.clusterSize)));
  MKCCL_CHECK(encodeTileMap(&mapC, c.C, c.outType, c.M, c.N, c.ldc, 64));

  typename FusedOpOf<In>::WideOp::Params p;  // the narrow op's too
  memset(&p, 0, sizeof(p));
  FusedOpOf<In>::scales(p, c);
  MKCCL_CHECK(encodeTileMap(&p.mapOwn, c.A, c.type, L.m, c.K, c.K, 128));
  p.push = c.push;
  p.order = tileOrderFor(L, gp.clusterSize, c.push.ce != 0 && c.ceRing != 0, c.orderNodeRanks);
  p.sideTeams = plan.sideTeams;
  p.unitCta = 4;   // 256 KiB per claim: the fence per claim stays small
  p.unitSide = 1;  // 64 KiB: a side team is slow, many of them share the shard

  GemmArgs g;
  memset(&g, 0, sizeof(g));
  gemmArgsFor(gp, c.M, c.N, c.K, &g);
  g.nCommCtas = plan.commCtas;
  g.outType = c.outType;
  g.C = c.C;
  g.ldc = c.ldc;
  g.bias = c.bias;  // added by the TMA-store epilogue (kernels/gemm/epilogue.cuh)
  g.biasType = c.biasType;
  g.waitTimeoutNs = c.timeoutNs + 30ull * 1000 * 1000 * 1000;  // longer than any wait of the comm
  MKCCL_CHECK(gemmFaultWord(&g.fault));

  static_assert(std::is_same<typename FusedOpOf<In>::WideOp::Params, typename FusedOpOf<In>::NarrowOp::Params>::value,
                "one parameter struct for both widths");
  if (gp.bn == FusedOpOf<In>::WideCfg::BN) return FusedWide<In>::launch(mapA, mapB, mapC, g, p, gp.ctas, stream);
  if (gp.bn != 128) return setError(mkcclInternalError, "AllGather+GEMM: no fused kernel for tile width %d", gp.bn);
  int unused = 0;
  MKCCL_CHECK(FusedNarrow<In>::prepare(c.dev, c.smCount, gp.clusterSize, &unused));
  return FusedNarrow<In>::launch(mapA, mapB, mapC, g, p, gp.ctas, stream);
}

}  // namespace ag
}  // namespace mkccl
