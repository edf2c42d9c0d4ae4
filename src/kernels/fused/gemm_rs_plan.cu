// GEMM+RS/AR planning: the fused kernel's tile configuration (the rule's, or the one
// MKCCL_GEMM_VARIANT forces), the plan overrides and the push path (MKCCL_GEMM_RS_PUSH).
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include "kernels/fused/gemm_rs_host.cuh"
#include "runtime/check.h"

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
  *out = PlanKind::Auto;
  const bool ar = mode == kModeAllReduce;
  const char* var = ar ? "MKCCL_GEMM_AR_PLAN" : "MKCCL_GEMM_RS_PLAN";
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0' || strcmp(s, "auto") == 0) return mkcclSuccess;
  if (strcmp(s, "fused") == 0) *out = PlanKind::Fused;
  else if (strcmp(s, "sequential") == 0) *out = PlanKind::Sequential;
  else if (ar && strcmp(s, "rs_ag") == 0) *out = PlanKind::RsThenAg;
  else
    return setError(mkcclInvalidUsage, "%s=%s: expected fused, sequential%s or auto", var, s, ar ? ", rs_ag" : "");
  return mkcclSuccess;
}

mkcclResult_t pushFromEnv(int mode, PushMode* out) {
  // Unset: bulk stores for ReduceScatter, the push team for AllReduce. 4xH200, 2026-11-22, fused
  // plan, ws = 4: the bulk path held 378-392 us at 8192x8192x4096 in four runs where the team path
  // took 379-1122 us (8192^3: bulk 485-500, team 508-868); AllReduce at 2 ranks: bulk 1096-1712 us
  // against the team's 834-916 (8192^3).
  *out = mode == kModeReduceScatter ? PushMode::Bulk : PushMode::Team;
  const char* s = getenv("MKCCL_GEMM_RS_PUSH");
  if (s == nullptr || *s == '\0') return mkcclSuccess;
  if (strcmp(s, "team") == 0) *out = PushMode::Team;
  else if (strcmp(s, "bulk") == 0) *out = PushMode::Bulk;
  else return setError(mkcclInvalidUsage, "MKCCL_GEMM_RS_PUSH=%s: expected team or bulk", s);
  return mkcclSuccess;
}

mkcclResult_t orderFromEnv(int* interleave) {
  *interleave = 0;
  const char* s = getenv("MKCCL_GEMM_RS_ORDER");
  if (s == nullptr || *s == '\0' || strcmp(s, "phases") == 0) return mkcclSuccess;
  if (strcmp(s, "interleaved") == 0) *interleave = 1;
  else return setError(mkcclInvalidUsage, "MKCCL_GEMM_RS_ORDER=%s: expected phases or interleaved", s);
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
