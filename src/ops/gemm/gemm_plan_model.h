// The plain GEMM's choice of tile configuration per shape (gemmPlanFor forwards here): pure host
// arithmetic, header-only so that the CPU tests check it. Fused ops' cost models may reuse
// gemmTileEfficiency.
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/abi/hd.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {

// Sustained throughput of each tile configuration per SM on large shapes, relative to 128 x 256
// without a cluster. Measured on one H200 with each configuration forced
// (perf/results/20261127-s5-1xNVIDIA_H200/13-gemm-odd-variants/): 128 x 128 at 0.94-0.95 of
// 128 x 256 (4096^3: 180-181 against 170 us; 8192 x 8192 x 4160: 770-778 against 736-740), the
// cluster a little ahead among the narrow tiles (2000 x 2056 x 4096: 68.9 against 72.7 us) and
// at par among the wide. The 0.72 used before came from an H100 run of 2026-11-22 (8192^3: 128x1
// 574 against 798 TFLOP/s), an older kernel; with it auto kept 128 x 256 on shapes whose last wave
// it fills badly, 15-25% slower than 128 x 128 (3072 x 3072 x 4096 130.4 against 113.5 us,
// 2000 x 2056 x 4104 109.7 against 90.0).

// The plain GEMM's tables of the same, per GPU and row alignment (gemmTileRatesFor); 128 x 192
// (the plain GEMM only) last.
struct GemmTileRates {
  double w256c1, w256c2, w128c1, w128c2, w192c1, w192c2;
  // The other widths (kGemmNarrowWidths[i], without / with the cluster).
  double other[kGemmNarrowCount][2];
  // Whether auto weighs the other widths in clusters too. On aligned rows they run alone and
  // gemmPlainPreferCluster pairs them where that measured faster (one wave of 128 x 80 ran 8-10%
  // slower in clusters on both GPUs); on rows off 128 bytes the cluster's W multicast paid even on
  // one wave (1000 x 1032 x 4104: 96 in clusters fastest on the H200, 80 on the H100).
  bool otherWidthsInClusters;
  double of(int bn, int clusterSize) const {
    if (bn == 192) return clusterSize == 2 ? w192c2 : w192c1;
    if (bn == 256) return clusterSize == 2 ? w256c2 : w256c1;
    for (int i = 0; i < kGemmNarrowCount; ++i)
      if (kGemmNarrowWidths[i] == bn) return other[i][clusterSize == 2 ? 1 : 0];
    return clusterSize == 2 ? w128c2 : w128c1;
  }
};
// H200 (the measurements above). 128 x 192: 0.97-1.0 of 128 x 256 by waves on the odd set's
// shapes, forced (perf/results/20261127-s9-H200/2-tile192-h200/).
// The other widths on the H200 (each forced on the odd set, one H200, perf/results/20261128-s10/
// 4-widths-h200/): its HBM and L2 feed the narrow tiles better, 64 at 0.58-0.60, 96 at 0.85, 112
// at 0.90-0.93; 144 and wider as fast as 256 (144-240 measured 0.95-1.01: 0.96-0.97 here).
constexpr GemmTileRates kGemmTilesH200{1.0,
                                       0.98,
                                       0.94,
                                       0.95,
                                       0.97,
                                       0.97,
                                       {{0.60, 0.58},
                                        {0.71, 0.73},
                                        {0.85, 0.85},
                                        {0.90, 0.93},
                                        {0.97, 0.97},
                                        {0.96, 0.96},
                                        {0.96, 0.96},
                                        {0.97, 0.97},
                                        {0.97, 0.97},
                                        {0.97, 0.97}},
                                       false};
// H100 (one H100 SXM, every configuration forced on the odd set, perf/results/
// 20261127-s7-1xH100-H200/4-odd-tiles/): its L2 and HBM feed the narrow tile less well, 128 x 128
// at 0.78 of 128 x 256 (4096^3: 229.1 against 179.4 us) and 0.83 in clusters of 2 (8000 x 8184 x
// 4096: 871 against 719 us for twice the waves), so 4097 x 4104 x 4096 wants the wide tiles in
// clusters (217.8 against 249.0 us in 128 x 128 clusters).
// 128 x 192 on the H100 (every configuration forced on the odd set, perf/results/20261127-s9-H200/
// 6-tile192-h100/): 0.95-0.96 of the wide tiles by waves at 4097 x 4104, 8000 x 8184 and 8192 x 8192
// x 4160, with or without the cluster.
// The other widths on an H100, relative to 128 x 256 (each forced on the odd set, one H100 SXM,
// perf/results/20261128-s10/3-widths-h100/: by waves, the mean over 8192 x 8192 x 4160, 4096^3 and
// 8000 x 8184 x 4096). A tile of W columns loads 16 KB of A and W / 8 KB of W per k-block, so the
// narrow ones load more bytes per flop and run slower per column (64: 0.53, 0.58 in clusters);
// 144-240 run as fast as 256 (144 measured 1.01: more stages fit; taken as 0.97, so that a tie
// keeps the tiles measured longest). 176, 224 and 240 without a cluster were not measured: their
// neighbours' values.
constexpr GemmTileRates kGemmTilesH100{1.0,
                                       1.0,
                                       0.78,
                                       0.83,
                                       0.95,
                                       0.95,
                                       {{0.53, 0.58},
                                        {0.60, 0.68},
                                        {0.71, 0.79},
                                        {0.75, 0.85},
                                        {0.97, 0.97},
                                        {0.93, 0.95},
                                        {0.93, 0.95},
                                        {0.97, 0.97},
                                        {0.95, 0.97},
                                        {0.95, 0.97}},
                                       false};
// Rows of A or W off a multiple of 128 bytes (K = 4104: 8208-byte rows), unpacked: each 128-byte
// box row spans two lines and the L2 serves ~30% fewer operand bytes per second
// (tools/probes/operand_load.cu: 5.6 against 8.0 TB/s on one H200), so the configurations that
// load fewer bytes per flop gain: the W multicast of a 2-CTA cluster most, the narrow tile (a
// third more bytes per flop) least. Relative to 128 x 256 in clusters, measured: 128 x 256 alone
// 0.69 (H100) and 0.83 (H200), 128 x 128 in clusters 0.70 (H100) and ~0.78 (H200), alone 0.51
// (H100); one table for both GPUs, between them, which picks the fastest measured configuration
// at every odd shape on both (same folder, and 3-odd-promotion/). 128 x 192 (session 9, forced,
// 2-tile192-h200/ and 6-tile192-h100/): in clusters 0.94-0.98 (H200) and ~0.88 (H100) of 128 x 256
// in clusters, alone 0.77 (H200) and 0.63 (H100).
// The other widths on such rows (the two runs above, relative to 128 x 256 in clusters, which ran
// 1.34x (H100) and 1.15x (H200) as fast as without; the mean of the two GPUs): the cluster's W
// multicast matters more the wider the tile, 208-240 in clusters as fast as 256 (0.97-0.98), 144
// 0.86, 64 0.49.
constexpr GemmTileRates kGemmTilesMisaligned{
    0.83, 1.0, 0.70, 0.80, 0.77, 0.90,
    {{0.40, 0.49}, {0.46, 0.57}, {0.51, 0.65}, {0.55, 0.72}, {0.64, 0.86}, {0.66, 0.90}, {0.69, 0.91}, {0.75, 0.98},
     {0.76, 0.98}, {0.76, 0.97}},
    true};
// The fused kernels' planners and stream-K's model: the H200's table.
inline double gemmTileEfficiency(int bn, int clusterSize) { return kGemmTilesH200.of(bn, clusterSize); }

// The table for a GPU of this peak HBM rate (bytes/us; 0: unknown, the H100's) and these rows.
inline const GemmTileRates& gemmTileRatesFor(double hbmPeakBytesPerUs, bool misalignedRows) {
  if (misalignedRows) return kGemmTilesMisaligned;
  return hbmPeakBytesPerUs >= 4.0e6 ? kGemmTilesH200 : kGemmTilesH100;
}

// A tile configuration the wave model weighs: 128 x bn tiles, clusters of cs CTAs along M.
struct GemmTileCandidate {
  int bn, cs;
};

// Wave-quantisation model: a persistent CTA (cluster) works through its share of the output tiles
// one after the other, so the time is ~ (tiles per cluster, rounded up) x (time per tile), and a
// tile's time is its width over its efficiency (efficiency(bn, cs)). Ties (within 0.5% of the
// fastest) go to the plan that uses fewer CTAs (fused ops can use the rest), then to the earlier
// candidate. forced: the one candidate the tuner named, taken even where a cluster cannot be
// filled.
template <class Efficiency>
inline GemmPlan gemmWavePlan(int64_t M, int64_t N, const GemmTileCandidate* cands, int nCands, bool forced,
                             int ctaBudget, int maxClusters2, Efficiency efficiency) {
  const int64_t mBlocks = ceilDiv(M, 128);
  ctaBudget = std::max(ctaBudget, 1);
  // Each candidate's plan and cost (cost < 0: it cannot run here), then the fastest, then among
  // those within 0.5% of it the fewest CTAs (a tie is measured against the fastest, so choices
  // never drift from it by a chain of ties).
  constexpr int kMax = 6 + 2 * kGemmNarrowCount;
  GemmPlan plans[kMax];
  double costs[kMax];
  double best = -1;
  for (int i = 0; i < nCands && i < kMax; ++i) {
    const GemmTileCandidate& c = cands[i];
    costs[i] = -1;
    int ctas = ctaBudget;
    if (c.cs == 2) {
      // A single M-block leaves the second CTA of every cluster with nothing but zero padding.
      if (!forced && mBlocks < 2) continue;
      ctas = std::min(ctaBudget / 2, std::max(maxClusters2, 0)) * 2;
      if (ctas < 2) {
        if (forced) ctas = 2;  // forced: correctness over speed
        else continue;
      }
    }
    const int64_t units = ceilDiv(mBlocks, c.cs) * ceilDiv(N, c.bn);  // cluster tiles
    const int64_t parallel = ctas / c.cs;
    costs[i] = static_cast<double>(ceilDiv(units, parallel)) * c.bn / efficiency(c.bn, c.cs);
    plans[i].bn = c.bn;
    plans[i].clusterSize = c.cs;
    plans[i].ctas = static_cast<int>(std::min<int64_t>(ctas, units * c.cs));
    if (best < 0 || costs[i] < best) best = costs[i];
  }
  GemmPlan plan;
  int chosen = -1;
  for (int i = 0; i < nCands && i < kMax; ++i) {
    if (costs[i] < 0 || costs[i] > best * 1.005) continue;
    if (chosen < 0 || plans[i].ctas < plans[chosen].ctas) chosen = i;
  }
  if (chosen >= 0) plan = plans[chosen];
  return plan;
}

// The wave model's cost of a plan (gemmWavePlan's unit: tile widths over efficiency, in waves).
template <class Efficiency>
inline double gemmWaveCost(const GemmPlan& p, int64_t M, int64_t N, Efficiency efficiency) {
  const int64_t units = ceilDiv(ceilDiv(M, 128), p.clusterSize) * ceilDiv(N, p.bn);
  const int64_t parallel = std::max(p.ctas / p.clusterSize, 1);
  return static_cast<double>(ceilDiv(units, parallel)) * p.bn / efficiency(p.bn, p.clusterSize);
}

// The candidates a gemm.variant names: every configuration for auto (in the order ties go), else
// the one forced; `wide` is the wide tile's width (256 for 16-bit inputs). 192x1 / 192x2 name
// 128 x 192 tiles (callers without them map those variants first: gemmVariantWide).
template <int kN>
inline int gemmTileCandidates(GemmVariant v, int wide, const GemmTileCandidate (&autoOrder)[kN],
                              GemmTileCandidate* forced, const GemmTileCandidate** cands) {
  if (v == GemmVariant::Auto) {
    *cands = autoOrder;
    return kN;
  }
  if (gemmVariantNarrow(v, &forced->bn, &forced->cs)) {
    *cands = forced;
    return 1;
  }
  const bool is192 = v == GemmVariant::F192C1 || v == GemmVariant::F192C2;
  forced->bn = is192 ? 192 : (v == GemmVariant::F256C2 || v == GemmVariant::F256C1) ? wide : 128;
  forced->cs = (v == GemmVariant::F256C2 || v == GemmVariant::F128C2 || v == GemmVariant::F192C2) ? 2 : 1;
  *cands = forced;
  return 1;
}

// Auto weighs the other widths above this many rows (the plain GEMM's split-K limit), and takes
// them where the wave model predicts them this much faster than the best of 128, 192 and 256
// (gains of 10-36% on the odd set; 3072 x 3072 x 4096, 2% in the model, measured slower).
constexpr int64_t kGemmOtherWidthsMinRows = 256;
constexpr double kGemmOtherWidthsGain = 0.95;

// rates: the configurations' efficiencies on this GPU and these rows (gemmTileRatesFor). withTile192:
// auto also weighs 128 x 192 tiles and the other widths (the plain GEMM; the fused kernels are
// built in 128 and 256).
inline GemmPlan gemmPlanModel(int64_t M, int64_t N, int64_t K, GemmVariant v, int ctaBudget, int maxClusters2,
                              const GemmTileRates& rates = kGemmTilesH200, bool withTile192 = false) {
  (void)K;  // per-tile costs (epilogue, pipeline fill) scale with the tile width as the mainloop does
  if (v == GemmVariant::Simple) {
    GemmPlan plan;
    plan.simple = true;
    plan.bn = 128;
    plan.clusterSize = 1;
    plan.ctas = static_cast<int>(std::min<int64_t>(std::max(ctaBudget, 1), ceilDiv(M, 128) * ceilDiv(N, 128)));
    return plan;
  }
  static const GemmTileCandidate kAuto[4] = {{256, 1}, {256, 2}, {128, 1}, {128, 2}};
  // 128 x 192 next, then the other widths: a tie keeps the configurations measured longest.
  static const GemmTileCandidate kAuto192[6] = {{256, 1}, {256, 2}, {128, 1}, {128, 2}, {192, 1}, {192, 2}};
  // Every configuration; the first 6 + kGemmNarrowCount hold the other widths alone.
  static const auto kAllWidths = [] {
    struct {
      GemmTileCandidate c[6 + 2 * kGemmNarrowCount];
    } a{};
    for (int i = 0; i < 6; ++i) a.c[i] = kAuto192[i];
    for (int i = 0; i < kGemmNarrowCount; ++i) {
      a.c[6 + i] = {kGemmNarrowWidths[i], 1};
      a.c[6 + kGemmNarrowCount + i] = {kGemmNarrowWidths[i], 2};
    }
    return a;
  }();
  GemmTileCandidate forced{256, 2};
  const GemmTileCandidate* cands = nullptr;
  const auto eff = [&rates](int bn, int cs) { return rates.of(bn, cs); };
  const int n = withTile192 ? gemmTileCandidates(v, 256, kAuto192, &forced, &cands)
                            : gemmTileCandidates(v, 256, kAuto, &forced, &cands);
  const GemmPlan plan = gemmWavePlan(M, N, cands, n, v != GemmVariant::Auto, ctaBudget, maxClusters2, eff);
  // The other widths: above decode M only (there split K decides, split_k_model.h, measured
  // against the 128-wide tile), and only where the model gains kGemmOtherWidthsGain: their rates
  // come from shapes of many waves, and on fewer the model misjudges them (3072 x 3072 x 4096: a
  // tie with 128 x 192 in the model, 144 measured 14% slower on an H100).
  if (!withTile192 || v != GemmVariant::Auto || M <= kGemmOtherWidthsMinRows) return plan;
  const int nOther = 6 + (rates.otherWidthsInClusters ? 2 : 1) * kGemmNarrowCount;
  const GemmPlan other = gemmWavePlan(M, N, kAllWidths.c, nOther, false, ctaBudget, maxClusters2, eff);
  return gemmWaveCost(other, M, N, eff) <= kGemmOtherWidthsGain * gemmWaveCost(plan, M, N, eff) ? other : plan;
}

// The plain GEMM's own preference (mkcclGemm and the fused ops' sequential plans; the fused
// kernels' planners keep gemmPlanModel's choice): 128 x 256 in clusters of 2 (W multicast)
// measured 1-3% faster than without a cluster on every large shape of an H100 run
// (8000 x 8184 x 4096: 707.2 against 716.6 us; 4097 x 4104 x 4104 packed: 276.0 against 288.4),
// so an auto plan of 256x1 over more than 256 rows becomes 256x2 when that needs no more waves
// (decode M, up to 256 rows, was measured without it and keeps the model's plan). The same for
// 128 x 192: 192x2 against 192x1 on one H200 (perf/results/20261127-s9-H200/2-tile192-h200/):
// 4097 x 4104 x 4096 204.2 against 214.1 us, within +-1.2% on the other odd shapes.
// The other widths (forced, on the odd set, one H100) gained from the cluster where M-blocks pair
// up over two waves or more (2000 x 2056 x 4096 in 128 x 144: 58.0 against 64.9 us; 8000 x 8184 x
// 4096 1% faster), and lost where a cluster pads an odd M-block count (4097 x 4104 x 4096 in
// 128 x 208: 224.2 against 198.3) or on one wave (1000 x 1032 x 4096 in 128 x 80: 25.0 against 22.9).
inline GemmPlan gemmPlainPreferCluster(const GemmPlan& plan, int64_t M, int64_t N, GemmVariant v, int ctaBudget,
                                       int maxClusters2) {
  if (v != GemmVariant::Auto || plan.simple || plan.bn == 128 || plan.clusterSize != 1 || plan.splits != 1)
    return plan;
  const int64_t mBlocks = ceilDiv(M, 128), nBlocks = ceilDiv(N, plan.bn);
  const int ctas2 = std::min(std::max(ctaBudget, 1) / 2, std::max(maxClusters2, 0)) * 2;
  if (M <= 256 || ctas2 < 2) return plan;
  const int64_t waves1 = ceilDiv(mBlocks * nBlocks, std::max(plan.ctas, 1));
  if (plan.bn != 192 && plan.bn != 256 && (mBlocks % 2 != 0 || waves1 < 2)) return plan;
  const int64_t units2 = ceilDiv(mBlocks, 2) * nBlocks;
  if (ceilDiv(units2, ctas2 / 2) > waves1) return plan;
  GemmPlan p = plan;
  p.clusterSize = 2;
  p.ctas = static_cast<int>(std::min<int64_t>(ctas2, units2 * 2));
  return p;
}

// The plan with cn CTAs per cluster along N sharing the A tile by multicast (whole tiles and full
// A boxes only: the plain GEMM with M >= 128): clusters of plan.clusterSize x cn CTAs, as many as
// fit at once (maxClusters, of that size) and as there are cluster tiles. Each CTA then loads
// 1 / cn of its A tile (and 1 / clusterSize of its W tile) from L2: what the small shapes, whose
// narrow tiles load the most bytes per flop, are short of. Unchanged where it does not apply.
inline GemmPlan gemmWithClusterN(const GemmPlan& plan, int64_t M, int64_t N, int cn, int maxClusters) {
  if (cn <= 1 || plan.simple || plan.splits != 1 || M < 128 || maxClusters < 1) return plan;
  const int64_t cm = std::max(plan.clusterSize, 1);
  const int64_t tiles = ceilDiv(ceilDiv(M, 128), cm) * ceilDiv(ceilDiv(N, plan.bn), cn);
  GemmPlan p = plan;
  p.clusterN = cn;
  p.ctas = static_cast<int>(std::min<int64_t>(tiles, maxClusters) * cm * cn);
  return p;
}

}  // namespace mkccl
