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

mkcclResult_t planFromEnv(const char* var, PlanKind* out) {
  *out = PlanKind::Auto;
  const char* s = getenv(var);
  if (s == nullptr || *s == '\0' || strcmp(s, "auto") == 0) return mkcclSuccess;
  if (strcmp(s, "fused") == 0) *out = PlanKind::Fused;
  else if (strcmp(s, "sequential") == 0) *out = PlanKind::Sequential;
  else return setError(mkcclInvalidUsage, "%s=%s: expected fused, sequential or auto", var, s);
  return mkcclSuccess;
}

mkcclResult_t pushBulkFromEnv(bool* bulk) {
  // Unset: the push team. Bulk stores from shared memory measured within +-3% of it for RS and
  // 2x slower for AR at 2 ranks (4xH200, 2026-11-22), so they are opt-in.
  *bulk = false;
  const char* s = getenv("MKCCL_GEMM_RS_PUSH");
  if (s == nullptr || *s == '\0' || strcmp(s, "team") == 0) return mkcclSuccess;
  if (strcmp(s, "bulk") == 0) *bulk = true;
  else return setError(mkcclInvalidUsage, "MKCCL_GEMM_RS_PUSH=%s: expected team or bulk", s);
  return mkcclSuccess;
}

}  // namespace rs
}  // namespace mkccl
