// The fp8 GEMM's tile configuration (header-only: CPU-tested in tests/kernels/gemm_fp8_plan_test).
#pragma once
#include <stdint.h>
#include "mkccl.h"
#include "ops/gemm/gemm_plan_model.h"

namespace mkccl {

// The configuration the tuner's gemm.variant `v` means for an fp8 GEMM of M rows.
//  - Per-tensor scales: as for bf16 (simple has no fp8 kernel: 128x1).
//  - Block scales: 128-wide tiles only (two accumulator sets of 64 x 256 would not fit the
//    registers). Auto: a 2-CTA cluster sharing the W tile, 24 KB of TMA per CTA per 2.1-MFLOP
//    k-block, the L2 -> SM traffic per flop of 128 x 256 without a cluster, against 32 KB for
//    128x1 (gemm_plan_model.h); a single M-block (M <= 128) leaves no partner: 128x1.
inline GemmVariant gemmFp8Variant(mkcclFp8ScaleKind_t kind, int64_t M, GemmVariant v) {
  if (v == GemmVariant::Simple) v = GemmVariant::F128C1;
  if (kind != mkcclFp8ScaleBlock) return v;
  if (v == GemmVariant::F128C2 || v == GemmVariant::F256C2) return GemmVariant::F128C2;
  if (v == GemmVariant::Auto && M > 128) return GemmVariant::F128C2;
  return GemmVariant::F128C1;
}

// The plan: the engine's model on the problem's bytes (K / 2 16-bit columns: what the tensor maps
// and k-blocks count).
inline GemmPlan gemmFp8PlanModel(mkcclFp8ScaleKind_t kind, int64_t M, int64_t N, int64_t K, GemmVariant v,
                                 int ctaBudget, int maxClusters2) {
  return gemmPlanModel(M, N, K / 2, gemmFp8Variant(kind, M, v), ctaBudget, maxClusters2);
}

}  // namespace mkccl
