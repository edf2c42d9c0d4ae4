// The fp8 GEMM's tile configuration (header-only: CPU-tested in tests/kernels/gemm_fp8_plan_test).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "mkccl.h"
#include "ops/gemm/gemm_plan_model.h"

namespace mkccl {

// Per-tensor scales: the configuration the tuner's gemm.variant `v` means, as for bf16 (simple has
// no fp8 kernel: 128x1).
inline GemmVariant gemmFp8Variant(mkcclFp8ScaleKind_t kind, int64_t M, GemmVariant v) {
  (void)kind;
  (void)M;
  return v == GemmVariant::Simple ? GemmVariant::F128C1 : v;
}

// Block scales: 128 x 192 or 128 x 128 tiles (fp8_op.cuh: the promotion's partial sums leave no
// registers for 128 x 256), cluster 1 or 2. gemm.variant: 256x2 / 256x1 force the wide tile with /
// without the 2-CTA cluster, 128x2 / 128x1 the narrow one, simple means 128x1. Auto: the engine's
// wave model (fewest waves of tiles times tile width over efficiency). Efficiencies from one H100
// (docs/PERFORMANCE.md, 8192^3, forced variants): 128 x 192 with the cluster 1080 TFLOP/s, 128 x
// 128 with / without 1033 / 1026 (0.96, 0.95); 128 x 192 without the cluster was not measured.
inline double gemmFp8BlockEfficiency(int bn, int clusterSize) {
  if (bn == 192) return clusterSize == 2 ? 1.0 : 0.97;
  return clusterSize == 2 ? 0.96 : 0.95;
}

inline GemmPlan gemmFp8BlockPlanModel(int64_t M, int64_t N, GemmVariant v, int ctaBudget, int maxClusters2) {
  struct Candidate {
    int bn, cs;
  };
  static const Candidate kAuto[] = {{192, 2}, {192, 1}, {128, 2}, {128, 1}};
  Candidate forced{128, 1};
  const Candidate* cands = kAuto;
  int nCands = 4;
  if (v != GemmVariant::Auto) {
    forced.bn = (v == GemmVariant::F256C2 || v == GemmVariant::F256C1) ? 192 : 128;
    forced.cs = (v == GemmVariant::F256C2 || v == GemmVariant::F128C2) ? 2 : 1;
    cands = &forced;
    nCands = 1;
  }
  const int64_t mBlocks = ceilDiv(M, 128);
  ctaBudget = std::max(ctaBudget, 1);
  GemmPlan plan;
  double best = -1;
  for (int i = 0; i < nCands; ++i) {
    const Candidate& c = cands[i];
    int ctas = ctaBudget;
    if (c.cs == 2) {
      if (v == GemmVariant::Auto && mBlocks < 2) continue;  // the second CTA would compute zeros
      ctas = std::min(ctaBudget / 2, std::max(maxClusters2, 0)) * 2;
      if (ctas < 2) {
        if (v != GemmVariant::Auto) ctas = 2;  // forced: correctness over speed
        else continue;
      }
    }
    const int64_t units = ceilDiv(mBlocks, c.cs) * ceilDiv(N, c.bn);
    const int64_t parallel = ctas / c.cs;
    const double cost = static_cast<double>(ceilDiv(units, parallel)) * c.bn / gemmFp8BlockEfficiency(c.bn, c.cs);
    const int used = static_cast<int>(std::min<int64_t>(ctas, units * c.cs));
    const bool tie = best >= 0 && cost > best * 0.995 && cost < best * 1.005;
    if (best < 0 || (tie ? used < plan.ctas : cost < best)) {
      best = tie ? std::min(best, cost) : cost;
      plan.bn = c.bn;
      plan.clusterSize = c.cs;
      plan.ctas = used;
    }
  }
  return plan;
}

// The plan: block scales as above; per-tensor scales the engine's model on the problem's bytes
// (K / 2 16-bit columns: what the tensor maps and k-blocks count).
inline GemmPlan gemmFp8PlanModel(mkcclFp8ScaleKind_t kind, int64_t M, int64_t N, int64_t K, GemmVariant v,
                                 int ctaBudget, int maxClusters2) {
  if (kind == mkcclFp8ScaleBlock)
    return gemmFp8BlockPlanModel(M, N, v == GemmVariant::Simple ? GemmVariant::F128C1 : v, ctaBudget, maxClusters2);
  return gemmPlanModel(M, N, K / 2, gemmFp8Variant(kind, M, v), ctaBudget, maxClusters2);
}

}  // namespace mkccl
