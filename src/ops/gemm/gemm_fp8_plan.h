// The fp8 GEMM's tile configuration (header-only: CPU-tested in tests/kernels/gemm_fp8_plan_test).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "mkccl.h"
#include "ops/gemm/gemm_plan_model.h"

namespace mkccl {

// Per-tensor scales: the configuration the tuner's gemm.variant `v` means, as for bf16 (simple has
// no fp8 kernel: 128x1). Auto: the engine's wave model with the fp8 kernels' own tile
// efficiencies (gemmFp8TensorEfficiency).
inline GemmVariant gemmFp8Variant(mkcclFp8ScaleKind_t kind, int64_t M, GemmVariant v) {
  (void)kind;
  (void)M;
  return v == GemmVariant::Simple ? GemmVariant::F128C1 : gemmVariantWide(v);
}

// Block scales: 128 x 192 or 128 x 128 tiles (fp8_op.cuh: the promotion's partial sums leave no
// registers for 128 x 256), cluster 1 or 2. gemm.variant: 256x2 / 256x1 force the wide tile with /
// without the 2-CTA cluster (so do 192x2 / 192x1), 128x2 / 128x1 the narrow one, simple means 128x1. Auto: the engine's
// wave model (fewest waves of tiles times tile width over efficiency). Efficiencies from one H100
// (docs/PERFORMANCE.md, 8192^3, forced variants): 128 x 192 with the cluster 1080 TFLOP/s, 128 x
// 128 with / without 1033 / 1026 (0.96, 0.95); 128 x 192 without the cluster was not measured.
inline double gemmFp8BlockEfficiency(int bn, int clusterSize) {
  if (bn == 192) return clusterSize == 2 ? 1.0 : 0.97;
  return clusterSize == 2 ? 0.96 : 0.95;
}

inline GemmPlan gemmFp8BlockPlanModel(int64_t M, int64_t N, GemmVariant v, int ctaBudget, int maxClusters2) {
  static const GemmTileCandidate kAuto[4] = {{192, 2}, {192, 1}, {128, 2}, {128, 1}};
  GemmTileCandidate forced{128, 1};
  const GemmTileCandidate* cands = nullptr;
  const int n = gemmTileCandidates(v, 192, kAuto, &forced, &cands);
  return gemmWavePlan(M, N, cands, n, v != GemmVariant::Auto, ctaBudget, maxClusters2, gemmFp8BlockEfficiency);
}

// Per-tensor scales: the tiles' throughput relative to 128 x 256, measured on one H200 with each
// configuration forced (perf/results/20261127-s5-1xNVIDIA_H200/11-fp8-variants/; 4096^3: 256x1 93.4,
// 256x2 94.4, 128x2 and 128x1 100.0 us). The bf16 engine's efficiencies (128 x 128 at 0.72) made
// auto keep 128 x 256 on shapes whose last wave it fills badly: 1000 x 4104 x 4112 ran 52.5 us in
// 128 x 256 tiles (136 on 132 SMs) against 42.4 in 128 x 128 with the cluster (264), and
// 4096 x 2112 x 7168 117.7 against 104.3. The cluster leads among the narrow tiles (those two
// shapes: 42.4 / 52.6 and 104.3 / 110.6 us with / without).
inline double gemmFp8TensorEfficiency(int bn, int clusterSize) {
  if (bn == 256) return clusterSize == 2 ? 0.99 : 1.0;
  return clusterSize == 2 ? 0.94 : 0.93;
}

// The plan: block scales as above; per-tensor scales the engine's wave model with the fp8
// efficiencies (the engine counts K / 2 16-bit columns; the wave model does not use K).
inline GemmPlan gemmFp8PlanModel(mkcclFp8ScaleKind_t kind, int64_t M, int64_t N, int64_t K, GemmVariant v,
                                 int ctaBudget, int maxClusters2) {
  (void)K;
  if (kind == mkcclFp8ScaleBlock)
    return gemmFp8BlockPlanModel(M, N, v == GemmVariant::Simple ? GemmVariant::F128C1 : gemmVariantWide(v), ctaBudget,
                                 maxClusters2);
  static const GemmTileCandidate kAuto[4] = {{256, 1}, {256, 2}, {128, 2}, {128, 1}};
  GemmTileCandidate forced{256, 2};
  const GemmTileCandidate* cands = nullptr;
  const int n = gemmTileCandidates(gemmFp8Variant(kind, M, v), 256, kAuto, &forced, &cands);
  return gemmWavePlan(M, N, cands, n, v != GemmVariant::Auto, ctaBudget, maxClusters2, gemmFp8TensorEfficiency);
}

}  // namespace mkccl
