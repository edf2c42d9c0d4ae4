// GEMM+RS/AR planning: the fused kernel's tile configuration and the model's estimates of both plans
// (gemm_rs_model.h); the op then lets a timed trial confirm the plan (gemm_rs_auto.cu).
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include "kernels/fused/gemm_rs_host.cuh"
#include "kernels/fused/gemm_rs_model.h"
#include "runtime/check.h"
#include "runtime/log.h"

namespace mkccl {
namespace rs {

namespace {

constexpr int64_t kMaxScratchBytes = 8ll << 30;
constexpr double kClearWin = 0.95;

struct Candidate {
  int bn, cs;
};
// In order of preference. Auto takes the configurations measured with this kernel's engine (no
// cluster: the cluster path is not measured since the engine's fence fix); MKCCL_GEMM_VARIANT
// reaches the cluster ones.
const Candidate kCandidates[] = {{256, 1}, {128, 1}, {256, 2}, {128, 2}};

bool allowed(const Candidate& c, GemmVariant v) {
  switch (v) {
    case GemmVariant::F256C2: return c.bn == 256 && c.cs == 2;
    case GemmVariant::F256C1: return c.bn == 256 && c.cs == 1;
    case GemmVariant::F128C2: return c.bn == 128 && c.cs == 2;
    case GemmVariant::F128C1: return c.bn == 128 && c.cs == 1;
    default: return c.cs == 1;  // auto; "simple" is a plain-GEMM debug variant
  }
}

}  // namespace

FusedPlan planFused(const PlanInputs& in) {
  FusedPlan best;
  for (const Candidate& c : kCandidates) {
    if (!allowed(c, in.variant)) continue;
    int ctas = in.ctaBudget;
    if (c.cs == 2) {
      const int clusters = c.bn == 256 ? in.occ.clusters256 : in.occ.clusters128;
      ctas = std::min(in.ctaBudget / 2, clusters) * 2;
    }
    if (ctas < c.cs) continue;
    const int G = ctas / c.cs;
    const Layout L = makeLayout(in.mode, in.ws, in.M, in.N, c.bn, c.cs, std::max(1, 16 / c.cs));
    if (L.flagSlots() > in.flagSlots || L.scratchBytes() > kMaxScratchBytes) continue;
    const int grid = int(std::min<int64_t>(G, L.orderLength()));
    const double us = model::fusedUs(L, grid, in.K);
    // A later candidate must win clearly: the model's small differences are within its error.
    if (!best.ok || us < best.estUs * kClearWin) {
      best.ok = true;
      best.bn = c.bn;
      best.cs = c.cs;
      best.ctas = grid * c.cs;
      best.L = L;
      best.estUs = us;
    }
  }
  return best;
}

double estimateSequentialUs(const PlanInputs& in) {
  return model::sequentialUs(in.mode, in.ws, in.M, in.N, in.K, in.ctaBudget);
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

}  // namespace rs
}  // namespace mkccl
