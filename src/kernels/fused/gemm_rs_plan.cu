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

mkcclResult_t pushFromEnv(int mode, int ws, PushMode* out) {
  // Unset: the (paced) push team, except ReduceScatter beyond 2 ranks: bulk stores there until the
  // paced team is measured at 4 ranks. 2xH200, 2026-11-22, fused RS: the paced team 762 / 1534 /
  // 381 / 412 us at 8192^3 / 16384x8192x8192 / 4096x8192x8192 / 8192x8192x4096 against bulk
  // stores' 793 / 1566 / 411 / 460 (probe runs on the probe-rs branch). 4xH200, before pacing:
  // bulk held 378-392 us at 8192x8192x4096 in four runs where the unpaced team took 379-1122
  // (8192^3: bulk 485-500, team 508-868); AllReduce at 2 ranks: bulk 1096-1712 us against the
  // team's 834-916 (8192^3).
  const PushMode def = mode == kModeReduceScatter && ws > 2 ? PushMode::Bulk : PushMode::Team;
  int v = 0;
  MKCCL_CHECK(envChoice("MKCCL_GEMM_RS_PUSH", {"bulk", "team"}, static_cast<int>(def), &v));
  *out = static_cast<PushMode>(v);  // the indices are PushMode's values
  return mkcclSuccess;
}

mkcclResult_t orderFromEnv(int ws, int* interleave) {
  // Unset: interleaved beyond 2 ranks (at 2 there is one owner to send to: the orders coincide).
  // Why (4xH200 runs of d1c6290; interleaved is not measured yet): in phase order, phase j's
  // partials (M/ws x N bf16: 32 MiB at 8192^3) all go to one owner, over the 6 NVLinks of one GPU
  // pair (~120 GB/s: ~270 us), while the phase computes for T = a quarter of the GEMM (~90 us).
  // Phase j's link is then busy from j*T to j*T + 270 us, the last one (j = ws-2) until 2T + 270 =
  // ~450 us, and the owners' final epilogues wait for it: that model gives ~450, ~370 and ~900 us
  // at 8192^3, 8192x8192x4096 and 16384x8192x8192, where 491, 385 and 1008 were measured (floor
  // ratios 1.35, 1.09, 1.25). Interleaved, each link carries its owner's partials across the whole
  // sending window (3T), which it can.
  return envChoice("MKCCL_GEMM_RS_ORDER", {"phases", "interleaved"}, ws > 2 ? 1 : 0, interleave);
}

}  // namespace rs
}  // namespace mkccl
