// CPU checks of the GEMM planner (gemm_plan_model.h): every plan is launchable (CTA budget, whole
// clusters, no idle CTA beyond the tiles), forced variants are honoured, and auto makes the
// choices the wave model implies on an H100/H200 (132 SMs, 66 two-CTA clusters).
#include <gtest/gtest.h>
#include <array>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <random>
#include "ops/gemm/gemm_plan_model.h"

namespace {

using mkccl::GemmPlan;
using mkccl::GemmVariant;

constexpr int kSms = 132, kClusters = 66;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* variantName(GemmVariant v) {
  switch (v) {
    case GemmVariant::Auto: return "auto";
    case GemmVariant::Simple: return "simple";
    case GemmVariant::F256C2: return "256x2";
    case GemmVariant::F256C1: return "256x1";
    case GemmVariant::F128C1: return "128x1";
    case GemmVariant::F128C2: return "128x2";
    case GemmVariant::F192C1: return "192x1";
    case GemmVariant::F192C2: return "192x2";
    case GemmVariant::Skinny: return "skinny";
    default: break;
  }
  return "other width";
}

// The model's time of a plan in tile-width units (independent restatement, for comparisons).
double modelCost(const GemmPlan& p, int64_t M, int64_t N) {
  const int64_t units = ceilDiv(ceilDiv(M, 128), p.clusterSize) * ceilDiv(N, p.bn);
  const int64_t parallel = p.ctas / p.clusterSize;
  return static_cast<double>(ceilDiv(units, parallel)) * p.bn / mkccl::gemmTileEfficiency(p.bn, p.clusterSize);
}

void expectLaunchable(const GemmPlan& p, int64_t M, int64_t N, int budget, int maxClusters2, bool forced) {
  const bool otherWidth = std::find(std::begin(mkccl::kGemmNarrowWidths), std::end(mkccl::kGemmNarrowWidths), p.bn) !=
                          std::end(mkccl::kGemmNarrowWidths);
  ASSERT_TRUE(p.bn == 128 || p.bn == 192 || p.bn == 256 || otherWidth) << p.bn;
  ASSERT_TRUE(p.clusterSize == 1 || p.clusterSize == 2);
  ASSERT_GE(p.ctas, p.clusterSize);
  EXPECT_EQ(p.ctas % p.clusterSize, 0);
  const int64_t tiles = ceilDiv(ceilDiv(M, 128), p.clusterSize) * p.clusterSize * ceilDiv(N, p.bn);
  EXPECT_LE(p.ctas, tiles) << "a CTA with no tile";
  if (!forced || p.clusterSize == 1) EXPECT_LE(p.ctas, std::max(budget, 1));
  if (p.clusterSize == 2 && !forced) EXPECT_LE(p.ctas / 2, maxClusters2);
}

TEST(GemmPlan, EveryPlanIsLaunchable) {
  std::mt19937_64 rng(12345);
  const GemmVariant all[] = {GemmVariant::Auto, GemmVariant::F256C2, GemmVariant::F256C1, GemmVariant::F128C1,
                             GemmVariant::F128C2};
  for (int i = 0; i < 20000; ++i) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 20000), N = 8 * (1 + static_cast<int64_t>(rng() % 2500));
    const int budget = 1 + static_cast<int>(rng() % kSms);
    const int maxClusters2 = static_cast<int>(rng() % (kClusters + 1));
    for (GemmVariant v : all) {
      const GemmPlan p = mkccl::gemmPlanModel(M, N, 4096, v, budget, maxClusters2);
      SCOPED_TRACE(testing::Message() << variantName(v) << " " << M << "x" << N << " budget "
                                      << budget << " clusters " << maxClusters2);
      expectLaunchable(p, M, N, budget, maxClusters2, v != GemmVariant::Auto);
      if (v == GemmVariant::F256C2 || v == GemmVariant::F128C2) EXPECT_EQ(p.clusterSize, 2);
      if (v == GemmVariant::F256C1 || v == GemmVariant::F128C1) EXPECT_EQ(p.clusterSize, 1);
      if (v == GemmVariant::F256C2 || v == GemmVariant::F256C1) EXPECT_EQ(p.bn, 256);
      if (v == GemmVariant::F128C2 || v == GemmVariant::F128C1) EXPECT_EQ(p.bn, 128);
      if (v == GemmVariant::Auto) {
        if (maxClusters2 == 0 || budget < 2 || M <= 128) EXPECT_EQ(p.clusterSize, 1);
        // No forced configuration that fits the same budget is predicted faster (by more than the tie margin).
        for (GemmVariant f : all) {
          if (f == GemmVariant::Auto) continue;
          const GemmPlan q = mkccl::gemmPlanModel(M, N, 4096, f, budget, maxClusters2);
          if (q.clusterSize == 2 && (maxClusters2 == 0 || budget < 2 || M <= 128)) continue;
          EXPECT_LE(modelCost(p, M, N), modelCost(q, M, N) * 1.005) << variantName(f);
        }
      }
    }
  }
}

TEST(GemmPlan, SimpleIsTheDebugKernel) {
  const GemmPlan p = mkccl::gemmPlanModel(1000, 1032, 72, GemmVariant::Simple, kSms, kClusters);
  EXPECT_TRUE(p.simple);
  EXPECT_EQ(p.bn, 128);
  EXPECT_EQ(p.clusterSize, 1);
  EXPECT_EQ(p.ctas, 8 * 9);
}

// The shapes the engine is judged on take the wide tile on the whole GPU (a cluster or not, as the
// measured efficiencies say).
TEST(GemmPlan, FigureShapesUseWideTilesOnEverySm) {
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {8192, 2048, 8192}, {4096, 4096, 8192},
                               {16384, 8192, 2048}, {2048, 8192, 8192}};
  for (const auto& s : shapes) {
    const GemmPlan p = mkccl::gemmPlanModel(s[0], s[1], s[2], GemmVariant::Auto, kSms, kClusters);
    printf("plan %lldx%lldx%lld: 128x%d cluster %d on %d CTAs\n", static_cast<long long>(s[0]),
           static_cast<long long>(s[1]), static_cast<long long>(s[2]), p.bn, p.clusterSize, p.ctas);
    EXPECT_EQ(p.bn, 256) << s[0] << "x" << s[1];
    EXPECT_EQ(p.ctas, kSms) << s[0] << "x" << s[1];
  }
}

// Small problems: more, narrower tiles when the wide ones would leave most SMs idle; never a
// cluster around a single M-block; the budget of a fused op respected.
TEST(GemmPlan, SmallAndOddShapes) {
  // 1 x 4096: 16 wide tiles or 32 narrow ones on 132 SMs: one wave either way, narrow is faster.
  GemmPlan p = mkccl::gemmPlanModel(1, 4096, 512, GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(p.bn, 128);
  EXPECT_EQ(p.clusterSize, 1);
  EXPECT_EQ(p.ctas, 32);
  // Tiny: one tile, one CTA.
  p = mkccl::gemmPlanModel(1, 8, 8, GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(p.ctas, 1);
  EXPECT_EQ(p.clusterSize, 1);
  // An odd budget (a fused op kept 1 SM) never yields more CTAs than it allows.
  p = mkccl::gemmPlanModel(8192, 8192, 8192, GemmVariant::Auto, 131, kClusters);
  EXPECT_LE(p.ctas, 131);
  EXPECT_EQ(p.bn, 256);
  // No cluster slots at all (e.g. an occupancy query that found none): single CTAs.
  p = mkccl::gemmPlanModel(8192, 8192, 8192, GemmVariant::Auto, kSms, 0);
  EXPECT_EQ(p.clusterSize, 1);
  EXPECT_EQ(p.ctas, kSms);
  // A forced cluster variant on a budget of one still gets a whole cluster (correctness first).
  p = mkccl::gemmPlanModel(300, 256, 64, GemmVariant::F256C2, 1, 0);
  EXPECT_EQ(p.clusterSize, 2);
  EXPECT_EQ(p.ctas, 2);
}

// The plain GEMM's tables (gemmTileRatesFor). Rows off a multiple of 128 bytes, unpacked
// (K = 4104): the L2 limits, so the plans that load fewer bytes per flop win: 4097 x 4104 takes
// 128 x 256 in clusters of 2 (W multicast; one H200: 231 us against 267 in the aligned rows'
// 128 x 128 pick), 2000 x 2056 keeps 128 x 128 in clusters (two waves of wide tiles against three
// of narrow ones: 89.6 against 93.8 us), and large shapes keep the wide clusters.
TEST(GemmPlan, TileRatesPerGpuAndRows) {
  const GemmPlan a = mkccl::gemmPlanModel(4097, 4104, 4104, GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(a.bn, 128);  // aligned-row efficiencies
  GemmPlan p = mkccl::gemmPlanModel(4097, 4104, 4104, GemmVariant::Auto, kSms, kClusters, mkccl::kGemmTilesMisaligned);
  EXPECT_EQ(p.bn, 256);
  EXPECT_EQ(p.clusterSize, 2);
  expectLaunchable(p, 4097, 4104, kSms, kClusters, false);
  p = mkccl::gemmPlanModel(2000, 2056, 4104, GemmVariant::Auto, kSms, kClusters, mkccl::kGemmTilesMisaligned);
  EXPECT_EQ(p.bn, 128);
  EXPECT_EQ(p.clusterSize, 2);
  p = mkccl::gemmPlanModel(8000, 8184, 4104, GemmVariant::Auto, kSms, kClusters, mkccl::kGemmTilesMisaligned);
  EXPECT_EQ(p.bn, 256);
  EXPECT_EQ(p.clusterSize, 2);
  // Aligned rows on an H100 (its narrow tiles measured less efficient): 4097 x 4104 in wide
  // clusters, 2000 x 2056 still narrow clusters (three waves against two of wide tiles).
  p = mkccl::gemmPlainPreferCluster(
      mkccl::gemmPlanModel(4097, 4104, 4096, GemmVariant::Auto, kSms, kClusters, mkccl::kGemmTilesH100), 4097, 4104,
      GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(p.bn, 256);
  EXPECT_EQ(p.clusterSize, 2);
  p = mkccl::gemmPlanModel(2000, 2056, 4096, GemmVariant::Auto, kSms, kClusters, mkccl::kGemmTilesH100);
  EXPECT_EQ(p.bn, 128);
  EXPECT_EQ(p.clusterSize, 2);
  EXPECT_EQ(&mkccl::gemmTileRatesFor(4.8e6, false), &mkccl::kGemmTilesH200);
  EXPECT_EQ(&mkccl::gemmTileRatesFor(3.35e6, false), &mkccl::kGemmTilesH100);
  EXPECT_EQ(&mkccl::gemmTileRatesFor(4.8e6, true), &mkccl::kGemmTilesMisaligned);
  // Forced variants are honoured whatever the rows.
  p = mkccl::gemmPlanModel(4097, 4104, 4104, GemmVariant::F128C1, kSms, kClusters, mkccl::kGemmTilesMisaligned);
  EXPECT_EQ(p.bn, 128);
  EXPECT_EQ(p.clusterSize, 1);
}

}  // namespace

namespace {

// The plain GEMM's preference for 2-CTA clusters (gemmPlainPreferCluster): the auto 256x1 plans of
// large shapes become 256x2 when that needs no more waves; never at decode M (<= 256 rows), never without
// cluster slots, never for a forced variant or a narrow tile; every result launchable.
TEST(GemmPlan, PlainPrefersClusters) {
  const int64_t big[][2] = {{8000, 8184}, {8192, 8192}, {4096, 4096}};
  for (const auto& s : big) {
    const GemmPlan base = mkccl::gemmPlanModel(s[0], s[1], 4096, GemmVariant::Auto, kSms, kClusters);
    const GemmPlan p = mkccl::gemmPlainPreferCluster(base, s[0], s[1], GemmVariant::Auto, kSms, kClusters);
    printf("plain %lldx%lld: 128x%d cluster %d on %d CTAs (model: cluster %d)\n", (long long)s[0], (long long)s[1],
           p.bn, p.clusterSize, p.ctas, base.clusterSize);
    EXPECT_EQ(p.bn, 256);
    EXPECT_EQ(p.clusterSize, 2) << s[0] << "x" << s[1];
    expectLaunchable(p, s[0], s[1], kSms, kClusters, false);
    const int64_t w1 = ceilDiv(ceilDiv(s[0], 128) * ceilDiv(s[1], 256), base.ctas);
    EXPECT_LE(ceilDiv(ceilDiv(ceilDiv(s[0], 128), 2) * ceilDiv(s[1], 256), p.ctas / 2), w1);
  }
  // Shapes whose wide tiles leave the last wave half empty take 128 x 128 in clusters of 2 from the
  // model itself (one H200: 2000 x 2056 x 4096 68.9 us against 86.4 in 128 x 256), and keep it.
  for (const auto& s : {std::array<int64_t, 2>{4097, 4104}, std::array<int64_t, 2>{2000, 2056}}) {
    const GemmPlan base = mkccl::gemmPlanModel(s[0], s[1], 4096, GemmVariant::Auto, kSms, kClusters);
    const GemmPlan p = mkccl::gemmPlainPreferCluster(base, s[0], s[1], GemmVariant::Auto, kSms, kClusters);
    EXPECT_EQ(p.bn, 128) << s[0] << "x" << s[1];
    EXPECT_EQ(p.clusterSize, 2) << s[0] << "x" << s[1];
    expectLaunchable(p, s[0], s[1], kSms, kClusters, false);
  }
  // Decode M, no cluster slots, forced variants, narrow tiles: unchanged.
  GemmPlan b = mkccl::gemmPlanModel(256, 8192, 8192, GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(mkccl::gemmPlainPreferCluster(b, 256, 8192, GemmVariant::Auto, kSms, kClusters).clusterSize,
            b.clusterSize);
  b = mkccl::gemmPlanModel(8192, 8192, 8192, GemmVariant::Auto, kSms, 0);
  EXPECT_EQ(mkccl::gemmPlainPreferCluster(b, 8192, 8192, GemmVariant::Auto, kSms, 0).clusterSize, 1);
  b = mkccl::gemmPlanModel(8192, 8192, 8192, GemmVariant::F256C1, kSms, kClusters);
  EXPECT_EQ(mkccl::gemmPlainPreferCluster(b, 8192, 8192, GemmVariant::F256C1, kSms, kClusters).clusterSize, 1);
  b = mkccl::gemmPlanModel(1000, 1032, 4096, GemmVariant::Auto, kSms, kClusters);
  const GemmPlan n = mkccl::gemmPlainPreferCluster(b, 1000, 1032, GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(n.bn, b.bn);
  EXPECT_EQ(n.clusterSize, b.clusterSize);
  // Random shapes and budgets: launchable, and never more waves than the model's plan.
  std::mt19937 rng(99);
  for (int i = 0; i < 500; ++i) {
    const int64_t M = 1 + rng() % 20000, N = 8 * (1 + rng() % 2000);
    const int budget = 1 + static_cast<int>(rng() % 140), clusters = static_cast<int>(rng() % 70);
    const GemmPlan base = mkccl::gemmPlanModel(M, N, 4096, GemmVariant::Auto, budget, clusters);
    const GemmPlan p = mkccl::gemmPlainPreferCluster(base, M, N, GemmVariant::Auto, budget, clusters);
    expectLaunchable(p, M, N, budget, clusters, false);
    if (p.clusterSize != base.clusterSize) {
      EXPECT_LE(ceilDiv(ceilDiv(ceilDiv(M, 128), 2) * ceilDiv(N, 256), p.ctas / 2),
                ceilDiv(ceilDiv(M, 128) * ceilDiv(N, 256), base.ctas));
    }
  }
}

}  // namespace

namespace {

// 128 x 192 tiles (the plain GEMM's only): auto weighs them when asked (withTile192) and takes them
// where they need fewer tile-widths of waves, e.g. 3072 x 3072 (384 tiles: three waves of 192
// against 2.2 of 256) where the other widths gain too little (2000 x 2056, which took 192 before
// them, now takes 144: OtherWidthsAuto); the fused planners' call (no withTile192) never returns
// them, not even for the 192 variants, which their callers map to the wide tile
// (gemmVariantWide); every plan launchable.
TEST(GemmPlan, Tile192ForThePlainGemmOnly) {
  for (const auto* rates : {&mkccl::kGemmTilesH200, &mkccl::kGemmTilesH100, &mkccl::kGemmTilesMisaligned}) {
    GemmPlan p = mkccl::gemmPlanModel(3072, 3072, 4096, GemmVariant::Auto, kSms, kClusters, *rates, true);
    EXPECT_EQ(p.bn, 192);
    // Whole waves of 128 x 256 tiles keep them.
    p = mkccl::gemmPlanModel(8192, 8192, 8192, GemmVariant::Auto, kSms, kClusters, *rates, true);
    EXPECT_EQ(p.bn, 256);
  }
  std::mt19937_64 rng(777);
  for (int i = 0; i < 20000; ++i) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 20000), N = 8 * (1 + static_cast<int64_t>(rng() % 2500));
    const int budget = 1 + static_cast<int>(rng() % kSms);
    const int maxClusters2 = static_cast<int>(rng() % (kClusters + 1));
    const GemmPlan fusedAuto = mkccl::gemmPlanModel(M, N, 4096, GemmVariant::Auto, budget, maxClusters2);
    EXPECT_NE(fusedAuto.bn, 192);
    for (GemmVariant v : {GemmVariant::F192C1, GemmVariant::F192C2}) {
      const GemmPlan f = mkccl::gemmPlanModel(M, N, 4096, mkccl::gemmVariantWide(v), budget, maxClusters2);
      EXPECT_EQ(f.bn, 256);
      EXPECT_EQ(f.clusterSize, v == GemmVariant::F192C2 ? 2 : 1);
      const GemmPlan plain = mkccl::gemmPlanModel(M, N, 4096, v, budget, maxClusters2, mkccl::kGemmTilesH200, true);
      EXPECT_EQ(plain.bn, 192);
      EXPECT_EQ(plain.clusterSize, v == GemmVariant::F192C2 ? 2 : 1);
      expectLaunchable(plain, M, N, budget, maxClusters2, true);
    }
    const GemmPlan a = mkccl::gemmPlanModel(M, N, 4096, GemmVariant::Auto, budget, maxClusters2, mkccl::kGemmTilesH200,
                                            true);
    expectLaunchable(a, M, N, budget, maxClusters2, false);
    // Never worse in the model than the plan without 128 x 192.
    EXPECT_LE(modelCost(a, M, N), modelCost(fusedAuto, M, N) * 1.0051) << M << "x" << N;
  }
}

// The plain GEMM's other widths: each forced variant is its (width, cluster) and launchable at any
// shape and budget; the kernels built without them read it as 128 x 128 with the same cluster.
TEST(GemmPlan, OtherWidthsForced) {
  std::mt19937_64 rng(777);
  for (int i = 0; i < mkccl::kGemmNarrowCount; ++i)
    for (int cs : {1, 2}) {
      const GemmVariant v = mkccl::gemmNarrowVariant(i, cs);
      int bn = 0, c = 0;
      ASSERT_TRUE(mkccl::gemmVariantNarrow(v, &bn, &c));
      EXPECT_EQ(mkccl::kGemmNarrowWidths[i], bn);
      EXPECT_EQ(cs, c);
      EXPECT_EQ(cs == 2 ? GemmVariant::F128C2 : GemmVariant::F128C1, mkccl::gemmVariantWide(v));
      for (int k = 0; k < 500; ++k) {
        const int64_t M = 1 + static_cast<int64_t>(rng() % 9000), N = 8 * (1 + static_cast<int64_t>(rng() % 1200));
        const int budget = 1 + static_cast<int>(rng() % kSms);
        const int maxClusters2 = static_cast<int>(rng() % (kClusters + 1));
        const GemmPlan p = mkccl::gemmPlanModel(M, N, 4096, v, budget, maxClusters2, mkccl::kGemmTilesH200, true);
        SCOPED_TRACE(testing::Message() << bn << "x" << cs << " " << M << "x" << N << " budget " << budget);
        EXPECT_EQ(bn, p.bn);
        EXPECT_EQ(cs, p.clusterSize);
        expectLaunchable(p, M, N, budget, maxClusters2, true);
      }
    }
  int bn = 0, c = 0;
  for (GemmVariant v : {GemmVariant::Auto, GemmVariant::Simple, GemmVariant::F256C2, GemmVariant::F192C1})
    EXPECT_FALSE(mkccl::gemmVariantNarrow(v, &bn, &c));
}

// Auto's other widths (plain GEMM, above decode M, at a 5% predicted gain): the odd set's shapes
// take the widths measured fastest there (one H100, each forced, perf/results/20261128-s10/
// 3-widths-h100/): 1000 x 1032 x 4096 128 x 80, 2000 x 2056 x 4096 144, 4097 x 4104 x 4096 208
// (then gemmPlainPreferCluster: 144 in clusters, 208 alone on 33 M-blocks), 4097 x 4104 x 4104 224
// in clusters; whole waves of 256 and 3072 x 3072 keep their tiles; never at decode M, never for
// the fused planners.
TEST(GemmPlan, OtherWidthsAuto) {
  auto plan = [](int64_t M, int64_t N, int64_t K, const mkccl::GemmTileRates& r) {
    return mkccl::gemmPlainPreferCluster(mkccl::gemmPlanModel(M, N, K, GemmVariant::Auto, kSms, kClusters, r, true), M,
                                         N, GemmVariant::Auto, kSms, kClusters);
  };
  GemmPlan p = plan(1000, 1032, 4096, mkccl::kGemmTilesH100);
  EXPECT_EQ(p.bn, 80);
  p = plan(2000, 2056, 4096, mkccl::kGemmTilesH100);
  EXPECT_EQ(p.bn, 144);
  EXPECT_EQ(p.clusterSize, 2);
  p = plan(4097, 4104, 4096, mkccl::kGemmTilesH100);
  EXPECT_EQ(p.bn, 208);
  EXPECT_EQ(p.clusterSize, 1);
  p = plan(4097, 4104, 4104, mkccl::kGemmTilesMisaligned);
  EXPECT_EQ(p.bn, 224);
  EXPECT_EQ(p.clusterSize, 2);
  for (const auto* r : {&mkccl::kGemmTilesH200, &mkccl::kGemmTilesH100}) {
    EXPECT_EQ(plan(8192, 8192, 4096, *r).bn, 256);
    EXPECT_EQ(plan(3072, 3072, 4096, *r).bn, 192);
  }
  std::mt19937_64 rng(99);
  for (int i = 0; i < 5000; ++i) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 9000), N = 8 * (1 + static_cast<int64_t>(rng() % 1200));
    const GemmPlan a = mkccl::gemmPlanModel(M, N, 4096, GemmVariant::Auto, kSms, kClusters, mkccl::kGemmTilesH200, true);
    expectLaunchable(a, M, N, kSms, kClusters, false);
    if (M <= mkccl::kGemmOtherWidthsMinRows) EXPECT_TRUE(a.bn == 128 || a.bn == 192 || a.bn == 256) << M << "x" << N;
    const GemmPlan f = mkccl::gemmPlanModel(M, N, 4096, GemmVariant::Auto, kSms, kClusters);
    EXPECT_TRUE(f.bn == 128 || f.bn == 256) << M << "x" << N;
  }
}

}  // namespace

// Clusters along N (gemm.cluster_n): whole-tile plans of M >= 128 take clusters of clusterSize x cn
// CTAs, no more than fit and no more than there are cluster tiles; everything else is unchanged.
TEST(GemmPlan, ClustersAlongN) {
  std::mt19937_64 rng(4242);
  for (int k = 0; k < 2000; ++k) {
    const int64_t M = 1 + static_cast<int64_t>(rng() % 9000), N = 8 * (1 + static_cast<int64_t>(rng() % 1200));
    const int budget = 1 + static_cast<int>(rng() % kSms);
    const int maxClusters2 = static_cast<int>(rng() % (kClusters + 1));
    const GemmPlan base = mkccl::gemmPlanModel(M, N, 4096, GemmVariant::Auto, budget, maxClusters2,
                                               mkccl::kGemmTilesH200, true);
    const int cn = 1 << (rng() % 3);
    const int maxClusters = static_cast<int>(rng() % (kSms / (cn * base.clusterSize) + 1));
    const GemmPlan p = mkccl::gemmWithClusterN(base, M, N, cn, maxClusters);
    SCOPED_TRACE(testing::Message() << M << "x" << N << " cn " << cn << " max " << maxClusters);
    EXPECT_EQ(base.bn, p.bn);
    EXPECT_EQ(base.clusterSize, p.clusterSize);
    if (cn == 1 || M < 128 || maxClusters < 1 || base.splits != 1) {
      EXPECT_EQ(1, p.clusterN);
      EXPECT_EQ(base.ctas, p.ctas);
      continue;
    }
    EXPECT_EQ(cn, p.clusterN);
    const int cs = p.clusterSize * cn;
    EXPECT_EQ(0, p.ctas % cs);
    EXPECT_GE(p.ctas, cs);
    EXPECT_LE(p.ctas / cs, maxClusters);
    const int64_t clusterTiles = ceilDiv(ceilDiv(M, 128), p.clusterSize) * ceilDiv(ceilDiv(N, p.bn), cn);
    EXPECT_LE(p.ctas / cs, clusterTiles) << "a cluster with no tile";
  }
  // Split plans keep single CTAs along N.
  GemmPlan split;
  split.splits = 3;
  split.clusterSize = 1;
  split.ctas = 96;
  EXPECT_EQ(1, mkccl::gemmWithClusterN(split, 1000, 4096, 2, 60).clusterN);
}
