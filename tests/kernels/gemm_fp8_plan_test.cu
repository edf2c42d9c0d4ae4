// CPU checks of the fp8 GEMM's plan (gemm_fp8_plan.h): block scales get 128 x 192 or 128 x 128
// tiles (never 128 x 256: the promotion's partial sums), no cluster around a single M-block;
// per-tensor scales get the engine's wave model with the fp8 tiles' efficiencies; every plan is
// launchable.
#include <gtest/gtest.h>
#include <stdint.h>
#include <random>
#include "ops/gemm/gemm_fp8_plan.h"

namespace {

using mkccl::GemmPlan;
using mkccl::GemmVariant;

constexpr int kSms = 132, kClusters = 66;

void expectLaunchable(const GemmPlan& p, int64_t M, int64_t N) {
  EXPECT_GE(p.ctas, p.clusterSize);
  EXPECT_EQ(0, p.ctas % p.clusterSize);
  EXPECT_LE(p.ctas, kSms);
  const int64_t tiles = ((M + 127) / 128 + p.clusterSize - 1) / p.clusterSize * p.clusterSize * ((N + p.bn - 1) / p.bn);
  EXPECT_LE(p.ctas, tiles) << "idle CTAs beyond the tiles";
}

TEST(GemmFp8Plan, BlockScalesTiles) {
  const GemmVariant all[] = {GemmVariant::Auto, GemmVariant::Simple, GemmVariant::F256C2,
                             GemmVariant::F256C1, GemmVariant::F128C1, GemmVariant::F128C2};
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 500; ++i) {
    const int64_t M = 1 + rng() % 20000, N = 8 * (1 + rng() % 3000), K = 16 * (1 + rng() % 1000);
    for (GemmVariant v : all) {
      SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K << " variant " << static_cast<int>(v));
      const GemmPlan p = mkccl::gemmFp8PlanModel(mkcclFp8ScaleBlock, M, N, K, v, kSms, kClusters);
      EXPECT_FALSE(p.simple);
      EXPECT_TRUE(p.bn == 128 || p.bn == 192) << p.bn;  // no 128 x 256: the partial sums' registers
      if (v == GemmVariant::F256C2 || v == GemmVariant::F256C1) EXPECT_EQ(192, p.bn);
      if (v == GemmVariant::F128C2 || v == GemmVariant::F128C1 || v == GemmVariant::Simple) EXPECT_EQ(128, p.bn);
      if (v == GemmVariant::F128C2 || v == GemmVariant::F256C2) EXPECT_EQ(2, p.clusterSize);
      if (v == GemmVariant::F128C1 || v == GemmVariant::F256C1 || v == GemmVariant::Simple)
        EXPECT_EQ(1, p.clusterSize);
      if (v == GemmVariant::Auto && M <= 128) EXPECT_EQ(1, p.clusterSize) << "a cluster around one M-block";
      expectLaunchable(p, M, N);
    }
  }
  // Large shapes take the wide tile with the 2-CTA cluster.
  const GemmPlan big = mkccl::gemmFp8PlanModel(mkcclFp8ScaleBlock, 8192, 8192, 8192, GemmVariant::Auto, kSms, kClusters);
  EXPECT_EQ(192, big.bn);
  EXPECT_EQ(2, big.clusterSize);
  // 4096^3: 6 waves of 128 x 192 tiles (5.3 full) against 8 of 128 x 128 (7.8): the narrow tile.
  EXPECT_EQ(128, mkccl::gemmFp8PlanModel(mkcclFp8ScaleBlock, 4096, 4096, 4096, GemmVariant::Auto, kSms, kClusters).bn);
}

TEST(GemmFp8Plan, TensorScalesTiles) {
  std::mt19937_64 rng(6789);
  const GemmVariant forced[] = {GemmVariant::F256C2, GemmVariant::F256C1, GemmVariant::F128C2, GemmVariant::F128C1};
  for (int i = 0; i < 500; ++i) {
    const int64_t M = 1 + rng() % 20000, N = 8 * (1 + rng() % 3000), K = 16 * (1 + rng() % 1000);
    SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K);
    const GemmPlan p = mkccl::gemmFp8PlanModel(mkcclFp8ScaleTensor, M, N, K, GemmVariant::Auto, kSms, kClusters);
    EXPECT_FALSE(p.simple);
    EXPECT_TRUE(p.bn == 128 || p.bn == 256) << p.bn;
    if (M <= 128) EXPECT_EQ(1, p.clusterSize) << "a cluster around one M-block";
    expectLaunchable(p, M, N);
    for (GemmVariant v : forced) {  // a forced variant is taken as named
      const GemmPlan f = mkccl::gemmFp8PlanModel(mkcclFp8ScaleTensor, M, N, K, v, kSms, kClusters);
      EXPECT_EQ(v == GemmVariant::F256C2 || v == GemmVariant::F256C1 ? 256 : 128, f.bn);
      EXPECT_EQ(v == GemmVariant::F256C2 || v == GemmVariant::F128C2 ? 2 : 1, f.clusterSize);
      expectLaunchable(f, M, N);
    }
    // simple has no fp8 kernel: 128x1.
    const GemmPlan s = mkccl::gemmFp8PlanModel(mkcclFp8ScaleTensor, M, N, K, GemmVariant::Simple, kSms, kClusters);
    EXPECT_FALSE(s.simple);
    EXPECT_EQ(128, s.bn);
    EXPECT_EQ(1, s.clusterSize);
  }
  auto plan = [](int64_t M, int64_t N, int64_t K) {
    return mkccl::gemmFp8PlanModel(mkcclFp8ScaleTensor, M, N, K, GemmVariant::Auto, kSms, kClusters);
  };
  // Large shapes take 128 x 256 tiles (4096^3: 3.9 waves of them against 7.8 of 128 x 128).
  EXPECT_EQ(256, plan(8192, 8192, 8192).bn);
  EXPECT_EQ(256, plan(4096, 4096, 4096).bn);
  // Shapes whose 128 x 256 tiles leave the last wave nearly empty take 128 x 128 with the cluster
  // (one H200: 1000 x 4104 x 4112 52.5 -> 42.4 us; 4096 x 2112 x 7168 117.7 -> 104.3).
  for (const GemmPlan& q : {plan(1000, 4104, 4112), plan(4096, 2112, 7168)}) {
    EXPECT_EQ(128, q.bn);
    EXPECT_EQ(2, q.clusterSize);
  }
  // One wave of 128 x 256 tiles against two of 128 x 128: the wide tile (2049 x 1544 x 1040).
  EXPECT_EQ(256, plan(2049, 1544, 1040).bn);
}

}  // namespace
