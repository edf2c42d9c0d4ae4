// Body of fusedPlan<In> / fusedLaunch<In> (host.h), included by the per-type files.
#pragma once
#include <string.h>
#include <algorithm>
#include "kernels/ag_gemm/op.cuh"
#include "ops/ag_gemm/host.h"
#include "ops/ag_gemm/model.h"
#include "kernels/gemm/gemm_config.cuh"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm/kernel_launch.h"
#include "base/check.h"

namespace mkccl {
namespace ag {

// The op of an input type: AllGatherGemmOp; e4m3 specialises it (launch_fp8.cu: the fp8
// mainloop, the scales in the parameters), declared there before its instantiations.
template <class In>
struct FusedOpOf {
  using Op = AllGatherGemmOp;
  static void scales(FusedParams&, const FusedCall&) {}
};

template <class In>
using Fused256 = GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, typename FusedOpOf<In>::Op>;
template <class In>
using Fused128 = GemmLauncher<GemmCfg<In, 128, EpilogueTmaStore>, typename FusedOpOf<In>::Op>;

// The debugging variant (register epilogue) is not built for the fused kernel: 128 x 128 without
// a cluster is the closest; nor are 128 x 192 tiles (gemmVariantWide).
inline GemmVariant fusedVariant(GemmVariant v) {
  return v == GemmVariant::Simple ? GemmVariant::F128C1 : gemmVariantWide(v);
}

// Comm CTAs (blocks [0, n) of the launch, whole clusters): chooseFused (model.h).
// Clusters of 2 only when gemm.variant asks for them: the fused kernel's 2-CTA path has not
// been timed on a GPU yet.
template <class In>
mkcclResult_t fusedPlan(const FusedCall& c, FusedPlan* out) {
  int maxClusters2 = 0;
  MKCCL_CHECK(Fused256<In>::prepare(c.dev, c.smCount, 2, &maxClusters2));
  const GemmVariant v = fusedVariant(c.variant);
  out->full = gemmPlanFor(c.M, c.N, c.K, v, c.smCount, maxClusters2);
  const bool clusters = v == GemmVariant::F256C2 || v == GemmVariant::F128C2;
  const int clusters2 = clusters ? maxClusters2 : 0;
  auto planFor = [&](int taken, GemmPlan* g) {
    *g = gemmPlanFor(c.M, c.N, c.K, v, c.smCount - taken, std::max(0, clusters2 - taken / 2));
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
  MKCCL_CHECK(Fused256<In>::prepare(dev, smCount, 2, &unused));
  return Fused128<In>::prepare(dev, smCount, 1, &unused);
}

template <class In>
mkcclResult_t fusedLaunch(const FusedCall& c, const FusedPlan& plan, cudaStream_t stream) {
  const GemmPlan& gp = plan.gemm;
  const Layout& L = c.push.L;
  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, c.push.region[c.push.lme], c.type, c.M, c.K, c.K, 128));
  MKCCL_CHECK(encodeTileMap(&mapB, c.W, c.type, c.N, c.K, c.ldw, static_cast<uint32_t>(gp.bn / gp.clusterSize)));
  MKCCL_CHECK(encodeTileMap(&mapC, c.C, c.outType, c.M, c.N, c.ldc, 64));

  typename FusedOpOf<In>::Op::Params p;
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

  if (gp.bn == 256) return Fused256<In>::launch(mapA, mapB, mapC, g, p, gp.ctas, stream);
  int unused = 0;
  MKCCL_CHECK(Fused128<In>::prepare(c.dev, c.smCount, gp.clusterSize, &unused));
  return Fused128<In>::launch(mapA, mapB, mapC, g, p, gp.ctas, stream);
}

}  // namespace ag
}  // namespace mkccl
