// CPU checks of split K (split_k_model.h, split_k.cuh): the scheduler hands out every (tile, part)
// unit exactly once and the parts of a tile cover its k-blocks exactly; the model splits the
// decode shapes the issue names (fewer tiles than SMs) and leaves large shapes alone; forced
// values are honoured within the k-blocks and the workspace.
#include <gtest/gtest.h>
#include <stdint.h>
#include <stdio.h>
#include <algorithm>
#include <array>
#include <random>
#include <vector>
#include "kernels/gemm/split_k.cuh"
#include "ops/gemm/gemm_pack.h"
#include "ops/gemm/split_k_model.h"
#include "ops/gemm/stream_k_model.h"

namespace {

using mkccl::GemmPlan;
using mkccl::GemmVariant;

constexpr int kSms = 132, kClusters = 66, kUnits = 2 * kSms;

GemmPlan planFor(int64_t M, int64_t N, int64_t K, int forced = 0, GemmVariant v = GemmVariant::Auto,
                 int budget = kSms) {
  const GemmPlan plain = mkccl::gemmPlanModel(M, N, K, v, budget, kClusters);
  return mkccl::gemmSplitKPlan(plain, M, N, K, v, forced, budget, kUnits);
}

// The kernel arguments the schedulers read: the tile grid, the k-blocks, the plain GEMM's raster
// (bands of 16 M-blocks, no clusters).
mkccl::GemmArgs rasterArgs(int mBlocks, int nBlocks, int kBlocks) {
  mkccl::GemmArgs g{};
  g.kBlocks = kBlocks;
  g.sched.mBlocks = mBlocks;
  g.sched.nBlocks = nBlocks;
  g.sched.clusterM = 1;
  g.sched.group = 16;
  return g;
}

// Walks every CTA's schedule: each unit once, each tile's parts cover [0, kBlocks) without overlap.
void checkSchedule(int mBlocks, int nBlocks, int kBlocks, int splits, int ctas) {
  SCOPED_TRACE(testing::Message() << mBlocks << "x" << nBlocks << " tiles, " << kBlocks << " k-blocks, " << splits
                                  << " parts, " << ctas << " CTAs");
  mkccl::GemmArgs g{};
  g.kBlocks = kBlocks;
  g.sched.mBlocks = mBlocks;
  g.sched.nBlocks = nBlocks;
  mkccl::SplitKParams p{nullptr, nullptr, splits};
  std::vector<int> covered(static_cast<size_t>(mBlocks) * nBlocks * kBlocks, 0);
  std::vector<int> parts(static_cast<size_t>(mBlocks) * nBlocks * splits, 0);
  for (int c = 0; c < ctas; ++c) {
    mkccl::SplitKScheduler s(g, p, c, ctas, 0);
    mkccl::SplitKTile t;
    while (s.next(t)) {
      ASSERT_GE(t.m, 0);
      ASSERT_LT(t.m, mBlocks);
      ASSERT_GE(t.n, 0);
      ASSERT_LT(t.n, nBlocks);
      ASSERT_EQ(t.tile, t.n * mBlocks + t.m);
      ASSERT_LT(t.kBegin, t.kEnd) << "an empty part";
      ++parts[static_cast<size_t>(t.tile) * splits + t.split];
      for (int kb = t.kBegin; kb < t.kEnd; ++kb) ++covered[static_cast<size_t>(t.tile) * kBlocks + kb];
    }
  }
  for (int v : parts) ASSERT_EQ(v, 1);
  for (int v : covered) ASSERT_EQ(v, 1);
}

TEST(GemmSplitK, ScheduleCoversEveryKBlockOnce) {
  checkSchedule(1, 64, 128, 2, 128);
  checkSchedule(1, 16, 32, 8, 128);
  checkSchedule(2, 3, 7, 7, 5);    // one k-block per part
  checkSchedule(1, 1, 65, 16, 3);  // uneven parts, fewer CTAs than units
  std::mt19937 rng(12345);
  for (int i = 0; i < 50; ++i) {
    const int kb = 1 + static_cast<int>(rng() % 200);
    checkSchedule(1 + static_cast<int>(rng() % 3), 1 + static_cast<int>(rng() % 40), kb,
                  1 + static_cast<int>(rng() % std::min(kb, 16)), 1 + static_cast<int>(rng() % 140));
  }
}

// The decode regime (split_k_model.h's memory model, fitted to an H100 sweep of every forced part
// count): 32 tiles of 128 x 128 (N = 4096, M <= 128) are too few CTAs to pull W, so they split;
// 64 tiles already pull ~2.5 TB/s and split only when K is long enough to pay for the parts
// (28672); the fp32 partials of 128 live rows make 128 x 8192 x 8192 faster unsplit (measured 56.4
// against 61.3 us). No plan has more units than the workspace or parts under 4 k-blocks.
TEST(GemmSplitK, DecodeShapesSplit) {
  const int64_t Ms[] = {1, 8, 16, 32, 64, 128};
  const int64_t NKs[][2] = {{2048, 2048}, {4096, 4096}, {4096, 8192}, {4096, 14336}, {8192, 28672}};
  for (int64_t M : Ms)
    for (const auto& nk : NKs) {
      const GemmPlan p = planFor(M, nk[0], nk[1]);
      const int64_t tiles = (M + 127) / 128 * ((nk[0] + p.bn - 1) / p.bn);
      printf("plan %lldx%lldx%lld: 128x%d, %d parts on %d CTAs\n", (long long)M, (long long)nk[0], (long long)nk[1],
             p.bn, p.splits, p.ctas);
      EXPECT_GT(p.splits, 1) << M << "x" << nk[0] << "x" << nk[1];
      EXPECT_TRUE(p.bn == 128 || p.bn == mkccl::kSplitKNarrowWidth) << p.bn;
      if (p.bn != 128) EXPECT_LE(tiles * p.splits, kSms) << "128 x 64 parts in one wave only";
      EXPECT_EQ(p.clusterSize, 1);
      EXPECT_LE(tiles * p.splits, kUnits);
      EXPECT_GE(tiles * p.splits, 32) << "enough CTAs to pull W";
      EXPECT_LE(p.ctas, kSms);
      EXPECT_GE((nk[1] / 64) / p.splits, mkccl::kSplitKMinKBlocks);
    }
  // The measured best counts (H100): 2 parts at 128 x 4096 x 4096 (23.4 us; 3: 24.9, 4: 25.8),
  // none at 128 x 8192 x 8192 and 1 x 8192 x 4096, 2 at 256 x 4096 x 8192 (39.4 against 45.3
  // unsplit) and at 128 x 8192 x 28672 (172.7 against 182.0).
  EXPECT_EQ(planFor(128, 4096, 4096).splits, 2);
  EXPECT_EQ(planFor(128, 8192, 8192).splits, 1);
  EXPECT_EQ(planFor(1, 8192, 4096).splits, 1);
  EXPECT_EQ(planFor(256, 4096, 8192).splits, 2);
  const GemmPlan p = planFor(128, 8192, 28672);
  EXPECT_EQ(p.splits, 2);
  EXPECT_EQ(p.ctas, 128);
}

// The H200's rates (its HBM is 1.4x the H100's, so more CTAs must pull W): the counts that measured
// best there (perf/results/20261127-s4-splitk-h200-1xNVIDIA_H200/, every count forced), where they
// differ from the H100's choice; the rates follow the peak HBM rate (0: unknown, the H100's).
TEST(GemmSplitK, H200Rates) {
  EXPECT_EQ(&mkccl::splitKRatesFor(0), &mkccl::kSplitKRatesH100);
  EXPECT_EQ(&mkccl::splitKRatesFor(3.35e6), &mkccl::kSplitKRatesH100);
  EXPECT_EQ(&mkccl::splitKRatesFor(4.8e6), &mkccl::kSplitKRatesH200);
  auto h200 = [](int64_t M, int64_t N, int64_t K) {
    const GemmPlan plain = mkccl::gemmPlanModel(M, N, K, GemmVariant::Auto, kSms, kClusters);
    return mkccl::gemmSplitKPlan(plain, M, N, K, GemmVariant::Auto, 0, kSms, kUnits, mkccl::kSplitKRatesH200).splits;
  };
  // Whole 128 x 64 tiles (NarrowPartsAuto) where 128 x 128 tiles split in two (42.2 us against
  // 47.0 unsplit at 64 rows, 44.7 against 47.3 at 128).
  EXPECT_EQ(h200(64, 8192, 8192), 1);
  EXPECT_EQ(h200(128, 8192, 8192), 1);
  EXPECT_EQ(h200(64, 4096, 8192), 2);   // 128 x 64 parts (NarrowPartsAuto): 27.7 us, 128 x 128 in three 28.1
  EXPECT_EQ(h200(1, 8192, 4096), 2);    // 25.3 against 26.4 unsplit
  EXPECT_EQ(h200(128, 8192, 4096), 1);
  EXPECT_EQ(h200(256, 8192, 8192), 1);
  EXPECT_EQ(planFor(64, 8192, 8192).splits, 1) << "the H100's rates are unchanged";
}

// Outputs of more than 256 rows are never split by the rule (1000 x 1032 x 4096 measured 36.6 us
// in three parts against 26.2 unsplit).
TEST(GemmSplitK, ComputeBoundShapesDoNotSplit) {
  for (const int64_t M : {257, 300, 1000, 2000})
    EXPECT_EQ(planFor(M, 1032, 4104).splits, 1) << M;
}

// Shapes that already fill the GPU, and K too short to split, stay as they were.
TEST(GemmSplitK, LargeAndShortShapesDoNotSplit) {
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {8000, 8184, 4104}, {2048, 8192, 8192}, {256, 8192, 8192},
                               {64, 28672, 4096},  {16, 4096, 256},    {1, 8, 8},           {4096, 128, 64}};
  for (const auto& s : shapes) {
    const GemmPlan plain = mkccl::gemmPlanModel(s[0], s[1], s[2], GemmVariant::Auto, kSms, kClusters);
    const GemmPlan p = planFor(s[0], s[1], s[2]);
    EXPECT_EQ(p.splits, 1) << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_EQ(p.bn, plain.bn);
    EXPECT_EQ(p.ctas, plain.ctas);
  }
}

// gemm.split_k: 1 never splits; s > 1 is honoured, capped by the k-blocks and the workspace; a
// forced tile other than 128x1, or the debug kernel, is not split.
TEST(GemmSplitK, ForcedValues) {
  EXPECT_EQ(planFor(16, 8192, 8192, 1).splits, 1);
  EXPECT_EQ(planFor(16, 8192, 8192, 3).splits, 3);
  EXPECT_EQ(planFor(16, 8192, 8192, 16).splits, 4);  // 64 tiles: 4 parts fill the 264-unit workspace
  EXPECT_EQ(planFor(16, 256, 128, 16).splits, 2);    // 2 k-blocks
  EXPECT_EQ(planFor(8192, 8192, 8192, 16).splits, 1);  // 4096 tiles: no room
  EXPECT_EQ(planFor(16, 8192, 8192, 4, GemmVariant::F128C1).splits, 4);
  EXPECT_EQ(planFor(16, 8192, 8192, 4, GemmVariant::F256C1).splits, 1);
  EXPECT_EQ(planFor(16, 8192, 8192, 4, GemmVariant::Simple).splits, 1);
  const GemmPlan p = planFor(300, 1000, 1000, 5);  // 3 x 8 tiles x 5 parts = 120 units
  EXPECT_EQ(p.splits, 5);
  EXPECT_EQ(p.ctas, 120);
  EXPECT_EQ(planFor(16, 8192, 8192, 0, GemmVariant::Auto, 10).ctas, 10);  // a budget is respected
}

}  // namespace

namespace {

// The packing rule (gemm_pack.h): only on request (gemm.pack_k=on), only K off a 64-element
// multiple, within the workspace bound, never for the debug kernel; auto and off never pack (the
// unpacked GEMM measured as fast or faster once misaligned rows got 128-byte L2 promotion).
TEST(GemmPack, Rule) {
  EXPECT_FALSE(mkccl::gemmShouldPack(8000, 8184, 4104, false, 0));  // auto
  EXPECT_FALSE(mkccl::gemmShouldPack(2000, 2056, 4104, false, 0));
  EXPECT_TRUE(mkccl::gemmShouldPack(8000, 8184, 4104, false, 2));   // gemm.pack_k=on
  EXPECT_TRUE(mkccl::gemmShouldPack(1000, 1032, 4104, false, 2));
  EXPECT_TRUE(mkccl::gemmShouldPack(8, 8, 72, false, 2));
  EXPECT_FALSE(mkccl::gemmShouldPack(8000, 8184, 4096, false, 2));  // aligned already
  EXPECT_FALSE(mkccl::gemmShouldPack(8000, 8184, 4104, false, 1));  // gemm.pack_k=off
  EXPECT_FALSE(mkccl::gemmShouldPack(8000, 8184, 4104, true, 2));   // simple
  EXPECT_FALSE(mkccl::gemmShouldPack(300000, 8192, 4104, false, 2));  // over the workspace bound
  EXPECT_EQ(mkccl::gemmPackedPitch(4104), 4160);
  EXPECT_EQ(mkccl::gemmPackedPitch(64), 64);
}

}  // namespace

namespace {

// Stream-K (split_k.cuh with splits == 0): every CTA's schedule walked. Whole tiles below dpTiles
// once each, in the raster order; every k-block of every stream-K tile exactly once; the parts of a
// tile come from consecutive CTAs (ctaOf), each CTA uses at most its two slots and no slot twice;
// the epilogue's part count (ctaOf of the tile's first and last k-block) is the number of pieces
// the schedules hold.
void checkStreamK(int mBlocks, int nBlocks, int kBlocks, int dpTiles, int skTiles, int ctas) {
  SCOPED_TRACE(testing::Message() << mBlocks << "x" << nBlocks << " tiles, " << kBlocks << " k-blocks, " << dpTiles
                                  << " whole + " << skTiles << " stream-K on " << ctas << " CTAs");
  ASSERT_EQ(dpTiles + skTiles, mBlocks * nBlocks);
  const mkccl::GemmArgs g = rasterArgs(mBlocks, nBlocks, kBlocks);
  mkccl::SplitKParams p{nullptr, nullptr, 0};
  p.dpTiles = dpTiles;
  p.skTiles = skTiles;
  p.ctas = ctas;
  const mkccl::StreamKSpan sp{static_cast<int64_t>(skTiles) * kBlocks, ctas, kBlocks};
  std::vector<int> covered(static_cast<size_t>(mBlocks) * nBlocks * kBlocks, 0);
  std::vector<int> coordSeen(static_cast<size_t>(mBlocks) * nBlocks, -1);
  std::vector<int> pieces(static_cast<size_t>(skTiles), 0), slotUse(static_cast<size_t>(2 * ctas), 0);
  std::vector<int> firstCta(static_cast<size_t>(skTiles), 1 << 30), lastCta(static_cast<size_t>(skTiles), -1);
  for (int c = 0; c < ctas; ++c) {
    mkccl::SplitKScheduler s(g, p, c, ctas, 0);
    mkccl::SplitKTile t;
    while (s.next(t)) {
      ASSERT_GE(t.m, 0);
      ASSERT_LT(t.m, mBlocks);
      ASSERT_GE(t.n, 0);
      ASSERT_LT(t.n, nBlocks);
      ASSERT_LT(t.kBegin, t.kEnd) << "an empty piece";
      ASSERT_LE(t.kEnd, kBlocks);
      const size_t coord = static_cast<size_t>(t.n) * mBlocks + t.m;
      // One linear tile, one coordinate (the raster order is a permutation).
      if (coordSeen[coord] < 0) coordSeen[coord] = t.tile;
      ASSERT_EQ(coordSeen[coord], t.tile);
      for (int kb = t.kBegin; kb < t.kEnd; ++kb) ++covered[coord * kBlocks + kb];
      if (t.tile < dpTiles) {
        ASSERT_EQ(t.split, -1);
        ASSERT_EQ(t.tile % ctas, c) << "whole tiles go round robin";
        continue;
      }
      const int sk = t.tile - dpTiles;
      if (t.split < 0) {
        ASSERT_EQ(t.kBegin, 0);
        ASSERT_EQ(t.kEnd, kBlocks);
        ++pieces[sk];
        continue;
      }
      ASSERT_EQ(t.split, sk);
      ASSERT_EQ(t.slot / 2, c);
      ASSERT_EQ(t.slot, sp.slot(c, sk));
      ++slotUse[t.slot];
      ++pieces[sk];
      firstCta[sk] = std::min(firstCta[sk], c);
      lastCta[sk] = std::max(lastCta[sk], c);
    }
  }
  for (int v : covered) ASSERT_EQ(v, 1);
  for (int v : coordSeen) ASSERT_GE(v, 0);
  for (int v : slotUse) ASSERT_LE(v, 1) << "a slot used twice";
  for (int sk = 0; sk < skTiles; ++sk) {
    if (lastCta[sk] < 0) {
      ASSERT_EQ(pieces[sk], 1);
      continue;
    }
    const int64_t it0 = static_cast<int64_t>(sk) * kBlocks;
    ASSERT_EQ(sp.ctaOf(it0), firstCta[sk]) << "tile " << sk;
    ASSERT_EQ(sp.ctaOf(it0 + kBlocks - 1), lastCta[sk]) << "tile " << sk;
    ASSERT_EQ(pieces[sk], lastCta[sk] - firstCta[sk] + 1) << "tile " << sk << ": parts from consecutive CTAs";
    ASSERT_GE(pieces[sk], 2);
  }
}

// The whole reduction protocol of the epilogue (splitKParts: part count, own part, counter, slots)
// on the host: CTAs advance unit by unit in a random interleaving; a cut tile's unit writes its
// slot (tagged with the tile) and counts in; the part that counts last reads every part's slot in
// part order and must find this tile's pieces covering each k-block once; counters end at zero;
// every tile is stored exactly once; no slot is written twice.
void emulateReduction(int mBlocks, int nBlocks, int kBlocks, const mkccl::SplitKParams& p, int ctas, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << mBlocks << "x" << nBlocks << " tiles, " << kBlocks << " k-blocks, splits "
                                  << p.splits << ", " << p.dpTiles << "+" << p.skTiles << " on " << ctas << " CTAs");
  const mkccl::GemmArgs g = rasterArgs(mBlocks, nBlocks, kBlocks);
  const int tiles = mBlocks * nBlocks;
  std::vector<std::vector<mkccl::SplitKTile>> units(static_cast<size_t>(ctas));
  for (int c = 0; c < ctas; ++c) {
    mkccl::SplitKScheduler s(g, p, c, ctas, 0);
    mkccl::SplitKTile t;
    while (s.next(t)) units[c].push_back(t);
  }
  struct Slot {
    int tile = -1;
    int64_t sum = 0, count = 0;
    int writes = 0;
  };
  const size_t nSlots =
      p.splits > 0 ? static_cast<size_t>(tiles - p.dpTiles) * p.splits : static_cast<size_t>(2 * ctas);
  std::vector<Slot> slots(nSlots);
  std::vector<int> counters(static_cast<size_t>(2 * tiles), 0), stored(static_cast<size_t>(tiles), 0);
  std::vector<size_t> pos(static_cast<size_t>(ctas), 0);
  const int64_t full = static_cast<int64_t>(kBlocks) * (kBlocks + 1) / 2;  // sum of (kb + 1)
  std::mt19937 rng(seed);
  int live = 0;
  for (const auto& u : units) live += u.empty() ? 0 : 1;
  while (live > 0) {
    const int c = static_cast<int>(rng() % ctas);
    if (pos[c] >= units[c].size()) continue;
    const mkccl::SplitKTile& t = units[c][pos[c]++];
    if (pos[c] == units[c].size()) --live;
    int64_t mine = 0;
    for (int kb = t.kBegin; kb < t.kEnd; ++kb) mine += kb + 1;
    if (p.splits == 1 || t.split < 0) {
      ASSERT_EQ(mine, full);
      ++stored[t.tile];
      continue;
    }
    const mkccl::SplitKParts parts = mkccl::splitKParts(p, kBlocks, t);
    ASSERT_GE(parts.me, 0);
    ASSERT_LT(parts.me, parts.parts);
    const int64_t own = parts.slot(parts.me);
    ASSERT_GE(own, 0);
    ASSERT_LT(own, static_cast<int64_t>(nSlots));
    ASSERT_GE(parts.counter, 0);
    ASSERT_LT(parts.counter, static_cast<int64_t>(counters.size()));
    Slot& sl = slots[own];
    ASSERT_EQ(sl.writes, 0) << "slot " << own << " written twice";
    sl = Slot{t.tile, mine, t.kEnd - t.kBegin, 1};
    if (counters[parts.counter]++ != parts.parts - 1) continue;
    int64_t sum = 0, count = 0;
    for (int j = 0; j < parts.parts; ++j) {
      const Slot& o = slots[parts.slot(j)];
      ASSERT_EQ(o.tile, t.tile) << "part " << j << " of tile " << t.tile << " reads another tile's slot";
      sum += o.sum;
      count += o.count;
    }
    ASSERT_EQ(count, kBlocks);
    ASSERT_EQ(sum, full);
    counters[parts.counter] = 0;
    ++stored[t.tile];
  }
  for (int v : stored) ASSERT_EQ(v, 1);
  for (int v : counters) ASSERT_EQ(v, 0);
}

TEST(GemmStreamK, ReductionProtocol) {
  std::mt19937 rng(4242);
  for (int i = 0; i < 80; ++i) {
    const int mb = 1 + static_cast<int>(rng() % 12), nb = 1 + static_cast<int>(rng() % 12);
    const int kb = 8 + static_cast<int>(rng() % 100);
    const int budget = 2 + static_cast<int>(rng() % 140);
    const mkccl::StreamKSplit s = mkccl::gemmStreamKSplit(static_cast<int64_t>(mb) * nb, kb, budget);
    if (s.skTiles == 0) continue;
    mkccl::SplitKParams p{nullptr, nullptr, 0};
    p.dpTiles = s.dpTiles;
    p.skTiles = s.skTiles;
    p.ctas = s.ctas;
    emulateReduction(mb, nb, kb, p, s.ctas, static_cast<uint32_t>(rng()));
  }
  for (int i = 0; i < 40; ++i) {  // uniform parts (decode split K) through the same protocol
    const int nb = 1 + static_cast<int>(rng() % 40), kb = 1 + static_cast<int>(rng() % 100);
    mkccl::SplitKParams p{nullptr, nullptr, 1 + static_cast<int>(rng() % std::min(kb, 16))};
    emulateReduction(1 + static_cast<int>(rng() % 2), nb, kb, p, 1 + static_cast<int>(rng() % 132),
                     static_cast<uint32_t>(rng()));
  }
}

TEST(GemmStreamK, ScheduleCoversEveryKBlockOnce) {
  checkStreamK(8, 5, 64, 0, 40, 132);       // 1000 x 1032 x 4096, 128 x 256
  checkStreamK(33, 17, 64, 396, 165, 132);  // 4097 x 4104 x 4096: three whole waves
  checkStreamK(16, 9, 65, 0, 144, 132);     // 2000 x 2056 x 4104
  checkStreamK(3, 5, 16, 0, 15, 60);        // fewer CTAs than SMs: 4 k-blocks each
  checkStreamK(1, 1, 9, 0, 1, 2);
  std::mt19937 rng(777);
  for (int i = 0; i < 60; ++i) {
    const int mb = 1 + static_cast<int>(rng() % 20), nb = 1 + static_cast<int>(rng() % 20);
    const int kb = 8 + static_cast<int>(rng() % 120);
    const int budget = 2 + static_cast<int>(rng() % 140);
    const mkccl::StreamKSplit s = mkccl::gemmStreamKSplit(static_cast<int64_t>(mb) * nb, kb, budget);
    if (s.skTiles == 0) continue;
    ASSERT_LE(s.ctas, budget);
    ASSERT_GE(static_cast<int64_t>(s.skTiles) * kb / s.ctas, mkccl::kStreamKMinKBlocks);
    checkStreamK(mb, nb, kb, s.dpTiles, s.skTiles, s.ctas);
  }
}

GemmPlan skPlanFor(int64_t M, int64_t N, int64_t K, int forced = 0, GemmVariant v = GemmVariant::Auto) {
  const GemmPlan plain = mkccl::gemmPlanModel(M, N, K, v, kSms, kClusters);
  return mkccl::gemmStreamKPlan(plain, M, N, K, v, forced, kSms, 4 * kSms);
}

// Stream-K only when forced (gemm.stream_k=on): wherever a region exists, with the variant's tile
// if it forces 256x1 or 128x1; never by auto or off, never for cluster variants or the debug kernel.
TEST(GemmStreamK, OnlyWhenForced) {
  for (const auto& s : std::vector<std::array<int64_t, 3>>{
           {1000, 1032, 4096}, {1000, 1032, 4104}, {2000, 2056, 4104}, {4097, 4104, 4096}, {4097, 4104, 4104}}) {
    EXPECT_EQ(skPlanFor(s[0], s[1], s[2]).splits, 1) << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_EQ(skPlanFor(s[0], s[1], s[2], 1).splits, 1);
    const GemmPlan p = skPlanFor(s[0], s[1], s[2], 2);
    printf("stream-K forced %lldx%lldx%lld: 128x%d, %d whole + %d cut tiles on %d CTAs\n", (long long)s[0],
           (long long)s[1], (long long)s[2], p.bn, p.dpTiles, p.skTiles, p.ctas);
    EXPECT_EQ(p.splits, 0) << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_EQ(p.clusterSize, 1);
    EXPECT_LE(p.ctas, kSms);
    EXPECT_LE(2 * p.ctas * (p.bn / 128), 4 * kSms) << "two partials per CTA fit the workspace";
  }
  EXPECT_EQ(skPlanFor(1000, 1032, 4096, 2, GemmVariant::F256C2).splits, 1);
  EXPECT_EQ(skPlanFor(1000, 1032, 256, 2).splits, 1);   // 4 k-blocks: too short to cut
  EXPECT_EQ(skPlanFor(16, 8192, 8192, 2).splits, 0);    // forced: wherever a region exists
  const GemmPlan f = skPlanFor(1000, 1032, 4096, 2, GemmVariant::F128C1);
  EXPECT_EQ(f.splits, 0);
  EXPECT_EQ(f.bn, 128);
  EXPECT_EQ(skPlanFor(1000, 1032, 4096, 2, GemmVariant::Simple).splits, 1);
}


// The split remainder (splits >= 2, dpTiles = whole waves): every tile once, the whole ones in the
// first dpTiles of the raster order, the rest in uniform parts covering its k-blocks once; each
// CTA's whole tiles before its parts; the reduction protocol in random interleavings.
void checkRemainder(int mBlocks, int nBlocks, int kBlocks, int splits, int dpTiles, int ctas, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << mBlocks << "x" << nBlocks << " tiles, " << kBlocks << " k-blocks, " << dpTiles
                                  << " whole, " << splits << " parts, " << ctas << " CTAs");
  const mkccl::GemmArgs g = rasterArgs(mBlocks, nBlocks, kBlocks);
  mkccl::SplitKParams p{nullptr, nullptr, splits};
  p.dpTiles = dpTiles;
  p.ctas = ctas;
  const int tiles = mBlocks * nBlocks;
  std::vector<int> covered(static_cast<size_t>(tiles) * kBlocks, 0), seenAt(static_cast<size_t>(tiles), -1);
  for (int c = 0; c < ctas; ++c) {
    mkccl::SplitKScheduler s(g, p, c, ctas, 0);
    mkccl::SplitKTile t;
    bool inParts = false;
    while (s.next(t)) {
      ASSERT_GE(t.tile, 0);
      ASSERT_LT(t.tile, tiles);
      ASSERT_LT(t.kBegin, t.kEnd);
      if (t.tile < dpTiles) {
        ASSERT_EQ(t.split, -1);
        ASSERT_FALSE(inParts) << "a whole tile after a part";
        ASSERT_EQ(t.kEnd - t.kBegin, kBlocks);
      } else {
        ASSERT_GE(t.split, 0);
        ASSERT_LT(t.split, splits);
        inParts = true;
      }
      // The raster coordinate of the linear index, as the whole-tile kernel's scheduler gives it.
      mkccl::dev::TileCoord rc{0, 0};
      mkccl::dev::GroupedTileScheduler(g.sched, t.tile, 1, 0).next(rc);
      ASSERT_EQ(t.m, rc.m);
      ASSERT_EQ(t.n, rc.n);
      for (int kb = t.kBegin; kb < t.kEnd; ++kb) ++covered[static_cast<size_t>(t.tile) * kBlocks + kb];
    }
  }
  for (int v : covered) ASSERT_EQ(v, 1);
  emulateReduction(mBlocks, nBlocks, kBlocks, p, ctas, seed);
}

TEST(GemmSplitRemainder, ScheduleAndReduction) {
  checkRemainder(16, 11, 64, 3, 132, 132, 1);  // 2000 x 2056 x 4096 in 128 x 192: 44 tiles left
  checkRemainder(33, 22, 64, 2, 660, 132, 2);  // 4097 x 4104 x 4096 in 128 x 192: 66 left
  checkRemainder(8, 6, 64, 2, 0, 96, 3);       // 1000 x 1032 x 4096 in 128 x 192: one partial wave
  checkRemainder(3, 5, 16, 4, 0, 60, 4);       // 333 x 520 x 1000 in 128 x 128
  std::mt19937 rng(31337);
  for (int i = 0; i < 60; ++i) {
    const int mb = 1 + static_cast<int>(rng() % 20), nb = 1 + static_cast<int>(rng() % 20);
    const int kb = 8 + static_cast<int>(rng() % 100), P = 2 + static_cast<int>(rng() % 140);
    const int tiles = mb * nb, full = tiles / P, rest = tiles - full * P;
    if (rest == 0) continue;
    const int s = std::min({P / rest, mkccl::kRemainderMaxSplits, kb / mkccl::kStreamKMinKBlocks});
    if (s < 2) continue;
    checkRemainder(mb, nb, kb, s, full * P, full > 0 ? P : rest * s, static_cast<uint32_t>(rng()));
  }
}

GemmPlan remPlanFor(int64_t M, int64_t N, int64_t K, int forced = 0, GemmVariant v = GemmVariant::Auto,
                    const mkccl::GemmTileRates& rates = mkccl::kGemmTilesH200) {
  const bool misaligned = &rates == &mkccl::kGemmTilesMisaligned;
  const GemmPlan plain = mkccl::gemmPlainPreferCluster(
      mkccl::gemmPlanModel(M, N, K, v, kSms, kClusters, rates, true), M, N, v, kSms, kClusters);
  return mkccl::gemmSplitRemainderPlan(plain, M, N, K, v, forced, kSms, 4 * kSms, kUnits, mkccl::kSplitKMaxRows,
                                       rates, misaligned);
}

// The rule: 300 x 1480 x 4096 (the plain plan 128 x 64 in clusters, 3 M-blocks) takes it in
// 128 x 128 parts; 2000 x 2056 x 4096, which took it before the other widths, now fills its two
// waves with 128 x 144 tiles and does not; shapes where the model's gain is under 12% (4097 x 4104,
// 1000 x 1032, 333 x 520), rows off 128 bytes, full waves, decode M, cluster variants and
// gemm.stream_k=off never; forced (split) wherever a remainder exists, with the variant's tile,
// whatever the rows; the plans fit the workspace and their whole tiles are whole waves of the CTAs.
TEST(GemmSplitRemainder, Rule) {
  auto expectSane = [](const GemmPlan& p, int64_t M, int64_t N) {
    EXPECT_GE(p.splits, 2) << M << "x" << N;
    EXPECT_EQ(p.clusterSize, 1);
    EXPECT_LE(p.ctas, kSms);
    EXPECT_EQ(p.dpTiles % p.ctas, 0);
    const int64_t tiles = ((M + 127) / 128) * ((N + p.bn - 1) / p.bn);
    EXPECT_LE((tiles - p.dpTiles) * p.splits, p.ctas);
    EXPECT_LE((tiles - p.dpTiles) * p.splits * p.bn / 128, 4 * kSms);
  };
  const GemmPlan a = remPlanFor(300, 1480, 4096);
  printf("split remainder 300x1480x4096: 128x%d, %d whole tiles, %d parts, %d CTAs\n", a.bn, a.dpTiles, a.splits,
         a.ctas);
  EXPECT_EQ(a.bn, 128);
  EXPECT_EQ(a.splits, 3);
  expectSane(a, 300, 1480);
  for (const auto& s : std::vector<std::array<int64_t, 3>>{{2000, 2056, 4096}, {4097, 4104, 4096}, {1000, 1032, 4096},
                                                            {333, 520, 1000}, {3072, 3072, 4096}, {8192, 8192, 8192},
                                                            {128, 4096, 4096}})
    EXPECT_EQ(remPlanFor(s[0], s[1], s[2]).splits, 1) << s[0] << "x" << s[1] << "x" << s[2];
  EXPECT_EQ(remPlanFor(2000, 2056, 4104, 0, GemmVariant::Auto, mkccl::kGemmTilesMisaligned).splits, 1);
  // The H100's table: not 1000 x 1032 nor 4097 x 4104, where four parts of 128 x 256 measured 35.9
  // against 26.6 and 220.4 against 207.3 (6-tile192-h100/); 2000 x 2056 in 128 x 144 tiles.
  EXPECT_EQ(remPlanFor(2000, 2056, 4096, 0, GemmVariant::Auto, mkccl::kGemmTilesH100).bn, 144);
  EXPECT_EQ(remPlanFor(2000, 2056, 4096, 0, GemmVariant::Auto, mkccl::kGemmTilesH100).splits, 1);
  EXPECT_EQ(remPlanFor(1000, 1032, 4096, 0, GemmVariant::Auto, mkccl::kGemmTilesH100).splits, 1);
  EXPECT_EQ(remPlanFor(4097, 4104, 4096, 0, GemmVariant::Auto, mkccl::kGemmTilesH100).splits, 1);
  EXPECT_GE(remPlanFor(2000, 2056, 4104, 3, GemmVariant::Auto, mkccl::kGemmTilesMisaligned).splits, 2);
  EXPECT_EQ(remPlanFor(2000, 2056, 4096, 1).splits, 1);
  EXPECT_EQ(remPlanFor(2000, 2056, 4096, 2).splits, 1);  // on: stream-K's ranges, another rule
  EXPECT_EQ(remPlanFor(2000, 2056, 4096, 0, GemmVariant::F192C2).splits, 1);
  EXPECT_EQ(remPlanFor(2000, 2056, 4096, 0, GemmVariant::Simple).splits, 1);
  for (const auto& s : std::vector<std::array<int64_t, 3>>{
           {2000, 2056, 4104}, {1000, 1032, 4096}, {333, 520, 1000}, {4097, 4104, 4096}}) {
    const GemmPlan f = remPlanFor(s[0], s[1], s[2], 3);
    expectSane(f, s[0], s[1]);
  }
  const GemmPlan f = remPlanFor(2000, 2056, 4096, 3, GemmVariant::F128C1);
  EXPECT_EQ(f.bn, 128);
  EXPECT_GE(f.splits, 2);
  EXPECT_EQ(remPlanFor(1000, 1032, 256, 3).splits, 1);  // 4 k-blocks: too short to cut
}

}  // namespace

// 128 x 64 tiles in parts (gemm.variant=64x1 with gemm.split_k=s): forced only; the parts and tiles
// fit the workspace's units; 64x1 alone, or in clusters, never splits.
TEST(SplitKPlan, NarrowTilesForced) {
  const GemmVariant v64 = mkccl::gemmNarrowVariant(0, 1), v64c2 = mkccl::gemmNarrowVariant(0, 2);
  for (int s : {2, 3, 4, 8}) {
    const GemmPlan p = planFor(1, 4096, 4096, s, v64);
    const int parts = std::min(s, kUnits / 64);  // 64 tiles: 4 parts fill the workspace's 264 units
    EXPECT_EQ(64, p.bn);
    EXPECT_EQ(parts, p.splits);
    EXPECT_EQ(1, p.clusterSize);
    EXPECT_EQ(std::min(kSms, 64 * parts), p.ctas);
  }
  // 128 rows x 8192 columns: 128 tiles of 64, so at most 2 parts in the workspace's 264 units.
  EXPECT_EQ(2, planFor(128, 8192, 8192, 4, v64).splits);
  EXPECT_EQ(1, planFor(1, 4096, 4096, 0, v64).splits);
  EXPECT_EQ(1, planFor(1, 4096, 4096, 3, v64c2).splits);
  EXPECT_EQ(128, planFor(1, 4096, 4096, 3, GemmVariant::Auto).bn);
}

// Auto's 128 x 64 parts (split_k_model.h): where the 128-wide split is taken and two or more 64-wide
// parts fit one wave, as many as fill it; on the H200's rates from 64 rows (measured faster there:
// 128 x 4096 x 4096, 128 x 4096 x 8192, 64 x 4096 x 4096), not below (1 x 4096 x 8192 measured 3%
// slower), on the H100's from one row (16 x 4096 x 4096); where one part fills the wave (N = 8192),
// whole 128 x 64 tiles on the H200 from 64 rows up to K = 8192; never where the units would need two
// waves, with a forced count or a forced variant.
TEST(GemmSplitK, NarrowPartsAuto) {
  auto plan = [](int64_t M, int64_t N, int64_t K, const mkccl::SplitKRates& r, GemmVariant v = GemmVariant::Auto,
                 int forced = 0) {
    const GemmPlan plain = mkccl::gemmPlanModel(M, N, K, v, kSms, kClusters);
    return mkccl::gemmSplitKPlan(plain, M, N, K, v, forced, kSms, kUnits, r);
  };
  const mkccl::SplitKRates& h200 = mkccl::kSplitKRatesH200;
  const mkccl::SplitKRates& h100 = mkccl::kSplitKRatesH100;
  for (const auto& s : {std::array<int64_t, 3>{128, 4096, 4096}, {128, 4096, 8192}, {64, 4096, 4096}}) {
    const GemmPlan p = plan(s[0], s[1], s[2], h200);
    EXPECT_EQ(mkccl::kSplitKNarrowWidth, p.bn) << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_EQ(2, p.splits);
    EXPECT_EQ(128, p.ctas);
  }
  for (const auto& s : {std::array<int64_t, 3>{16, 8192, 4096}, {128, 8192, 28672}, {1, 4096, 8192}, {1, 8192, 8192},
                        {256, 4096, 8192}})
    EXPECT_EQ(128, plan(s[0], s[1], s[2], h200).bn) << s[0] << "x" << s[1] << "x" << s[2];
  for (const auto& s : {std::array<int64_t, 3>{128, 8192, 8192}, {128, 8192, 4096}, {64, 8192, 4096}}) {
    const GemmPlan p = plan(s[0], s[1], s[2], h200);
    EXPECT_EQ(mkccl::kSplitKNarrowWidth, p.bn) << s[0] << "x" << s[1] << "x" << s[2];
    EXPECT_EQ(1, p.splits);
    EXPECT_EQ(128, p.ctas);
  }
  EXPECT_EQ(128, plan(128, 8192, 8192, h100).bn) << "the H100's whole 128 x 64 tiles are not measured";
  const GemmPlan p16 = plan(16, 4096, 4096, h100);
  EXPECT_EQ(mkccl::kSplitKNarrowWidth, p16.bn);
  EXPECT_EQ(2, p16.splits);
  // 32 tiles of 64 columns: four parts fill the wave.
  EXPECT_EQ(4, plan(8, 2048, 2048, h100).splits);
  EXPECT_EQ(128, plan(16, 8192, 4096, h100).bn);
  EXPECT_EQ(128, plan(128, 4096, 4096, h200, GemmVariant::Auto, 2).bn);
  EXPECT_EQ(128, plan(128, 4096, 4096, h200, GemmVariant::F128C1).bn);
}
