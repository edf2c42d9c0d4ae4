// AllGather+GEMM index math on the CPU (CI): the layout's slices and chunks count the same rows
// on both sides of a push, claims of any size add up to every chunk's wanted count, the counters
// lie after the gathered A, own tiles are exactly those inside the shard, the tile order covers
// every tile once with both CTAs of a cluster in step and all own tiles first, the cost model
// matches the measured sequential plan and keeps the GEMM's waves when it takes comm CTAs (with
// the threads push), and the timing
// trial alternates the plans and keeps the faster.
#include <gtest/gtest.h>
#include <stdint.h>
#include <map>
#include <set>
#include <string>
#include <vector>
#include "kernels/ag_gemm/layout.h"
#include "ops/ag_gemm/model.h"
#include "kernels/ag_gemm/push.cuh"
#include "kernels/ag_gemm/schedule.h"
#include "ops/ag_gemm/rule.h"

using namespace mkccl;
using namespace mkccl::ag;

namespace {

struct Case {
  int64_t M, K;
  int ws;
};

const Case kCases[] = {
    {8192, 8192, 4},  {16384, 8192, 4}, {4096, 8192, 2}, {2048, 8192, 4}, {800, 520, 4},  {256, 256, 4},
    {4, 8, 4},        {12, 8, 2},       {1536, 1024, 4}, {1024, 4096, 2}, {7 * 3, 64, 3}, {131072, 64, 8},
    {1 << 22, 8, 16}, {600, 65536, 2},
};

TEST(AgGemmLayout, SlicesChunksAndFlags) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " K=" << c.K << " ws=" << c.ws);
    Layout L;
    ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, c.ws - 1, &L));
    EXPECT_EQ(c.M / c.ws, L.m);
    EXPECT_GE(L.chunkRows(), kTileRows);
    EXPECT_EQ(0, L.chunkRows() % kTileRows);
    EXPECT_LE(L.sliceRows(), L.chunkRows());
    EXPECT_LE(L.nSlices, kMaxSlicesPerShard);
    // The counters follow the gathered A, 256-byte aligned, inside the region.
    EXPECT_GE(L.countersOffset(), c.M * c.K * 2);
    EXPECT_EQ(0, L.countersOffset() % 256);
    EXPECT_EQ(L.countersOffset() + 8 * L.slotsUsed(), L.regionBytes());
    // Gather claims stay below 2^20 over the call's base value (with a CTA's worth of overshoot).
    EXPECT_LT(static_cast<int64_t>(c.ws - 1) * L.nSlices + 4 * 1024, 1 << 20);
    // A slice is >= 64 KiB unless a whole chunk is smaller, or the shard is.
    if (L.sliceRows() < L.chunkRows() && L.sliceRows() < L.m) EXPECT_GE(L.sliceRows() * L.rowBytes, kMinSliceBytes);
    // Slices tile the shard; each lies in one chunk; chunk counts add up.
    EXPECT_EQ(0, L.sliceRowBegin(0));
    EXPECT_EQ(L.m, L.sliceRowEnd(L.nSlices - 1));
    EXPECT_EQ(L.nChunks - 1, L.chunkOfSlice(L.nSlices - 1));
    std::vector<int> perChunk(L.nChunks, 0);
    for (int g = 0; g < L.nSlices; ++g) {
      ASSERT_LT(L.sliceRowBegin(g), L.sliceRowEnd(g));
      if (g + 1 < L.nSlices) ASSERT_EQ(L.sliceRowEnd(g), L.sliceRowBegin(g + 1));
      ASSERT_EQ(L.chunkOfRow(L.sliceRowBegin(g)), L.chunkOfSlice(g));
      ASSERT_EQ(L.chunkOfRow(L.sliceRowEnd(g) - 1), L.chunkOfSlice(g));
      ++perChunk[L.chunkOfSlice(g)];
    }
    for (int ch = 0; ch < L.nChunks; ++ch) EXPECT_EQ(perChunk[ch], L.slicesOfChunk(ch)) << "chunk " << ch;
    // Whatever the claim size, the adds of a push reach exactly the wanted counts.
    for (int unit : {1, 3, 4, 7}) {
      std::vector<int> got(L.nChunks, 0);
      for (int g0 = 0; g0 < L.nSlices; g0 += unit) {
        const int g1 = minI(g0 + unit, L.nSlices);
        for (int ch = L.chunkOfSlice(g0); ch <= L.chunkOfSlice(g1 - 1); ++ch) got[ch] += L.slicesIn(ch, g0, g1);
      }
      for (int ch = 0; ch < L.nChunks; ++ch) ASSERT_EQ(L.slicesOfChunk(ch), got[ch]) << "unit " << unit << " chunk " << ch;
    }
    // Counter slots are distinct and fill [0, slotsUsed).
    std::set<int> slots = {L.pushClaimSlot(), L.gatherClaimSlot(), L.netSendClaimSlot(), L.netSpreadClaimSlot()};
    for (int q = 0; q < c.ws; ++q)
      for (int ch = 0; ch < L.nChunks; ++ch) slots.insert(L.chunkSlot(q, ch));
    EXPECT_EQ(static_cast<size_t>(L.slotsUsed()), slots.size());
    EXPECT_EQ(0, *slots.begin());
    EXPECT_EQ(L.slotsUsed() - 1, *slots.rbegin());
  }
}

// fp8 block scales: the scale area follows the counters (256-aligned, past the last slot), holds
// [M][scaleRowBytes], and the rest of the layout is the one without it; none without scales.
TEST(AgGemmLayout, ScaleAreaAfterTheCounters) {
  for (const Case& c : kCases) {
    if (c.M > (1 << 20)) continue;
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " K=" << c.K << " ws=" << c.ws);
    Layout plain, L;
    ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, 0, &plain));
    const int64_t srb = (2 * c.K + 127) / 128 * 4;  // K 16-bit columns: 2 K e4m3 bytes per row
    ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, 0, &L, srb));
    EXPECT_EQ(0, plain.scaleRowBytes);
    EXPECT_EQ(plain.countersEnd(), plain.regionBytes());
    EXPECT_EQ(plain.countersOffset(), L.countersOffset());
    EXPECT_EQ(plain.nChunks, L.nChunks);
    EXPECT_EQ(plain.nSlices, L.nSlices);
    EXPECT_EQ(0, L.scalesOffset() % 256);
    EXPECT_GE(L.scalesOffset(), L.countersEnd());
    EXPECT_LT(L.scalesOffset(), L.countersEnd() + 256);
    EXPECT_EQ(L.scalesOffset() - L.countersOffset(), L.scalesFromCounters());
    EXPECT_EQ(L.scalesOffset() + c.M * srb, L.regionBytes());
  }
}

TEST(AgGemmLayout, HugeShardsGrowSlicesAndChunks) {
  Layout L;
  ASSERT_TRUE(layoutFor(int64_t{1} << 30, 8, 2, 2, 0, &L));  // 2^29 rows per rank
  EXPECT_LE(L.nSlices, kMaxSlicesPerShard);
  EXPECT_GE(L.chunkRows(), L.sliceRows());
  EXPECT_EQ(L.m, L.sliceRowEnd(L.nSlices - 1));
}

TEST(AgGemmLayout, OwnBlocks) {
  for (const Case& c : kCases) {
    if (c.M > (1 << 20)) continue;
    for (int me = 0; me < c.ws; ++me) {
      Layout L;
      ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, me, &L));
      const int blocks = static_cast<int>((c.M + kTileRows - 1) / kTileRows);
      for (int mb = 0; mb < blocks + 2; ++mb) {
        const int64_t r0 = static_cast<int64_t>(mb) * kTileRows, r1 = std::min<int64_t>(r0 + kTileRows, c.M);
        const bool inside = r0 < c.M && r0 >= static_cast<int64_t>(me) * L.m && r1 <= static_cast<int64_t>(me + 1) * L.m;
        ASSERT_EQ(inside, L.ownBlock(mb)) << "me " << me << " block " << mb;
      }
      if (L.m % kTileRows == 0) {  // then no region tile holds own rows: the own shard never goes to the region
        for (int mb = 0; mb < blocks; ++mb) {
          const int64_t r0 = static_cast<int64_t>(mb) * kTileRows;
          const bool ownRows = r0 < static_cast<int64_t>(me + 1) * L.m && r0 + kTileRows > static_cast<int64_t>(me) * L.m;
          EXPECT_EQ(ownRows, L.ownBlock(mb));
        }
      }
    }
  }
}

// Walks every CTA's schedule: each output tile exactly once (a block past M only as the second CTA
// of a cluster whose first block is the last one), both CTAs of a cluster in step.
void checkSchedule(int mBlocks, int nBlocks, int cs, int group, const TileOrder& o, int numClusters) {
  dev::TileSchedParams p{mBlocks, nBlocks, cs, group, 0};
  std::map<std::pair<int, int>, int> seen;
  for (int cl = 0; cl < numClusters; ++cl) {
    TileScheduler a(p, o, cl, numClusters, 0), b(p, o, cl, numClusters, cs - 1);
    dev::TileCoord ta, tb;
    while (true) {
      const bool ha = a.next(ta), hb = b.next(tb);
      ASSERT_EQ(ha, hb);
      if (!ha) break;
      ASSERT_EQ(ta.n, tb.n);
      ASSERT_EQ(ta.m + cs - 1, tb.m);
      ASSERT_EQ(0, ta.m % cs);
      for (int i = 0; i < cs; ++i) {
        const dev::TileCoord& t = i == 0 ? ta : tb;
        ASSERT_GE(t.m, 0);
        ASSERT_LT(t.n, nBlocks);
        if (t.m >= mBlocks) {
          ASSERT_TRUE(cs == 2 && i == 1 && t.m == mBlocks) << "block " << t.m << " past M";
          continue;
        }
        ++seen[{t.m, t.n}];
      }
    }
  }
  ASSERT_EQ(static_cast<size_t>(mBlocks) * nBlocks, seen.size());
  for (const auto& kv : seen) ASSERT_EQ(1, kv.second) << "tile " << kv.first.first << "," << kv.first.second;
}

TEST(AgGemmSchedule, EveryTileOnceOwnRowsFirst) {
  for (const Case& c : kCases) {
    if (c.M > (1 << 17)) continue;
    for (int cs : {1, 2})
      for (int me = 0; me < c.ws; ++me)
        for (bool ring : {false, true}) {
        SCOPED_TRACE(testing::Message() << "M=" << c.M << " ws=" << c.ws << " cs=" << cs << " me=" << me
                                        << " ring=" << ring);
        Layout L;
        ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, me, &L));
        const TileOrder o = tileOrderFor(L, cs, ring);
        const int mBlocks = static_cast<int>((c.M + kTileRows - 1) / kTileRows);
        if (o.rowsPerRank > 0) EXPECT_EQ((mBlocks + cs - 1) / cs, o.rowsPerRank * c.ws);
        // rowAt is a permutation of the cluster rows.
        const int rows = (mBlocks + cs - 1) / cs;
        dev::TileSchedParams p{mBlocks, 3, cs, 8, 0};
        TileScheduler s(p, o, 0, 1, 0);
        std::set<int> perm;
        for (int k = 0; k < rows; ++k) perm.insert(s.rowAt(k));
        ASSERT_EQ(static_cast<size_t>(rows), perm.size());
        ASSERT_EQ(0, *perm.begin());
        ASSERT_EQ(rows - 1, *perm.rbegin());
        // Arrival order: this rank's cluster rows first.
        for (int k = 0; k < o.rowsPerRank; ++k) EXPECT_EQ(me * o.rowsPerRank + k, s.rowAt(k));
        // Rotation: starts at the cluster row holding this rank's first row.
        if (o.rowsPerRank == 0) EXPECT_EQ(static_cast<int>(static_cast<int64_t>(me) * L.m / kTileRows / cs), s.rowAt(0));
        for (int nb : {1, 5, 32})
          for (int clusters : {1, 7, 64}) {
            checkSchedule(mBlocks, nb, cs, std::max(1, 16 / cs), o, clusters);
            if (HasFatalFailure()) return;
          }
        // Every own tile comes before any peer's tile (linear order = one cluster walking it all),
        // whatever the band height: the first waves never wait for peers.
        for (int group : {1, 3, 16}) {
          dev::TileSchedParams q{mBlocks, 5, cs, group, 0};
          TileScheduler one(q, o, 0, 1, 0);
          dev::TileCoord t;
          int64_t i = 0;
          const int64_t ownTiles = static_cast<int64_t>(o.rowsPerRank) * 5;
          while (one.next(t)) {
            const bool ownRow = t.m / cs >= me * o.rowsPerRank && t.m / cs < (me + 1) * o.rowsPerRank;
            ASSERT_EQ(i < ownTiles, ownRow) << "linear tile " << i << " group " << group;
            ++i;
          }
        }
      }
  }
}

// Peers' rows come chunk by chunk, interleaved over peers, in the order the pushes land.
TEST(AgGemmSchedule, PeersInterleavedByChunk) {
  Layout L;
  ASSERT_TRUE(layoutFor(8192, 8192, 2, 4, 1, &L));
  const TileOrder o = tileOrderFor(L, 2);
  ASSERT_EQ(8, o.rowsPerRank);  // 2048 rows per rank, clusters of 256 rows
  dev::TileSchedParams p{64, 32, 2, 8, 0};
  TileScheduler s(p, o, 0, 1, 0);
  const int want[] = {8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 0, 17, 25, 1, 18, 26, 2};
  for (int k = 0; k < static_cast<int>(sizeof(want) / sizeof(want[0])); ++k) EXPECT_EQ(want[k], s.rowAt(k)) << k;
  // Along the ring (ce plan, ag_gemm.ce=ring): rank 0's rows arrive first, then 3's, then 2's.
  TileScheduler r(p, tileOrderFor(L, 2, true), 0, 1, 0);
  const int ring[] = {8, 9, 10, 11, 12, 13, 14, 15, 0, 24, 16, 1, 25, 17, 2, 26, 18};
  for (int k = 0; k < static_cast<int>(sizeof(ring) / sizeof(ring[0])); ++k) EXPECT_EQ(ring[k], r.rowAt(k)) << k;
}

GemmPlan plan(int bn, int cs, int ctas) {
  GemmPlan p;
  p.bn = bn;
  p.clusterSize = cs;
  p.ctas = ctas;
  return p;
}

struct Measured {
  int64_t M, N, K;
  int ws;
  double sequentialUs;  // mkccl-perf ag_gemm -g 4, 4xH200, 2026-11-22 (commit 1e8d444)
};
const Measured kMeasured[] = {{8192, 8192, 8192, 4, 1933}, {16384, 8192, 8192, 4, 3714}, {8192, 2048, 8192, 4, 652},
                              {4096, 8192, 8192, 4, 872},  {2048, 8192, 8192, 4, 435}};

// The engine's planner as the fused kernel sees it on a 132-SM GPU without clusters: 128 x 256
// tiles on every CTA left (at most one per tile); SMs it leaves idle become free comm CTAs.
struct FakePlanner {
  int64_t M, N;
  int sm;
  int operator()(int taken, GemmPlan* g) const {
    const int64_t tiles = (M + 127) / 128 * ((N + 255) / 256);
    *g = plan(256, 1, static_cast<int>(std::min<int64_t>(sm - taken, tiles)));
    return std::max(0, std::min(16, sm - taken - g->ctas) / 2 * 2);
  }
};

TEST(AgGemmModel, SequentialPlanMatchesTheMeasurements) {
  for (const Measured& s : kMeasured) {
    SCOPED_TRACE(testing::Message() << s.M << "x" << s.N << "x" << s.K);
    Layout L;
    ASSERT_TRUE(layoutFor(s.M, s.K, 2, s.ws, 0, &L));
    const double us = estimateSequential(L, plan(256, 1, 132), s.N, s.K, false);
    EXPECT_GT(us, 0.85 * s.sequentialUs);
    EXPECT_LT(us, 1.1 * s.sequentialUs);
  }
}

TEST(AgGemmModel, SimulationWithoutWaitsIsTheWaveCount) {
  for (const Measured& s : kMeasured) {
    Layout L;
    ASSERT_TRUE(layoutFor(s.M, s.K, 2, s.ws, 1, &L));
    for (int ctas : {132, 128, 122, 7}) {
      const GemmPlan g = plan(256, 1, ctas);
      EXPECT_NEAR(gemmUs(g, s.M, s.N, s.K), simulateFusedGemmUs(L, g, s.N, s.K, 0, tileUs(g, s.K)), 1e-6)
          << s.M << "x" << s.N << " on " << ctas;
    }
  }
}

TEST(AgGemmModel, OwnTilesNeverWait) {
  Layout L;
  ASSERT_TRUE(layoutFor(8192, 8192, 2, 4, 2, &L));
  for (int mb = 0; mb < 64; ++mb) {
    const double t = blockReadyUs(L, mb, 1000);
    if (mb >= 32 && mb < 48) EXPECT_EQ(0, t) << mb;
    else EXPECT_GT(t, 0) << mb;
  }
  // Chunk c of every peer lands after (c + 1) / nChunks of the push.
  EXPECT_DOUBLE_EQ(1000.0 / L.nChunks, blockReadyUs(L, 0, 1000));
  EXPECT_DOUBLE_EQ(1000.0, blockReadyUs(L, 15, 1000));
}

TEST(AgGemmModel, CommCtasKeepTheGemmWavesAndFeedTheTiles) {
  for (const Measured& s : kMeasured) {
    SCOPED_TRACE(testing::Message() << s.M << "x" << s.N << "x" << s.K);
    Layout L;
    ASSERT_TRUE(layoutFor(s.M, s.K, 2, s.ws, 0, &L));
    const FakePlanner pf{s.M, s.N, 132};
    const FusedChoice f = chooseFused(L, s.N, s.K, 132, -1, false, pf);
    EXPECT_FALSE(f.side);
    EXPECT_GE(f.commCtas, 2);
    EXPECT_LE(f.commCtas, 24);
    EXPECT_EQ(0, f.commCtas % 2);
    EXPECT_LE(f.commCtas + f.gemm.ctas, 132);
    // Better than any other count the model could have taken, and no worse than the GEMM alone on
    // every SM by more than a wave plus the last chunk's tiles.
    for (int n : {2, 4, 6, 8, 10, 12, 16, 20, 24})
      EXPECT_LE(f.est.fusedUs, chooseFused(L, s.N, s.K, 132, n, false, pf).est.fusedUs * 1.0101) << n;
    const GemmPlan full = plan(256, 1, 132);
    EXPECT_LT(f.est.fusedUs, gemmUs(full, s.M, s.N, s.K) + 2 * tileUs(full, s.K) + 2 * pushUs(L, kNvlinkGBps));
  }
  // The large figure shapes: the comm CTAs cost no wave (2048 and 4096 tiles over 128 CTAs).
  for (int64_t M : {8192, 16384}) {
    Layout L;
    ASSERT_TRUE(layoutFor(M, 8192, 2, 4, 0, &L));
    const FusedChoice f = chooseFused(L, 8192, 8192, 132, -1, false, FakePlanner{M, 8192, 132});
    EXPECT_NEAR(gemmUs(plan(256, 1, 132), M, 8192, 8192), f.est.gemmUs, 1e-6) << M;
  }
  // Forced counts are kept (even, at most half the SMs); 0 means side teams plus idle SMs.
  Layout L;
  ASSERT_TRUE(layoutFor(512, 1024, 2, 4, 0, &L));
  const FakePlanner small{512, 1024, 132};  // 16 tiles: 116 idle SMs, 16 of them free comm CTAs
  EXPECT_EQ(8, chooseFused(L, 1024, 1024, 132, 7, false, small).commCtas);
  EXPECT_EQ(66, chooseFused(L, 1024, 1024, 132, 500, false, small).commCtas);
  const FusedChoice side = chooseFused(L, 1024, 1024, 132, 0, false, small);
  EXPECT_TRUE(side.side);
  EXPECT_EQ(16, side.commCtas);
  // A GPU too small to give an SM: side teams.
  const FusedChoice tiny = chooseFused(L, 1024, 1024, 4, -1, false, FakePlanner{512, 1024, 4});
  EXPECT_TRUE(tiny.side);
}


// The auto plan on the measured shapes (ag_gemm_rule.h): the plan that was the fastest of the
// forced ones -- at 4 ranks in the 0af0e62 run (comm CTAs everywhere), at 2 ranks without copy
// engines in six earlier runs (or, for side teams, within the spread of the fastest).
TEST(AgGemmRule, PicksTheMeasuredBestPlan) {
  struct Case {
    int ws;
    int64_t M, N, K;
    AutoPlan want;
  };
  const Case cases[] = {
      {4, 8192, 8192, 8192, AutoPlan::Fused},       {4, 16384, 8192, 8192, AutoPlan::Fused},
      {4, 8192, 2048, 8192, AutoPlan::Fused},       {4, 4096, 8192, 8192, AutoPlan::Fused},
      {4, 2048, 8192, 8192, AutoPlan::Fused},       {2, 8192, 8192, 8192, AutoPlan::Fused},
      {2, 16384, 8192, 8192, AutoPlan::Side},       {2, 8192, 2048, 8192, AutoPlan::Side},
      {2, 4096, 8192, 8192, AutoPlan::Fused},       {2, 2048, 8192, 8192, AutoPlan::Sequential},
  };
  for (const Case& k : cases) {
    const GemmPlan full = plan(256, 1, 132);
    RuleInputs in;
    in.ws = k.ws;
    in.shardBytes = k.M / k.ws * k.K * 2;
    in.tiles = (k.M + 127) / 128 * ((k.N + 255) / 256);
    in.ctas = full.ctas;
    in.gemmUs = gemmUs(full, k.M, k.N, k.K);
    const RuleChoice c = chooseAutoPlan(in);
    EXPECT_EQ(static_cast<int>(k.want), static_cast<int>(c.plan))
        << k.M << "x" << k.N << "x" << k.K << " ws " << k.ws << ": " << autoPlanName(c.plan) << " (" << c.why
        << ", " << c.waves << " waves, push/GEMM " << c.pushShare << ")";
    EXPECT_GT(std::string(c.why).size(), 0u);
  }
}

// With copy engines (the driver's stream memory operations): the ce plan at 2 ranks for every
// measured shape (2xH200: within the spread of the best forced plan or clearly faster); at 4 ranks,
// where it is not measured, the rule above.
TEST(AgGemmRule, CopyEnginesWhereMeasured) {
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {16384, 8192, 8192}, {8192, 2048, 8192}, {4096, 8192, 8192},
                               {2048, 8192, 8192}};
  for (const auto& s : shapes)
    for (int ws : {2, 4}) {
      const GemmPlan full = plan(256, 1, 132);
      RuleInputs in;
      in.ws = ws;
      in.shardBytes = s[0] / ws * s[2] * 2;
      in.tiles = (s[0] + 127) / 128 * ((s[1] + 255) / 256);
      in.ctas = full.ctas;
      in.gemmUs = gemmUs(full, s[0], s[1], s[2]);
      const RuleChoice without = chooseAutoPlan(in);
      in.copyEngines = true;
      const RuleChoice with = chooseAutoPlan(in);
      SCOPED_TRACE(testing::Message() << s[0] << "x" << s[1] << "x" << s[2] << " ws " << ws);
      EXPECT_NE(static_cast<int>(AutoPlan::CopyEngines), static_cast<int>(without.plan));
      if (ws <= kCeMaxRanks) {
        EXPECT_EQ(static_cast<int>(AutoPlan::CopyEngines), static_cast<int>(with.plan));
      } else {
        EXPECT_EQ(static_cast<int>(without.plan), static_cast<int>(with.plan));
      }
    }
}

// The ce plan's copy size: a quarter of the shard, at least 4 MiB, whole chunks, a forced size
// honoured.
TEST(AgGemmCe, CopySize) {
  Layout L;
  ASSERT_TRUE(layoutFor(8192, 8192, 2, 2, 0, &L));  // 64 MiB shards
  EXPECT_EQ(int64_t{16} << 20, ceAutoGroupBytes(L));
  EXPECT_EQ(8, ceGroupChunks(L, 0));                 // 2 MiB chunks
  EXPECT_EQ(2, ceGroupChunks(L, int64_t{4} << 20));
  EXPECT_EQ(1, ceGroupChunks(L, 1024));              // never below one chunk
  ASSERT_TRUE(layoutFor(2048, 8192, 2, 4, 1, &L));   // 8 MiB shards: 4 MiB copies
  EXPECT_EQ(int64_t{4} << 20, ceAutoGroupBytes(L));
}

// The rule's edges: shards above 64 MiB never take comm CTAs; a GEMM of no time (nothing to
// hide the push under) never takes the fused comm-CTA plan.
TEST(AgGemmRule, Edges) {
  RuleInputs in;
  in.ws = 2;
  in.tiles = 100000;
  in.ctas = 132;
  in.gemmUs = 1e9;
  in.shardBytes = kFusedMaxShardBytes;
  EXPECT_EQ(static_cast<int>(AutoPlan::Fused), static_cast<int>(chooseAutoPlan(in).plan));
  in.shardBytes = kFusedMaxShardBytes + 16;
  EXPECT_EQ(static_cast<int>(AutoPlan::Side), static_cast<int>(chooseAutoPlan(in).plan));
  in.shardBytes = 1 << 20;
  in.gemmUs = 0;
  EXPECT_NE(static_cast<int>(AutoPlan::Fused), static_cast<int>(chooseAutoPlan(in).plan));
  in.gemmUs = 1e9;
  in.tiles = 132 * 7;  // 7 waves: too few
  EXPECT_EQ(static_cast<int>(AutoPlan::Sequential), static_cast<int>(chooseAutoPlan(in).plan));
  // From kFusedEverywhereRanks on: comm CTAs whatever the waves, side teams above 64 MiB shards.
  in.ws = kFusedEverywhereRanks;
  EXPECT_EQ(static_cast<int>(AutoPlan::Fused), static_cast<int>(chooseAutoPlan(in).plan));
  in.shardBytes = kFusedMaxShardBytes + 16;
  EXPECT_EQ(static_cast<int>(AutoPlan::Side), static_cast<int>(chooseAutoPlan(in).plan));
}

}  // namespace

// Across nodes: pieces are whole chunks that cover the shard once, their slices add up to every
// chunk's wanted count, the window holds one slot per node, and a window too small is refused.
TEST(AgGemmNetLayout, PiecesCoverTheShard) {
  for (const Case& c : kCases)
    for (int nodes : {2, 3, 4}) {
      SCOPED_TRACE(testing::Message() << "M=" << c.M << " K=" << c.K << " ws=" << c.ws << " nodes=" << nodes);
      Layout L;
      ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, 0, &L));
      NetLayout n;
      const bool fits = netLayoutFor(L, nodes, 1, uint64_t{1} << 40, &n);
      ASSERT_TRUE(fits);
      EXPECT_GE(n.pieceLog2, L.chunkLog2);
      EXPECT_LE(n.nPieces, kMaxNetPieces);
      EXPECT_GE(n.slotBytes, L.shardBytes());
      EXPECT_EQ(0, n.slotBytes % kNetSlotAlign);
      EXPECT_EQ(0, n.pieceRowBegin(0));
      EXPECT_EQ(L.m, n.pieceRowEnd(n.nPieces - 1, L));
      std::vector<int> got(L.nChunks, 0);
      int slices = 0;
      for (int p = 0; p < n.nPieces; ++p) {
        ASSERT_LT(n.pieceRowBegin(p), n.pieceRowEnd(p, L));
        const int g0 = n.sliceBegin(p, L), g1 = n.sliceEnd(p, L);
        ASSERT_EQ(L.sliceRowBegin(g0), n.pieceRowBegin(p));
        ASSERT_EQ(L.sliceRowEnd(g1 - 1), n.pieceRowEnd(p, L));
        slices += g1 - g0;
        for (int ch = L.chunkOfSlice(g0); ch <= L.chunkOfSlice(g1 - 1); ++ch) got[ch] += L.slicesIn(ch, g0, g1);
      }
      EXPECT_EQ(L.nSlices, slices);
      for (int ch = 0; ch < L.nChunks; ++ch) ASSERT_EQ(L.slicesOfChunk(ch), got[ch]) << "chunk " << ch;
      // The pieces' flags stay inside the flag array.
      EXPECT_LT(kNetPieceFlag + n.nPieces, 4096u);
      // One byte short of a slot per node: refused.
      NetLayout small;
      EXPECT_FALSE(netLayoutFor(L, nodes, 0, static_cast<uint64_t>(n.slotBytes) * nodes - 1, &small));
      EXPECT_TRUE(netLayoutFor(L, nodes, 0, static_cast<uint64_t>(n.slotBytes) * nodes, &small));
    }
}

// ag_gemm.net_piece_kib: a smaller least piece gives as many pieces or more (up to kMaxNetPieces),
// a larger one as few or fewer; a piece spans whole chunks of at least that many bytes (the last
// one may be cut short by the shard's end), the pieces end at the shard's last row, and the
// default argument is kMinNetPieceBytes.
TEST(AgGemmNetLayout, LeastPieceFromTheTuner) {
  const int64_t sizes[] = {1, 16 << 10, 64 << 10, kMinNetPieceBytes, 4 << 20, int64_t{1} << 30};
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "M=" << c.M << " K=" << c.K << " ws=" << c.ws);
    Layout L;
    ASSERT_TRUE(layoutFor(c.M, c.K, 2, c.ws, 0, &L));
    NetLayout dflt, same;
    ASSERT_TRUE(netLayoutFor(L, 2, 0, uint64_t{1} << 40, &dflt));
    ASSERT_TRUE(netLayoutFor(L, 2, 0, uint64_t{1} << 40, &same, kMinNetPieceBytes));
    EXPECT_EQ(dflt.pieceLog2, same.pieceLog2);
    int prev = kMaxNetPieces + 1;
    for (int64_t least : sizes) {
      SCOPED_TRACE(testing::Message() << "least piece " << least);
      NetLayout n;
      ASSERT_TRUE(netLayoutFor(L, 2, 0, uint64_t{1} << 40, &n, least));
      EXPECT_GE(n.pieceLog2, L.chunkLog2);
      EXPECT_GE(n.nPieces, 1);
      EXPECT_LE(n.nPieces, kMaxNetPieces);
      EXPECT_LE(n.nPieces, prev) << "a larger least piece gave more pieces";
      prev = n.nPieces;
      EXPECT_GE(static_cast<int64_t>(n.pieceRows()) * L.rowBytes, least);
      EXPECT_EQ(L.m, n.pieceRowEnd(n.nPieces - 1, L));
      EXPECT_LT(n.pieceRowBegin(n.nPieces - 1), L.m);
    }
  }
}

// Across nodes the tile order is a permutation with the own rows first, then every row of this
// node's peers, then the other nodes' rows; chunk c of the counterparts comes before chunk c + 1.
TEST(AgGemmSchedule, NodesOwnThenNodeThenRemote) {
  for (int n : {1, 2, 4})
    for (int nodes : {2, 3, 4}) {
      const int ws = n * nodes;
      for (int me = 0; me < ws; ++me) {
        SCOPED_TRACE(testing::Message() << nodes << " nodes x " << n << ", me " << me);
        Layout L;
        ASSERT_TRUE(layoutFor(static_cast<int64_t>(ws) * 512, 1024, 2, ws, me, &L));
        const TileOrder o = tileOrderFor(L, 1, false, n);
        ASSERT_EQ(n, o.nodeRanks);
        ASSERT_EQ(4, o.rowsPerRank);
        const int rows = ws * 4;
        dev::TileSchedParams p{rows, 3, 1, 8, 0};
        TileScheduler s(p, o, 0, 1, 0);
        std::set<int> perm;
        for (int k = 0; k < rows; ++k) {
          const int row = s.rowAt(k), q = row / 4;
          perm.insert(row);
          if (k < 4) EXPECT_EQ(me, q) << k;
          else if (k < 4 * n) EXPECT_EQ(me / n, q / n) << "position " << k << ": rank " << q << " is not in my node";
          else EXPECT_NE(me / n, q / n) << "position " << k;
        }
        ASSERT_EQ(static_cast<size_t>(rows), perm.size());
        ASSERT_EQ(rows - 1, *perm.rbegin());
        for (int nb : {1, 5}) checkSchedule(rows, nb, 1, 8, o, 7);
      }
    }
}
