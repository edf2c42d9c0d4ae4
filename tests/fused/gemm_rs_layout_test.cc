// CPU checks of the GEMM+RS/AR layout and schedule (src/kernels/gemm_rs/layout.h): every
// rank computes every (phase, tile) exactly once whatever the grid and order, phases come in order
// where the order says so, a final tile comes after every sender's partial of it, both CTAs of a
// cluster see the same phases and N-blocks, the final tiles the AR workers exchange agree across
// ranks, every partial goes to the rank that owns its rows into a slot no other
// sender uses, chunks cover M, scratch and flag slots do not overlap. The cost model against the
// measurements it was calibrated on, and the auto plan's rule (gemm_rs_rule.h): every measured
// case picks the plan that was faster, no fused AllReduce beyond 2 ranks, and the choice is a
// function of the shape alone (ranks must agree without talking). Across nodes (net_route.h): the
// route from the tuner's plan, the epilogue arguments, the node map and capture; the bytes per rank
// the hierarchical collectives put on the network.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <vector>
#include "kernels/gemm_rs/layout.h"
#include "ops/gemm_rs/model.h"
#include "ops/gemm_rs/net_route.h"
#include "ops/gemm_rs/rule.h"

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

// Copy-engine batches (gemm_rs.push=ce): they cover a slot's tiles once, each tile's flag is
// its batch's first tile's, and the batch counts, words and the CTA count take slots of their own
// after every other flag; without batches nothing changes.
TEST(GemmRsLayout, CopyEngineBatchesCoverTilesAndTakeSlotsOfTheirOwn) {
  for (const Case& c : cases()) {
    Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.group);
    const int64_t base = L.flagSlots();
    EXPECT_EQ(base, L.baseFlagSlots());
    for (int B : {1, 2, 3, 64, L.tiles, L.tiles + 5}) {
      SCOPED_TRACE(testing::Message() << "mode " << c.mode << " ws " << c.ws << " M " << c.M << " N " << c.N
                                      << " cs " << c.cs << " batch " << B);
      L.setCeBatch(B);
      int covered = 0;
      for (int b = 0; b < L.ceBatches(); ++b) {
        EXPECT_GE(L.ceBatchTiles(b), 1);
        EXPECT_LE(L.ceBatchTiles(b), B);
        covered += L.ceBatchTiles(b);
      }
      EXPECT_EQ(L.tiles, covered);
      // Every tile's flag is its batch's first tile's; the engines' flags (one word per rx slot)
      // follow the tiles in the scratch, which grows by exactly them.
      for (int b = 0; b < L.ceBatches(); ++b)
        for (int u = b * B; u < b * B + L.ceBatchTiles(b); ++u)
          for (int j = 0; j + 1 < c.ws; ++j) EXPECT_EQ(L.rxSlot(j, b * B), L.rxFlag(j, u));
      EXPECT_EQ(L.tileAreaBytes(), L.ceRxFlagsOffset());
      EXPECT_EQ(0, L.ceRxFlagsOffset() % 8);
      EXPECT_EQ(L.scratchBytes(), L.ceRxFlagsOffset() + L.rxSlot(c.ws - 2, L.tiles - 1) * 8 + 8);
      std::set<int64_t> slots;
      for (int j = 0; j + 1 < c.ws; ++j)
        for (int b = 0; b < L.ceBatches(); ++b) {
          slots.insert(L.ceCountSlot(j, b));
          slots.insert(L.ceWordSlot(j, b));
        }
      slots.insert(L.ceDoneSlot());
      EXPECT_EQ(size_t(2 * (c.ws - 1) * L.ceBatches() + 1), slots.size());
      EXPECT_EQ(base, *slots.begin());
      EXPECT_EQ(L.flagSlots(), *slots.rbegin() + 1);
    }
    L.setCeBatch(0);
    EXPECT_EQ(base, L.flagSlots());
    EXPECT_EQ(L.tileAreaBytes(), L.scratchBytes());
    EXPECT_EQ(L.rxSlot(0, L.tiles - 1), L.rxFlag(0, L.tiles - 1));
  }
}

// The case's layout walked in `order` (the second member of each pair is unused: orders take no
// parameter).
Layout orderedLayout(const Case& c, int order, int) {
  Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.group);
  L.order = order;
  return L;
}

// Every order.
std::vector<std::pair<int, int>> orders(const Case&) { return {{kOrderPhases, 1}, {kOrderInterleaved, 1}}; }

// Slot keys u name the same (mb, nb) on every rank and phase, and follow the production order
// inside a phase. Phases in order (phases); the final phase last (interleaved).
TEST(GemmRsLayout, EveryRankComputesEveryTileOncePhasesInOrderClustersAgree) {
  for (const Case& c : cases())
    for (const auto& [order, lag] : orders(c)) {
    const Layout L = orderedLayout(c, order, lag);
    std::map<int, std::pair<int, int>> tileOf;  // u -> (mb, nb), over every rank and phase
    for (int rank = 0; rank < c.ws; ++rank) {
      SCOPED_TRACE(testing::Message() << "ws " << c.ws << " M " << c.M << " N " << c.N << " cs " << c.cs << " rank "
                                      << rank << " order " << order << " lag " << lag);
      std::set<std::pair<int, int>> seen;  // (phase, u)
      for (int cl = 0; cl < c.clusters; ++cl) {
        std::vector<std::vector<Tile>> perCta(c.cs);
        for (int cr = 0; cr < c.cs; ++cr) {
          Schedule s(L, rank, cl, c.clusters, cr);
          Tile t;
          int lastStep = 0, n = 0;
          std::vector<int> lastU(c.ws, -1);
          while (s.next(t)) {
            ASSERT_TRUE(t.mb >= 0 && t.mb < L.mbc && t.nb >= 0 && t.nb < L.nBlocks);
            ASSERT_TRUE(t.u >= 0 && t.u < L.tiles);
            const auto where = tileOf.emplace(t.u, std::make_pair(t.mb, t.nb)).first->second;
            EXPECT_EQ(std::make_pair(t.mb, t.nb), where) << "slot key " << t.u << " names two tiles";
            EXPECT_GT(t.u, lastU[t.step]) << "slot keys out of production order";
            lastU[t.step] = t.u;
            EXPECT_EQ(L.chunkAt(rank, t.step), t.chunk);
            EXPECT_EQ(cr, t.mb % c.cs);
            if (order == kOrderPhases) EXPECT_GE(t.step, lastStep) << "phases out of order";
            else if (order == kOrderInterleaved && lastStep == c.ws - 1)
              EXPECT_EQ(c.ws - 1, t.step) << "a send after the final phase began";
            lastStep = t.step;
            EXPECT_EQ(t.step, s.stepAt(n));
            Tile a;
            s.at(n, a);
            EXPECT_EQ(std::make_tuple(a.step, a.u, a.chunk), std::make_tuple(t.step, t.u, t.chunk));
            EXPECT_TRUE(seen.insert({t.step, t.u}).second) << "phase " << t.step << " tile " << t.u << " twice";
            perCta[cr].push_back(t);
            ++n;
          }
          EXPECT_EQ(n, s.count());
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
    EXPECT_EQ(size_t(L.tiles), tileOf.size());
    }
}

// Where each (phase, u) sits in the whole order of rank `rank` (position = cluster + n * clusters).
std::map<std::pair<int, int>, int64_t> positions(const Layout& L, const Case& c, int rank) {
  std::map<std::pair<int, int>, int64_t> pos;
  for (int cl = 0; cl < c.clusters; ++cl)
    for (int cr = 0; cr < c.cs; ++cr) {
      Schedule s(L, rank, cl, c.clusters, cr);
      Tile t;
      for (int n = 0; s.next(t); ++n) pos[{t.step, t.u}] = cl + int64_t(n) * c.clusters;
    }
  return pos;
}

// No wait can close a cycle: a rank's final tile u comes after every other rank's partial of u
// (rank q sends it at phase (r - q - 1) mod ws), and positions are the same on every rank (the
// sends come first in every order).
TEST(GemmRsLayout, AFinalTileComesAfterEverySendersPartialOfIt) {
  for (const Case& c : cases())
    for (const auto& [order, lag] : orders(c)) {
      const Layout L = orderedLayout(c, order, lag);
      std::vector<std::map<std::pair<int, int>, int64_t>> pos;
      for (int r = 0; r < c.ws; ++r) pos.push_back(positions(L, c, r));
      const int64_t gap = 1;
      for (int r = 0; r < c.ws; ++r)
        for (int u = 0; u < L.tiles; ++u) {
          const int64_t fin = pos[r].at({c.ws - 1, u});
          for (int q = 0; q < c.ws; ++q) {
            if (q == r) continue;
            const int j = ((r - q - 1) % c.ws + c.ws) % c.ws;
            ASSERT_EQ(r, L.chunkAt(q, j));
            EXPECT_GE(fin - pos[q].at({j, u}), gap) << "ws " << c.ws << " order " << order << " lag " << lag
                                                    << " owner " << r << " sender " << q << " tile " << u;
          }
        }
    }
}

// The AR workers of CTA k on every rank exchange the final tiles CTA k computes: every rank's
// CTA k must have the same tiles u at the same places of its sequence among its final tiles.
TEST(GemmRsLayout, FinalTilesAgreeAcrossRanks) {
  for (const Case& c : cases())
    for (const auto& [order, lag] : orders(c)) {
      const Layout L = orderedLayout(c, order, lag);
      for (int cl = 0; cl < c.clusters; ++cl)
        for (int cr = 0; cr < c.cs; ++cr) {
          const Schedule s0(L, 0, cl, c.clusters, cr);
          for (int rank = 1; rank < c.ws; ++rank) {
            const Schedule s(L, rank, cl, c.clusters, cr);
            ASSERT_EQ(s0.count(), s.count());
            for (int n = 0; n < s.count(); ++n) {
              Tile a, b;
              s0.at(n, a);
              s.at(n, b);
              EXPECT_EQ(a.step == c.ws - 1, b.step == c.ws - 1) << "cluster " << cl << " tile #" << n;
              if (a.step == c.ws - 1)
                EXPECT_EQ(a.u, b.u) << "cluster " << cl << " final tile #" << n << " rank " << rank;
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

// Ring reduction (phase order): every rank sends to one neighbour and hears from the other; the
// sum a tile of phase j adds was made by the neighbour at phase j-1 of the same chunk and tile, a
// whole phase earlier in the order (positions are the same on every rank); into a slot nobody else
// writes; and the chain that ends at the owner's final tile passes every other rank once, so the
// result sums all ws partials. Direct reduction: inputs only in the final phase, all ws-1 slots.
TEST(GemmRsLayout, RingSumsPassEveryRankOnceAndComeAPhaseEarly) {
  for (const Case& c : cases()) {
    Layout L = orderedLayout(c, kOrderPhases, 1);
    for (int j = 0; j < c.ws; ++j) {
      EXPECT_EQ(j == c.ws - 1 ? c.ws - 1 : 0, L.inCount(j));
      EXPECT_EQ(0, L.inFirst(j));
    }
    L.ring = 1;
    std::vector<std::map<std::pair<int, int>, int64_t>> pos;
    for (int r = 0; r < c.ws; ++r) pos.push_back(positions(L, c, r));
    for (int r = 0; r < c.ws; ++r) {
      SCOPED_TRACE(testing::Message() << "ws " << c.ws << " M " << c.M << " N " << c.N << " cs " << c.cs << " rank "
                                      << r);
      EXPECT_EQ(0, L.inCount(0));
      std::set<int> senders, targets;
      for (int j = 0; j + 1 < c.ws; ++j) {
        const int to = L.sendTo(r, j);
        targets.insert(to);
        EXPECT_NE(r, to);
        EXPECT_EQ(L.chunkAt(r, j), L.chunkAt(to, j + 1)) << "the next rank adds our sum to the same chunk";
        EXPECT_EQ(r, L.senderOf(to, j)) << "its slot j hears from us";
        senders.insert(L.senderOf(r, j));
      }
      EXPECT_EQ(1u, targets.size());
      EXPECT_EQ(1u, senders.size());
      for (int j = 1; j < c.ws; ++j) {
        ASSERT_EQ(1, L.inCount(j));
        const int slot = L.inFirst(j), q = L.senderOf(r, slot);
        EXPECT_EQ(j - 1, slot);
        EXPECT_EQ(L.chunkAt(r, j), L.chunkAt(q, slot));
        for (int u = 0; u < L.tiles; ++u)
          EXPECT_GE(pos[r].at({j, u}) - pos[q].at({slot, u}), L.clusterTiles) << "phase " << j << " tile " << u;
      }
      // Back from our final tile: every rank once.
      std::set<int> chain{r};
      int at = r;
      for (int j = c.ws - 1; j > 0; --j) {
        at = L.senderOf(at, L.inFirst(j));
        EXPECT_TRUE(chain.insert(at).second) << "rank " << at << " twice on the chain";
      }
      EXPECT_EQ(size_t(c.ws), chain.size());
    }
  }
}

// 4xH200, 2026-11-22, commit f9ffa77 (perf/results/20261122-130330-4xNVIDIA_H200/gemm_{rs,ar}-ws
// {2,4}.json): each plan forced, µs; K is the whole inner dimension (split over the ranks).
struct Measured {
  int mode, ws;
  int64_t M, N, K;
  double fusedUs, seqUs;
};
const Measured kRun[] = {
    {kModeReduceScatter, 4, 8192, 8192, 8192, 506.5, 771.7},   {kModeReduceScatter, 4, 16384, 8192, 8192, 980.3, 1522},
    {kModeReduceScatter, 4, 4096, 8192, 8192, 280.2, 407.9},   {kModeReduceScatter, 4, 8192, 8192, 4096, 385.6, 607.1},
    {kModeReduceScatter, 2, 8192, 8192, 8192, 806.8, 1048},    {kModeReduceScatter, 2, 16384, 8192, 8192, 1609, 2186},
    {kModeReduceScatter, 2, 4096, 8192, 8192, 411.6, 532.9},   {kModeReduceScatter, 2, 8192, 8192, 4096, 455.6, 707.7},
    // AllReduce at 4 ranks: fused from 0af0e62 (the waits' host polling fixed), sequential from f9ffa77.
    {kModeAllReduce, 4, 8192, 8192, 8192, 700.6, 1084},        {kModeAllReduce, 4, 16384, 8192, 8192, 1372, 2117},
    {kModeAllReduce, 4, 4096, 8192, 8192, 387.1, 566.6},       {kModeAllReduce, 4, 8192, 8192, 4096, 667.2, 926},
    {kModeAllReduce, 2, 8192, 8192, 8192, 912.1, 1224},        {kModeAllReduce, 2, 16384, 8192, 8192, 1721, 2448},
    {kModeAllReduce, 2, 4096, 8192, 8192, 449.4, 616.1},       {kModeAllReduce, 2, 8192, 8192, 4096, 525.5, 854}};
constexpr int kH200Sms = 132;
// The op's flag slots: the library's 1 MiB flag area (runtime/init.cc) from kOpFlagSlot (64).
constexpr int64_t kFlagSlots = (1 << 20) / 8 - 64;

RuleInputs ruleInputs(int mode, int ws, int64_t M, int64_t N, int64_t kPerRank, int budget = kH200Sms,
                      int64_t flagSlots = kFlagSlots) {
  RuleInputs in;
  in.mode = mode;
  in.ws = ws;
  in.M = M;
  in.N = N;
  in.K = kPerRank;
  in.ctaBudget = budget;
  in.flagSlots = flagSlots;
  return in;
}

RuleInputs ruleInputs(const Measured& m) { return ruleInputs(m.mode, m.ws, m.M, m.N, m.K / m.ws); }

testing::Message describe(const RuleInputs& in) {
  return testing::Message() << (in.mode == kModeAllReduce ? "AR" : "RS") << " ws " << in.ws << " " << in.M << "x"
                            << in.N << "x" << in.K << "/rank, " << in.ctaBudget << " SMs";
}

bool same(const PlanChoice& a, const PlanChoice& b) {
  return a.route == b.route && a.rsAgUs == b.rsAgUs && a.rsPlan.ok == b.rsPlan.ok && a.fused == b.fused && a.why == b.why && a.plan.ok == b.plan.ok && a.plan.bn == b.plan.bn &&
         a.plan.cs == b.plan.cs && a.plan.ctas == b.plan.ctas && a.plan.estUs == b.plan.estUs && a.seqUs == b.seqUs;
}

// Shapes around the measured ones and far from them: tiny, odd, narrow, wide, deep, shallow.
std::vector<RuleInputs> sweep() {
  std::vector<RuleInputs> v;
  for (int mode : {kModeReduceScatter, kModeAllReduce})
    for (int ws : {2, 3, 4, 5, 8})
      for (int64_t rows : {1, 8, 200, 1000, 2048, 4096})
        for (int64_t N : {8, 264, 1032, 8192, 28672})
          for (int64_t K : {8, 72, 1024, 4096})
            for (int budget : {1, 16, 132})
              for (int64_t extra : {0, 3})  // AllReduce: M need not split evenly
                if (extra == 0 || mode == kModeAllReduce)
                  v.push_back(ruleInputs(mode, ws, rows * ws + extra, N, K, budget));
  return v;
}

// The sequential estimate against seq_us and the fused one against fused_us, every case.
TEST(GemmRsModel, MatchesTheCalibrationRun) {
  for (const Measured& m : kRun) {
    const RuleInputs in = ruleInputs(m);
    SCOPED_TRACE(describe(in));
    const PlanChoice c = choosePlan(in);
    EXPECT_NEAR(c.seqUs, m.seqUs, 0.06 * m.seqUs);
    ASSERT_TRUE(c.plan.ok);
    EXPECT_EQ(256, c.plan.bn);
    EXPECT_EQ(1, c.plan.cs);
    EXPECT_EQ(kH200Sms, c.plan.ctas);
    EXPECT_NEAR(c.plan.estUs, m.fusedUs, 0.08 * m.fusedUs);
  }
}

// A GEMM with no communication to hide is no faster fused: the estimate never drops below the
// same GEMM (its tile width, its CTAs) alone.
TEST(GemmRsModel, FusedNeverBelowItsGemm) {
  for (const RuleInputs& in : sweep()) {
    SCOPED_TRACE(describe(in));
    const PlanChoice c = choosePlan(in);
    ASSERT_TRUE(c.plan.ok);
    const FusedPlan& p = c.plan;
    const int64_t tiles = mkccl::ceilDiv(in.M, kTileRows) * mkccl::ceilDiv(in.N, p.bn);
    const double gemmAlone = double(mkccl::ceilDiv(tiles, p.ctas)) * model::tileUs(p.bn, p.cs, in.K);
    EXPECT_GE(p.estUs, gemmAlone);
    EXPECT_TRUE(std::isfinite(p.estUs));
    EXPECT_TRUE(std::isfinite(c.seqUs) && c.seqUs > model::kCollLatencyUs);
  }
}

TEST(GemmRsRule, EveryMeasuredCasePicksTheFasterPlan) {
  for (const Measured& m : kRun) {
    const RuleInputs in = ruleInputs(m);
    SCOPED_TRACE(describe(in) << ": fused " << m.fusedUs << " us, sequential " << m.seqUs << " us");
    const PlanChoice c = choosePlan(in);
    // A fused route where the fused kernel beat the sequential plan (AllReduce: the fused kernel or
    // RsThenAg, which is built on it), the sequential plan where it did not.
    EXPECT_EQ(m.fusedUs < m.seqUs, c.route != Route::Sequential);
  }
}

// The fused AllReduce up to kMaxFusedAllReduceRanks (measured at 2 and 4), never beyond: past it
// the rule takes RsThenAg or the sequential plan for any shape.
TEST(GemmRsRule, FusedAllReduceOnlyWhereMeasured) {
  EXPECT_EQ(4, kMaxFusedAllReduceRanks);
  int fusedRs = 0, fusedAr = 0;
  for (const RuleInputs& in : sweep()) {
    SCOPED_TRACE(describe(in));
    const PlanChoice c = choosePlan(in);
    if (in.mode == kModeAllReduce && in.ws > kMaxFusedAllReduceRanks) {
      EXPECT_FALSE(c.fused);
      EXPECT_NE(Route::Fused, c.route);
      if (c.plan.ok) EXPECT_EQ(RuleReason::AllReduceWorldSize, c.why);
    }
    if (c.fused) {
      EXPECT_TRUE(c.plan.ok);
      EXPECT_LT(c.plan.estUs, c.seqUs);
      (in.mode == kModeAllReduce ? fusedAr : fusedRs)++;
    }
  }
  EXPECT_GT(fusedRs, 0);
  EXPECT_GT(fusedAr, 0);
}

// RsThenAg's estimate against its two parts measured on their own (fused RS at f9ffa77; our
// AllGather of C, allgather-ws4.json at a339c7f: 64 MiB 171.8 us, 128 MiB 331.9, 256 MiB 618.5),
// and the rule's pick at 4 ranks: the fused AllReduce, measured faster than RsThenAg at every
// shape (701 / 1372 / 387 / 667 us against 802 / 1564 / 414 / 694, 0af0e62); beyond 4 ranks,
// where no fused AllReduce runs, RsThenAg.
TEST(GemmRsRule, AllReduceAtFourRanksAndBeyond) {
  struct Part {
    int64_t M, N, K;
    double rsUs, agUs;
  };
  const Part parts[] = {{8192, 8192, 8192, 506.5, 331.9},
                        {16384, 8192, 8192, 980.3, 618.5},
                        {4096, 8192, 8192, 280.2, 171.8},
                        {8192, 8192, 4096, 385.6, 331.9}};
  for (const Part& m : parts) {
    const RuleInputs in = ruleInputs(kModeAllReduce, 4, m.M, m.N, m.K / 4);
    SCOPED_TRACE(describe(in));
    const PlanChoice c = choosePlan(in);
    EXPECT_EQ(Route::Fused, c.route);
    ASSERT_TRUE(c.rsPlan.ok);
    EXPECT_EQ(kModeReduceScatter, c.rsPlan.L.mode);
    EXPECT_NEAR(c.rsAgUs, m.rsUs + m.agUs, 0.08 * (m.rsUs + m.agUs));
    EXPECT_LT(c.rsAgUs, c.seqUs);
    const PlanChoice at8 = choosePlan(ruleInputs(kModeAllReduce, 8, m.M, m.N, m.K / 8));
    EXPECT_EQ(Route::RsThenAg, at8.route);
  }
}

// RsThenAg only for AllReduce with M divisible by the ranks; when taken, it beats both other
// estimates it could replace. At 2 ranks the fused AllReduce stays at the measured shapes (62-75%
// of the sequential plan; RsThenAg would add a whole AllGather after the GEMM).
TEST(GemmRsRule, ReduceScatterThenAllGatherOnlyWhereItFits) {
  int taken = 0;
  for (const RuleInputs& in : sweep()) {
    SCOPED_TRACE(describe(in));
    const PlanChoice c = choosePlan(in);
    const bool possible = in.mode == kModeAllReduce && in.M % in.ws == 0;
    if (!possible) {
      EXPECT_FALSE(c.rsPlan.ok);
      EXPECT_NE(Route::RsThenAg, c.route);
    }
    if (c.route == Route::RsThenAg) {
      ++taken;
      EXPECT_TRUE(c.rsPlan.ok);
      EXPECT_LT(c.rsAgUs, c.seqUs);
      if (c.plan.ok && in.ws <= kMaxFusedAllReduceRanks) EXPECT_LE(c.rsAgUs, c.plan.estUs);
    }
  }
  EXPECT_GT(taken, 0);
  for (const Measured& m : kRun)
    if (m.mode == kModeAllReduce && m.ws == 2) {
      const PlanChoice c = choosePlan(ruleInputs(m));
      EXPECT_EQ(Route::Fused, c.route) << m.M << "x" << m.N << "x" << m.K;
    }
}

// What every rank computes alike: the same inputs give the same choice whatever was asked before
// (no state: the removed trial's first calls of a shape differed from its later ones), and the
// fused configuration stays within the SM budget.
TEST(GemmRsRule, ChoiceIsAFunctionOfTheShapeAlone) {
  const std::vector<RuleInputs> v = sweep();
  std::vector<PlanChoice> first;
  for (const RuleInputs& in : v) first.push_back(choosePlan(in));
  for (size_t i = v.size(); i-- > 0;) {
    SCOPED_TRACE(describe(v[i]));
    EXPECT_TRUE(same(first[i], choosePlan(v[i])));
    EXPECT_TRUE(same(first[i], choosePlan(v[i])));
    const FusedPlan& p = first[i].plan;
    if (p.ok) {
      EXPECT_GE(p.ctas, 1);
      EXPECT_LE(p.ctas, v[i].ctaBudget);
      EXPECT_LE(int64_t(p.ctas), p.L.orderLength()) << "no idle CTA";
      EXPECT_EQ(1, p.cs) << "auto takes no cluster";
    }
  }
}

// A smaller SM budget never speeds a plan up (a link-bound fused estimate stays); on a share of the
// GPU the fused kernel still fits.
TEST(GemmRsRule, SmBudget) {
  for (const Measured& m : kRun) {
    const RuleInputs all = ruleInputs(m);
    RuleInputs half = all;
    half.ctaBudget = kH200Sms / 2;
    SCOPED_TRACE(describe(half));
    const PlanChoice a = choosePlan(all), h = choosePlan(half);
    ASSERT_TRUE(h.plan.ok);
    EXPECT_EQ(kH200Sms / 2, h.plan.ctas);
    EXPECT_GE(h.plan.estUs, a.plan.estUs);
    EXPECT_GT(h.seqUs, a.seqUs);
  }
}

// Flags or scratch that would not fit: sequential, whatever the model says.
TEST(GemmRsRule, FusedThatCannotFitRunsSequential) {
  for (int mode : {kModeReduceScatter, kModeAllReduce}) {
    const RuleInputs noFlags = ruleInputs(mode, 2, 8192, 8192, 4096, kH200Sms, 100);
    const PlanChoice c = choosePlan(noFlags);
    EXPECT_FALSE(c.plan.ok);
    EXPECT_FALSE(c.fused);
    EXPECT_EQ(RuleReason::FusedCannotRun, c.why);
    // 2 ranks, 65536 x 131072: 16 GiB of scratch per rank and more tiles than flag slots.
    const PlanChoice big = choosePlan(ruleInputs(mode, 2, 65536, 131072, 4096));
    EXPECT_FALSE(big.plan.ok);
    EXPECT_FALSE(big.fused);
    // One flag slot short of what the fused kernel needs.
    const PlanChoice fits = choosePlan(ruleInputs(mode, 2, 8192, 8192, 4096));
    ASSERT_TRUE(fits.plan.ok);
    // (The 128-wide tile needs twice the slots, so nothing fits.)
    const int64_t slots = fits.plan.L.flagSlots() - 1;
    const PlanChoice shortOne = choosePlan(ruleInputs(mode, 2, 8192, 8192, 4096, kH200Sms, slots));
    EXPECT_FALSE(shortOne.plan.ok);
    EXPECT_FALSE(shortOne.fused);
  }
}

// fp8 block scales (maxBn 128: the block-scaled fused kernel's one width): every fused plan the rule
// makes, for either route, is 128 wide; where the 128-wide tile fits, the fused routes stay open.
TEST(GemmRsRule, BlockScalesPlanOnlyTheNarrowTile) {
  for (const Measured& m : kRun) {
    RuleInputs in = ruleInputs(m);
    in.maxBn = 128;
    SCOPED_TRACE(describe(in));
    const PlanChoice c = choosePlan(in);
    const FusedPlan narrow = fusedConfig(in, 128, 1, in.ctaBudget);
    EXPECT_EQ(narrow.ok, c.plan.ok);
    if (c.plan.ok) EXPECT_EQ(128, c.plan.bn);
    if (c.rsPlan.ok) EXPECT_EQ(128, c.rsPlan.bn);
    if (c.route == Route::Fused) EXPECT_EQ(128, c.plan.L.bn);
  }
}

}  // namespace

// Across nodes (ops/gemm_rs/net_route.h): the route every rank takes from what it knows alike.
namespace {

TEST(GemmRsNet, RouteAcrossNodes) {
  using mkccl::rs::NetVerdict;
  using mkccl::rs::netRouteFor;
  for (int knob = 0; knob < 4; ++knob)
    for (int extras = 0; extras < 2; ++extras) {
      const auto r = netRouteFor(knob, extras != 0, true, false);
      EXPECT_EQ(NetVerdict::Run, r.verdict);
      EXPECT_EQ(extras != 0, r.exact);
      // fused (1) and rs_ag (3) are one node's: demoted (a warning), never for the exact route.
      EXPECT_EQ(extras == 0 && (knob == 1 || knob == 3), r.demoted) << "knob " << knob;
      // Uneven nodes before capture: the permanent reason first.
      EXPECT_EQ(NetVerdict::NotUniform, netRouteFor(knob, extras != 0, false, true).verdict);
      EXPECT_EQ(NetVerdict::Capturing, netRouteFor(knob, extras != 0, true, true).verdict);
    }
}

TEST(GemmRsNet, BytesPerRankMatchTheHierarchicalCollectives) {
  using mkccl::rs::netBytesPerRank;
  // One node: nothing crosses.
  EXPECT_EQ(0, netBytesPerRank(kModeReduceScatter, 1, 4, 1024, 256, 2));
  // RS, 2 x 2, M = 1024: each rank sends its node's partial of one counterpart's 256 rows.
  EXPECT_EQ(int64_t(256) * 512 * 2, netBytesPerRank(kModeReduceScatter, 2, 2, 1024, 512, 2));
  // RS, 4 x 1: three other nodes, M / 4 rows each.
  EXPECT_EQ(int64_t(3) * 250 * 136 * 2, netBytesPerRank(kModeReduceScatter, 4, 1, 1000, 136, 2));
  // AR, 2 x 1: the whole C to the other node.
  EXPECT_EQ(int64_t(333) * 392 * 2, netBytesPerRank(kModeAllReduce, 2, 1, 333, 392, 2));
  // AR, 2 x 2: the first share, ceil(333 * 392 / 2) = 65268 elements rounded up to 8 (16 bytes).
  EXPECT_EQ(int64_t(65272) * 2, netBytesPerRank(kModeAllReduce, 2, 2, 333, 392, 2));
  // AR, 4 x 1: the whole C (one share) to each of three nodes.
  EXPECT_EQ(int64_t(3) * 3 * 8 * 2, netBytesPerRank(kModeAllReduce, 4, 1, 3, 8, 2));
  // Summed over the ranks of a 2 x 2 AR, what crosses covers C once per node pair direction.
  const int64_t M = 4096, n = 1024, es = 2;
  EXPECT_GE(2 * netBytesPerRank(kModeAllReduce, 2, 2, M, n, es), M * n * es);
}

// The split route's pieces: at least 128 rows and 256 KiB each, at most 8, at least 1.
TEST(GemmRsNet, SplitPiecesByRowsAndBytes) {
  using mkccl::netSplitPieces;
  EXPECT_EQ(1, netSplitPieces(72, 272));           // fewer than 128 rows
  EXPECT_EQ(1, netSplitPieces(255, 8192));         // one whole 128-row piece and a part
  EXPECT_EQ(2, netSplitPieces(256, 8192));
  EXPECT_EQ(4, netSplitPieces(512, 4096));         // 1024 x 2048 at 2 ranks: 2 MiB, 512 KiB pieces
  EXPECT_EQ(8, netSplitPieces(1024, 8192));        // capped at 8
  EXPECT_EQ(8, netSplitPieces(1 << 20, 1 << 14));
  EXPECT_EQ(2, netSplitPieces(512, 1024));         // 512 KiB: two 256 KiB pieces
  EXPECT_EQ(1, netSplitPieces(4096, 32));          // 128 KiB in all
  EXPECT_EQ(5, netSplitPieces(666, 2048));         // gemm_rs_net_test's AllReduce at 2 ranks
  for (int64_t rows : {1, 127, 128, 333, 1000, 4097})
    for (int64_t bytes : {16, 528, 2048, 16384}) {
      const int p = netSplitPieces(rows, bytes);
      EXPECT_GE(p, 1);
      EXPECT_LE(p, 8);
      if (p > 1) {
        EXPECT_GE(rows / p, 128) << rows << " rows of " << bytes;
        EXPECT_GE(rows * bytes / p, int64_t(256) << 10) << rows << " rows of " << bytes;
      }
    }
}

}  // namespace
