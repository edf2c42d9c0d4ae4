// CPU checks of the GEMM+RS/AR layout and schedule (src/kernels/fused/gemm_rs_layout.cuh): every
// rank computes every (phase, tile) exactly once whatever the grid, phases come in order, both CTAs
// of a cluster see the same phases and N-blocks, the final-tile bookkeeping the AR workers use
// agrees with the schedule, every partial goes to the rank that owns its rows into a slot no other
// sender uses, chunks cover M, scratch and flag slots do not overlap. The cost model against the
// measurements it was calibrated on, and the timed trial's rule (ranks must agree).
#include <gtest/gtest.h>
#include <set>
#include <tuple>
#include <vector>
#include <cmath>
#include <limits>
#include "kernels/fused/gemm_rs_layout.cuh"
#include "kernels/fused/gemm_rs_model.h"
#include "kernels/fused/gemm_rs_trial.h"

using namespace mkccl::rs;

namespace {

struct Case {
  int mode, ws;
  int64_t M, N;
  int bn, cs, group, clusters;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int mode : {kModeReduceScatter, kModeAllReduce})
    for (int ws : {2, 3, 4, 8})
      for (int cs : {1, 2}) {
        v.push_back({mode, ws, int64_t(ws) * 2048, 8192, 256, cs, 16 / cs, 132 / cs});
        v.push_back({mode, ws, int64_t(ws) * 200, 264, 128, cs, 3, 5});
        v.push_back({mode, ws, int64_t(ws) * 8, 8, 256, cs, 1, 3});
        v.push_back({mode, ws, int64_t(ws) * 1000 + (mode == kModeAllReduce ? 3 : 0), 1032, 256, cs, 8, 66});
        v.push_back({mode, ws, int64_t(ws) * 128, 4096, 256, cs, 16 / cs, 132 / cs});  // a chunk < one wave
      }
  return v;
}

TEST(GemmRsLayout, ChunksCoverRowsAndSlotsDoNotOverlap) {
  for (const Case& c : cases()) {
    const Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.group);
    SCOPED_TRACE(testing::Message() << "mode " << c.mode << " ws " << c.ws << " M " << c.M << " N " << c.N << " bn "
                                    << c.bn << " cs " << c.cs);
    EXPECT_EQ(0, L.mbc % c.cs);
    EXPECT_GE(int64_t(L.mbc) * kTileRows, L.chunkRows);
    EXPECT_GE(L.nBlocks * int64_t(c.bn), c.N);
    if (c.mode == kModeReduceScatter) {
      EXPECT_EQ(c.M / c.ws, L.chunkRows);
    } else {
      EXPECT_EQ(0, L.chunkRows % (int64_t(kTileRows) * c.cs)) << "AR chunks are whole cluster tiles";
      EXPECT_GE(L.chunkRows * c.ws, c.M);
    }
    EXPECT_EQ(0, L.chunkBegin(0));
    EXPECT_EQ(c.M, L.chunkEnd(c.ws - 1));
    for (int q = 0; q + 1 < c.ws; ++q) EXPECT_EQ(L.chunkEnd(q), L.chunkBegin(q + 1));
    // Scratch: staging, rx and ag slots are disjoint and inside scratchBytes.
    EXPECT_EQ(L.rxOffset(0, 0), L.stagingOffset(c.ws - 2, L.tiles - 1) + L.tileBytes());
    EXPECT_EQ(L.rxOffset(1, 0) - L.rxOffset(0, 0), L.slotStride());
    if (c.mode == kModeAllReduce) {
      EXPECT_EQ(L.agOffset(0, 0), L.rxOffset(c.ws - 2, L.tiles - 1) + L.tileBytes());
      EXPECT_EQ(L.scratchBytes(), L.agOffset(c.ws - 1, L.tiles - 1) + L.tileBytes());
      EXPECT_EQ(L.flagSlots(), L.agSlot(c.ws - 1, L.tiles - 1) + 1);
      EXPECT_EQ(L.agSlot(0, 0), L.rxSlot(c.ws - 2, L.tiles - 1) + 1);
    } else {
      EXPECT_EQ(L.scratchBytes(), L.rxOffset(c.ws - 2, L.tiles - 1) + L.tileBytes());
      EXPECT_EQ(L.flagSlots(), L.rxSlot(c.ws - 2, L.tiles - 1) + 1);
    }
    EXPECT_EQ(0, L.rxSlot(0, 0));
    EXPECT_EQ(0, L.tileBytes() % 16);
    EXPECT_EQ(L.halfBytes(), int64_t(L.vecsPerThread()) * kThreadsPerHalf * 16);
  }
}

TEST(GemmRsLayout, EveryRankComputesEveryTileOncePhasesInOrderClustersAgree) {
  for (const Case& c : cases()) {
    const Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.group);
    for (int rank = 0; rank < c.ws; ++rank) {
      SCOPED_TRACE(testing::Message() << "ws " << c.ws << " M " << c.M << " N " << c.N << " cs " << c.cs << " rank "
                                      << rank);
      std::set<std::pair<int, int>> seen;  // (phase, u)
      for (int cl = 0; cl < c.clusters; ++cl) {
        std::vector<std::vector<Tile>> perCta(c.cs);
        for (int cr = 0; cr < c.cs; ++cr) {
          Schedule s(L, rank, cl, c.clusters, cr);
          Tile t;
          int lastStep = 0, n = 0;
          while (s.next(t)) {
            ASSERT_TRUE(t.mb >= 0 && t.mb < L.mbc && t.nb >= 0 && t.nb < L.nBlocks);
            EXPECT_EQ(t.mb * L.nBlocks + t.nb, t.u);
            EXPECT_EQ(L.chunkAt(rank, t.step), t.chunk);
            EXPECT_EQ(cr, t.mb % c.cs);
            EXPECT_GE(t.step, lastStep) << "phases out of order";
            lastStep = t.step;
            // The final phase starts at firstFinal() and runs to the end.
            EXPECT_EQ(t.step == c.ws - 1, n >= s.firstFinal()) << "tile #" << n;
            Tile a;
            s.at(n, a);
            EXPECT_EQ(std::make_tuple(a.step, a.u, a.chunk), std::make_tuple(t.step, t.u, t.chunk));
            EXPECT_TRUE(seen.insert({t.step, t.u}).second) << "phase " << t.step << " tile " << t.u << " twice";
            perCta[cr].push_back(t);
            ++n;
          }
          EXPECT_EQ(n, s.count());
          EXPECT_EQ(n - s.firstFinal(), s.finalCount());
        }
        for (int cr = 1; cr < c.cs; ++cr) {
          ASSERT_EQ(perCta[0].size(), perCta[cr].size());
          for (size_t i = 0; i < perCta[0].size(); ++i) {
            EXPECT_EQ(perCta[0][i].step, perCta[cr][i].step);
            EXPECT_EQ(perCta[0][i].nb, perCta[cr][i].nb);
            EXPECT_EQ(perCta[0][i].mb + cr, perCta[cr][i].mb);
          }
        }
      }
      EXPECT_EQ(size_t(c.ws) * L.tiles, seen.size());
      EXPECT_EQ(rank, L.chunkAt(rank, c.ws - 1)) << "the final phase is the rank's own chunk";
    }
  }
}

// The AR workers of CTA k on every rank exchange the final tiles CTA k computes: every rank's
// CTA k must own the same tiles u in its final phase, in the same order.
TEST(GemmRsLayout, FinalTilesAgreeAcrossRanks) {
  for (const Case& c : cases()) {
    const Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.group);
    for (int cl = 0; cl < c.clusters; ++cl)
      for (int cr = 0; cr < c.cs; ++cr) {
        const Schedule s0(L, 0, cl, c.clusters, cr);
        for (int rank = 1; rank < c.ws; ++rank) {
          const Schedule s(L, rank, cl, c.clusters, cr);
          ASSERT_EQ(s0.finalCount(), s.finalCount());
          for (int k = 0; k < s.finalCount(); ++k) {
            Tile a, b;
            s0.at(s0.firstFinal() + k, a);
            s.at(s.firstFinal() + k, b);
            EXPECT_EQ(a.u, b.u) << "cluster " << cl << " final tile " << k << " rank " << rank;
          }
        }
      }
  }
}

TEST(GemmRsLayout, PartialsGoToTheirOwnerIntoADistinctSlot) {
  for (int ws : {2, 3, 4, 8}) {
    const Layout L = makeLayout(kModeReduceScatter, ws, int64_t(ws) * 128, 256, 256, 1, 1);
    for (int owner = 0; owner < ws; ++owner) {
      std::set<int> senders;
      for (int j = 0; j + 1 < ws; ++j) {
        const int q = L.senderOf(owner, j);
        EXPECT_NE(owner, q);
        EXPECT_EQ(owner, L.chunkAt(q, j)) << "sender " << q << " reaches the owner's chunk at phase " << j;
        senders.insert(q);
      }
      EXPECT_EQ(size_t(ws - 1), senders.size());
    }
    // At any phase the ranks send to distinct owners (one sender per link).
    for (int j = 0; j + 1 < ws; ++j) {
      std::set<int> owners;
      for (int r = 0; r < ws; ++r) owners.insert(L.chunkAt(r, j));
      EXPECT_EQ(size_t(ws), owners.size()) << "phase " << j;
    }
  }
}

// The sequential plan's estimate against seq_us of the 4xH200 run it was calibrated on (ws = 4,
// 132 SMs, K split over the ranks), and the fused estimate below the sequential one at the three
// figure shapes (what the direct kernel is built for; the timed trial has the last word).
TEST(GemmRsModel, MatchesTheCalibrationRunAndPrefersFusedOnFigureShapes) {
  struct Point {
    int mode;
    int64_t M, N, K;
    double seqUs;
    bool figure;
  };
  const Point pts[] = {{kModeReduceScatter, 8192, 8192, 8192, 776.4, true},
                       {kModeReduceScatter, 16384, 8192, 8192, 1506, true},
                       {kModeReduceScatter, 4096, 8192, 8192, 408.3, true},
                       {kModeReduceScatter, 8192, 8192, 4096, 613.1, false},
                       {kModeAllReduce, 8192, 8192, 8192, 1062, true},
                       {kModeAllReduce, 16384, 8192, 8192, 2093, true},
                       {kModeAllReduce, 4096, 8192, 8192, 546.2, true},
                       {kModeAllReduce, 8192, 8192, 4096, 900, false}};
  const int ws = 4, sms = 132;
  for (const Point& p : pts) {
    SCOPED_TRACE(testing::Message() << (p.mode == kModeAllReduce ? "AR " : "RS ") << p.M << "x" << p.N << "x" << p.K);
    const double seq = model::sequentialUs(p.mode, ws, p.M, p.N, p.K / ws, sms);
    EXPECT_NEAR(seq, p.seqUs, 0.05 * p.seqUs);
    const Layout L = makeLayout(p.mode, ws, p.M, p.N, 256, 1, 16);
    const double fused = model::fusedUs(L, int(std::min<int64_t>(sms, L.orderLength())), p.K / ws);
    EXPECT_GT(fused, 0);
    if (p.figure) EXPECT_LT(fused, seq);
  }
  // A GEMM with no communication to hide is no faster fused: the estimate never drops below the
  // sequential plan's GEMM part.
  const Layout L = makeLayout(kModeReduceScatter, ws, 8192, 8192, 256, 1, 16);
  EXPECT_GE(model::fusedUs(L, sms, 2048), model::sequentialUs(kModeReduceScatter, ws, 8192, 8192, 2048, sms) -
                                              model::kCollLatencyUs - 8192.0 * 8192 * 2 * 3 / 4 /
                                                                          model::kRsBusBytesPerUs);
}

TEST(GemmRsTrial, AlternatesPlansThenDecidesAlikeEverywhere) {
  for (bool modelFused : {false, true}) {
    PlanTrial t(modelFused);
    int index = -1;
    for (int i = 0; i < PlanTrial::kCalls; ++i) {
      EXPECT_FALSE(t.readyToDecide());
      const bool f = t.next(&index);
      EXPECT_EQ(i, index);
      EXPECT_EQ(i % 2 == 0 ? modelFused : !modelFused, f) << "call " << i;
      t.launched();
    }
    EXPECT_TRUE(t.readyToDecide());
    EXPECT_EQ(modelFused, t.next(&index));  // undecided past the trial: the model's plan
    EXPECT_EQ(-1, index);
    // Fused 500 us at best, sequential 700 (a first call of 2000: module load).
    for (int i = 0; i < PlanTrial::kCalls; ++i) t.record(i, t.fusedAt(i) ? (i < 2 ? 2000 : 500) : 700);
    double mine[2];
    t.local(mine);
    EXPECT_EQ(700, mine[0]);
    EXPECT_EQ(500, mine[1]);
    // Two ranks: the other one's fused best is 760 -> the slowest rank says sequential is faster.
    const double all[4] = {mine[0], mine[1], 690, 760};
    PlanTrial a = t, b = t;
    a.decide(all, 2);
    b.decide(all, 2);
    EXPECT_TRUE(a.decided());
    EXPECT_FALSE(a.choice());
    EXPECT_EQ(a.choice(), b.choice());
    EXPECT_EQ(760, a.worst(true));
    EXPECT_EQ(700, a.worst(false));
    EXPECT_FALSE(a.next(&index));
    EXPECT_EQ(-1, index);
    // Within the margin the model's plan stays.
    const double close[4] = {700, 690, 700, 695};
    PlanTrial c = t;
    c.decide(close, 2);
    EXPECT_EQ(modelFused, c.choice());
    // A rank without a time (its events failed): the model's plan, on every rank.
    const double missing[4] = {700, 500, std::numeric_limits<double>::infinity(), 500};
    PlanTrial d = t;
    d.decide(missing, 2);
    EXPECT_EQ(modelFused, d.choice());
    PlanTrial e = t;
    e.giveUp();
    EXPECT_EQ(modelFused, e.choice());
  }
}

TEST(GemmRsTrial, IgnoresBadTimes) {
  PlanTrial t(true);
  t.record(0, -1);
  t.record(0, std::nan(""));
  t.record(7, 10);
  double mine[2];
  t.local(mine);
  EXPECT_TRUE(std::isinf(mine[0]) && std::isinf(mine[1]));
}

}  // namespace
