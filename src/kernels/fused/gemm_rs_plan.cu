// GEMM+RS/AR planning: the fused kernel's tile configuration (the rule's, or the one
// MKCCL_GEMM_VARIANT forces), the plan overrides and the push path (MKCCL_GEMM_RS_PUSH).
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include "kernels/fused/gemm_rs_host.cuh"
#include "runtime/check.h"
#include "runtime/env.h"

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
  switch (in.variant) {
    case GemmVariant::F256C2: return clusterPlan(in, 256);
    case GemmVariant::F128C2: return clusterPlan(in, 128);
    case GemmVariant::F256C1: return fusedConfig(in, 256, 1, in.ctaBudget);
    case GemmVariant::F128C1: return fusedConfig(in, 128, 1, in.ctaBudget);
    default: return autoFusedPlan(in);  // auto; "simple" is a plain-GEMM debug variant
  }
}

mkcclResult_t planFromEnv(int mode, PlanKind* out) {
  // The indices are PlanKind's values; rs_ag only for AllReduce.
  int v = 0;
  if (mode == kModeAllReduce)
    MKCCL_CHECK(envChoice("MKCCL_GEMM_AR_PLAN", {"auto", "fused", "sequential", "rs_ag"}, 0, &v));
  else
    MKCCL_CHECK(envChoice("MKCCL_GEMM_RS_PLAN", {"auto", "fused", "sequential"}, 0, &v));
  *out = static_cast<PlanKind>(v);
  return mkcclSuccess;
}

mkcclResult_t pushFromEnv(int mode, int ws, PushChoice* out) {
  // Unset: the push team, paced by the GEMM (gemm_rs_copy.cuh), except for the AllReduce from 4
  // ranks on: bulk stores. Fused RS forced, us at 8192^3 / 16384x8192x8192 / 4096x8192x8192 /
  // 8192x8192x4096: 2xH200, probe builds of one session, the team paced by time 762 / 1534 / 381 /
  // 412 against bulk stores' 793 / 1566 / 411 / 460 (the shipped k-block pacing: 757 / 1556 / 380 /
  // 438, perf/results/20261122-174923-2xNVIDIA_H200); 4xH200 486 / 964 / 248 / 373 against 500 /
  // 947 / 265 / 385 (perf/results/20261122-175606-4xNVIDIA_H200, gemm_rs-ws4-team.json and
  // gemm_rs-ws4.json), and steady, where the unpaced team had varied up to 3x between runs. The
  // AllReduce at 2 ranks: bulk 1096-1897 us against the team's 834-916 (8192^3); at 4 ranks
  // (4xH200, 9d75455, twice each, the team staging by bulk stores): bulk 699 / 1338-1340 / 402-403
  // / 633-634 against the team's 718-720 / 1395-1396 / 403 / 683-685 (published early: 704-707 /
  // 1384-1387 / 382 / 675-676). 3 ranks: the team (4xH200, 3 GPUs, c7477ab: RS 1.24-1.33, AR
  // 1.14-1.24 of the floor; ce not tried there).
  // 2 ranks: the copy engines (2xH200, fused forced, us at 8192^3 / 16384x8192x8192 /
  // 4096x8192x8192 / 8192x8192x4096, same machine, twice: RS team 750-753 / 1511-1526 / 407-414 /
  // 438-439, ce (64, published early) 748 / 1499 / 382-405 / 404; AR team 814 / 1593 / 452 / 541,
  // ce 805 / 1584 / 443 / 547). Not beyond: at 4 ranks the copy engines move ~190 GB/s out of a
  // GPU (4xH200, c7477ab: RS ce 596-647 / 1115-1208 / 350-357 / 568-606 against the team's 482-485
  // / 958-963 / 246-247 / 385; AR ce 906-929 / 1691-1752 / 504-535 / 887-916 against bulk's 697 /
  // 1337 / 400 / 635).
  const PushMode def = ws == 2                               ? PushMode::Ce
                       : mode == kModeAllReduce && ws >= 4 ? PushMode::Bulk
                                                           : PushMode::Team;
  const char* set = getenv("MKCCL_GEMM_RS_PUSH");
  out->forced = set != nullptr && *set != '\0';
  int v = 0;
  MKCCL_CHECK(envChoice("MKCCL_GEMM_RS_PUSH", {"bulk", "team", "ce"}, static_cast<int>(def), &v));
  out->mode = static_cast<PushMode>(v);  // the indices are PushMode's values
  // Batches of 64 tiles: 4 MiB copies of 128 x 256 tiles (a copy and its wait cost a stream
  // ~6 us besides the bytes: tools/probes/ce_wait_latency.cu).
  long long batch = 0;
  MKCCL_CHECK(envNumber("MKCCL_GEMM_RS_CE_BATCH", 64, 1, 1 << 20, &batch));
  long long slots = 0;
  MKCCL_CHECK(envNumber("MKCCL_GEMM_RS_CE_SLOTS", ws - 1, 1, 1 << 20, &slots));
  long long streams = 0;
  MKCCL_CHECK(envNumber("MKCCL_GEMM_RS_CE_STREAMS", 1, 1, kMaxLocalRanks, &streams));
  const bool ce = out->mode == PushMode::Ce;
  out->ceStreams = int(streams);
  out->ceBatch = ce ? int(batch) : 0;
  out->ceSlots = ce ? int(std::min<long long>(slots, ws - 1)) : 0;
  return mkcclSuccess;
}

mkcclResult_t publishFromEnv(int order, PushMode push, int* early) {
  // Unset: early with the spread order or the copy engines, else late. 2xH200 (fused RS forced,
  // 8192^3): phase order late 765-771 us, early 784-797; spread order early 797-808, late
  // 836-863. The copy engines do not pace by the GEMM, and early batches reach the owners sooner
  // (4096x8192x8192: 382-405 us early, 416 late).
  return envChoice("MKCCL_GEMM_RS_PUBLISH", {"late", "early"},
                   order == kOrderSpread || push == PushMode::Ce ? 1 : 0, early);
}

mkcclResult_t orderFromEnv(int ws, int numClusters, Layout* L) {
  // Unset: interleaved beyond 2 ranks (at 2 there is one owner to send to: the orders coincide).
  // In phase order, phase j's partials (32 MiB at 8192^3, 4 ranks) all go to one owner over one
  // GPU pair's 6 NVLinks while the others idle; interleaved, every link carries partials all the
  // time. 4xH200, 072cfc6 (perf/results/20261122-175606-4xNVIDIA_H200): about the same times
  // (bulk: 500 / 947 / 265 / 385 us interleaved, 499 / 947 / 276 / 390 in phases at 8192^3 /
  // 16384x8192x8192 / 4096x8192x8192 / 8192x8192x4096), but the paced team in phase order once
  // took 854 us at 8192x8192x4096 where interleaved it held 373-374.
  // MKCCL_GEMM_RS_REDUCE: direct (unset) | ring (gemm_rs_layout.cuh). The ring's tile of phase j
  // waits for the neighbour's tile of phase j-1, which only the phase order puts a phase earlier.
  int ring = 0;
  MKCCL_CHECK(envChoice("MKCCL_GEMM_RS_REDUCE", {"direct", "ring"}, 0, &ring));
  L->ring = ring;
  int order = 0;
  MKCCL_CHECK(envChoice("MKCCL_GEMM_RS_ORDER", {"phases", "interleaved", "spread"},
                        ws > 2 && !ring ? kOrderInterleaved : kOrderPhases, &order));
  if (ring && order != kOrderPhases)
    return setError(mkcclInvalidUsage,
                    "MKCCL_GEMM_RS_REDUCE=ring needs MKCCL_GEMM_RS_ORDER=phases (or unset): a tile of phase j waits "
                    "for the neighbour's tile of phase j-1");
  L->order = order;  // the indices are Order's values
  // spread: a lag of one wave of tiles (numClusters), so that the tail of final tiles is one wave
  // and its last tile comes a wave after the last partials (computed in one wave, copied paced by
  // the next mainloop).
  long long lag = 0;
  MKCCL_CHECK(envNumber("MKCCL_GEMM_RS_LAG", std::max(1, numClusters), 1, 1LL << 30, &lag));
  L->finalLag = int(lag);
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
