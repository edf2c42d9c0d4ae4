// GEMM+RS/AR planning: the fused kernel's tile configuration (the rule's, or the one gemm.variant
// forces), and its push, order and publication (the rules, or the tuner's gemm_rs.* / gemm_ar.*).
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include "ops/gemm_rs/host.h"
#include "base/check.h"

namespace mkccl {
namespace rs {

namespace {

// A forced cluster configuration: as many clusters of 2 as fit beside each other.
FusedPlan clusterPlan(const PlanInputs& in, int bn) {
  const int clusters = bn == 256 ? in.occ.clusters256 : in.occ.clusters128;
  return fusedConfig(in, bn, 2, std::min(in.ctaBudget / 2, clusters) * 2);
}

}  // namespace

FusedPlan planFused(const PlanInputs& in) {
  const int wide = std::min(256, in.maxBn);  // fp8 block scales: the wide variants run 128 x 128
  switch (in.variant) {
    case GemmVariant::F256C2: return clusterPlan(in, wide);
    case GemmVariant::F128C2: return clusterPlan(in, 128);
    case GemmVariant::F256C1: return fusedConfig(in, wide, 1, in.ctaBudget);
    case GemmVariant::F128C1: return fusedConfig(in, 128, 1, in.ctaBudget);
    default: return autoFusedPlan(in);  // auto; "simple" is a plain-GEMM debug variant
  }
}

mkcclResult_t fusedChoices(int mode, int ws, const Tuning::Reduce& over, Layout* L, FusedChoices* out) {
  FusedChoices c;
  // The push. Unset: the copy engines at 2 ranks, bulk stores for the AllReduce from 4 ranks, else
  // the push team paced by the GEMM (docs/GEMM_RS_AR.md has the measurements behind the rule). At 2
  // ranks the copy engines carry the partials while every SM computes (2xH200, fused forced, RS
  // 8192^3 / 16384x8192x8192 / 4096x8192x8192 / 8192x8192x4096: team 750-753 / 1511-1526 / 407-414
  // / 438-439 us, ce 748 / 1499 / 382-405 / 404); beyond, they move only ~190 GB/s out of a GPU
  // (4xH200: RS ce 596-647 / 1115-1208 / 350-357 / 568-606 against the team's 482-485 / 958-963 /
  // 246-247 / 385). The AllReduce at 4 ranks: bulk 699 / 1338-1340 / 402-403 / 633-634 against the
  // team's 718-720 / 1395-1396 / 403 / 683-685. 3 ranks: the team (RS 1.24-1.33, AR 1.14-1.24 of
  // the floor).
  const PushMode def = ws == 2                               ? PushMode::Ce
                       : mode == kModeAllReduce && ws >= 4 ? PushMode::Bulk
                                                           : PushMode::Team;
  c.forcedPush = over.push != Tuning::Reduce::kPushAuto;
  c.push = c.forcedPush ? static_cast<PushMode>(over.push) : def;
  // Batches of 64 tiles: 4 MiB copies of 128 x 256 tiles (a copy and its wait cost a stream ~6 us
  // besides the bytes: tools/probes/ce_wait_latency.cu).
  c.ceBatch = c.push == PushMode::Ce ? (over.ceBatch > 0 ? over.ceBatch : 64) : 0;
  c.ceStreams = over.ceStreams > 0 ? over.ceStreams : 1;
  // The reduction and the order. Interleaved beyond 2 ranks (at 2 there is one owner to send to:
  // the orders coincide): in phase order, phase j's partials all go to one owner over one GPU
  // pair's links while the others idle; interleaved, every link carries partials all the time
  // (4xH200: the paced team in phase order once took 854 us at 8192x8192x4096 where interleaved
  // held 373-374). The ring's tile of phase j waits for the neighbour's tile of phase j-1, which
  // only the phase order puts a phase earlier.
  L->ring = over.ring;
  L->order = over.order >= 0 ? over.order : ws > 2 && !over.ring ? kOrderInterleaved : kOrderPhases;
  if (L->ring && L->order != kOrderPhases)
    return setError(mkcclInvalidUsage,
                    "tuning: %s.reduce=ring needs %s.order=phases (or unset): a tile of phase j waits for the "
                    "neighbour's tile of phase j-1",
                    mode == kModeAllReduce ? "gemm_ar" : "gemm_rs", mode == kModeAllReduce ? "gemm_ar" : "gemm_rs");
  // When a staged partial is handed on: early (a few k-blocks into the next tile) with the copy
  // engines, which do not pace by the GEMM and get early batches to the owners sooner
  // (4096x8192x8192: 382-405 us early, 416 late); else late (phase order, 8192^3: late 765-771 us,
  // early 784-797).
  c.earlyPublish = over.publish >= 0 ? over.publish : c.push == PushMode::Ce ? 1 : 0;
  *out = c;
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
