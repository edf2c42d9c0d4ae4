// When the plain GEMM splits K (split_k.cuh), and into how many parts: pure host arithmetic,
// header-only so that the CPU tests pin it.
//
// Decode-sized M leaves fewer output tiles than SMs (M = 128, N = 8192: 32 tiles of 128 x 256 on
// 132 SMs), and at M <= 256 the GEMM is bound by reading W from memory, which only every SM pulling
// at once can do. Splitting K multiplies the units of work without re-reading W. The model is the
// planner's wave model (gemm_plan_model.h) with K in it: a unit costs its k-blocks plus a fixed
// cost (pipeline fill, writing and reading the fp32 partials: about kSplitKFixKBlocks k-blocks),
// times the tile width over the configuration's efficiency. Split K runs 128 x 128 tiles without a
// cluster (the reduction adds 64 registers per thread to the 64 accumulators; 128 x 256 would
// spill).
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/abi/hd.h"
#include "ops/gemm/gemm_plan_model.h"

namespace mkccl {

constexpr int kSplitKMaxSplits = 16;
constexpr int kSplitKMinKBlocks = 4;   // auto: at least this many k-blocks per part
constexpr int kSplitKFixKBlocks = 4;   // a part's fixed cost, in k-blocks of its own tile
constexpr double kSplitKMargin = 0.9;  // auto splits only for a predicted gain above 10%

// Cost, in the wave model's units times k-blocks, of a plan without split K.
inline double gemmPlainCost(const GemmPlan& p, int64_t M, int64_t N, int64_t K) {
  const int64_t units = ceilDiv(ceilDiv(M, 128), p.clusterSize) * ceilDiv(N, p.bn);
  const int64_t parallel = std::max(1, p.ctas / p.clusterSize);
  return static_cast<double>(ceilDiv(units, parallel)) * static_cast<double>(ceilDiv(K, 64)) * p.bn /
         gemmTileEfficiency(p.bn, p.clusterSize);
}

// Cost of split K with `splits` parts of 128 x 128 tiles on ctaBudget CTAs.
inline double gemmSplitKCost(int64_t M, int64_t N, int64_t K, int splits, int ctaBudget) {
  const int64_t units = ceilDiv(M, 128) * ceilDiv(N, 128) * splits;
  const int64_t kPart = ceilDiv(ceilDiv(K, 64), splits);
  return static_cast<double>(ceilDiv(units, std::max(ctaBudget, 1))) *
         static_cast<double>(kPart + kSplitKFixKBlocks) * 128 / gemmTileEfficiency(128, 1);
}

// The plan for the plain GEMM: `plain` (gemmPlanModel's) unless split K is predicted faster.
// forced: the tuner's gemm.split_k (0 auto, 1 never, s > 1 that many parts, capped by the
// k-blocks and the workspace). maxUnits: the workspace's room in (tile, part) units. Auto splits
// only when the variant is auto or 128x1 (the tile split K runs).
inline GemmPlan gemmSplitKPlan(const GemmPlan& plain, int64_t M, int64_t N, int64_t K, GemmVariant v, int forced,
                               int ctaBudget, int maxUnits) {
  if (plain.simple || forced == 1) return plain;
  if (v != GemmVariant::Auto && v != GemmVariant::F128C1) return plain;
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, 128);
  const int64_t kBlocks = ceilDiv(K, 64);
  ctaBudget = std::max(ctaBudget, 1);
  int best = 1;
  if (forced > 1) {
    best = static_cast<int>(std::min<int64_t>({forced, kBlocks, maxUnits / std::max<int64_t>(tiles, 1)}));
  } else {
    double bestCost = gemmPlainCost(plain, M, N, K) * kSplitKMargin;
    for (int s = 2; s <= kSplitKMaxSplits; ++s) {
      if (kBlocks / s < kSplitKMinKBlocks || tiles * s > maxUnits) break;
      const double c = gemmSplitKCost(M, N, K, s, ctaBudget);
      if (c < bestCost) {
        bestCost = c;
        best = s;
      }
    }
  }
  if (best <= 1) return plain;
  GemmPlan p;
  p.bn = 128;
  p.clusterSize = 1;
  p.simple = false;
  p.splits = best;
  p.ctas = static_cast<int>(std::min<int64_t>(ctaBudget, tiles * best));
  return p;
}

}  // namespace mkccl
