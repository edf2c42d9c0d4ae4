// CPU checks of the MoE index math (src/kernels/moe/moe_layout.h) and of the dispatch kernel's
// placement, emulated: rows inside their segments, none shared, sources in rank order, capacity.
#include <gtest/gtest.h>
#include <algorithm>
#include <stdint.h>
#include <random>
#include <set>
#include <vector>
#include "moe_reference.h"

using namespace mkccl;
using namespace mkccl::moetest;
using mkccl::moe::alignUp;

namespace {

Dims dims(int ranks, int E, int k, size_t H, size_t cap, int align = 128) {
  Dims d;
  d.ranks = ranks;
  d.experts = E;
  d.topk = k;
  d.hidden = H;
  d.cap = cap;
  d.align = align;
  d.rows = moe::worstRecvRows(d);
  return d;
}

TEST(MoeLayout, PitchesAndRecords) {
  for (size_t H : {1, 3, 7, 8, 9, 100, 2048, 7168, 7169}) {
    Dims d = dims(2, 8, 2, H, 16);
    EXPECT_EQ(0u, d.rowBytes() % 16) << H;
    EXPECT_GE(d.pitch(), H);
    EXPECT_LT(d.pitch(), H + 8);
    // A combine result row holds H fp32 values, and 8-element groups never run past it.
    EXPECT_GE(d.landingPitch(), alignUp(H, 8) * 4);
    EXPECT_GE(d.landingPitch(), d.rowBytes());
    EXPECT_EQ(0u, d.landingPitch() % 16);
  }
  for (int k = 1; k <= moe::kMaxTopk; ++k) {
    Dims d = dims(2, 32, k, 64, 16);
    EXPECT_GE(d.pairStride(), k + 1);
    EXPECT_EQ(0, d.pairStride() % 4);
  }
}

TEST(MoeLayout, RegionPiecesAreAlignedAndDisjoint) {
  for (int ranks : {1, 2, 3, 4, 8, 16})
    for (size_t H : {1, 100, 7168})
      for (size_t cap : {1, 3, 4096}) {
        Dims d = dims(ranks, 16 * ranks, 8, H, cap);
        const moe::Region r = moe::regionFor(d);
        const size_t starts[] = {r.counts, r.pairs, r.queueTail, r.pairQueue, r.rowInfo, r.recvX, r.landing, r.landReady, r.arrivals, r.bytes};
        const size_t sizes[] = {(size_t)ranks * d.keys() * 4,
                                (size_t)ranks * cap * d.pairStride() * 4,
                                (size_t)ranks * 8,
                                (size_t)(ranks - 1) * cap * 8,
                                d.rows * 16,
                                d.rows * d.rowBytes(),
                                (size_t)(ranks - 1) * cap * d.landingPitch(),
                                (size_t)(ranks - 1) * cap * d.landPieces() * 8,
                                (1 + moe::arrivalBlocks(d)) * 8};
        EXPECT_GE(r.counts, moe::kFlagBytes);
        for (int i = 0; i < 9; ++i) {
          EXPECT_EQ(0u, starts[i] % 256) << i;
          EXPECT_LE(starts[i] + sizes[i], starts[i + 1]) << "piece " << i << " runs into the next";
        }
      }
}

TEST(MoeLayout, PeerIndexIsABijection) {
  for (int n = 1; n <= 16; ++n)
    for (int owner = 0; owner < n; ++owner) {
      std::set<int> seen;
      for (int other = 0; other < n; ++other) {
        if (other == owner) continue;
        const int i = moe::peerIndex(owner, other, n);
        EXPECT_GE(i, 0);
        EXPECT_LT(i, n - 1);
        seen.insert(i);
      }
      EXPECT_EQ((size_t)(n - 1), seen.size());
    }
}

TEST(MoeLayout, RouteCodes) {
  for (int d = 0; d < 16; ++d)
    for (int m = 1; m <= 16; ++m)
      for (bool first : {false, true}) {
        const int32_t c = moe::routeCode(d, first, m);
        EXPECT_GE(c, 0);
        EXPECT_EQ(d, moe::routeRank(c));
        EXPECT_EQ(first, moe::routeFirst(c));
        EXPECT_EQ(m, moe::routeSlots(c));
      }
  EXPECT_FALSE(moe::landsAsSum(1));
  EXPECT_TRUE(moe::landsAsSum(2));
}

// Every token in exactly one (CTA, warp), ranges contiguous, ctaOf/warpOf agreeing with them.
TEST(MoeLayout, TokenSplitCoversEveryTokenOnce) {
  for (int T : {0, 1, 3, 31, 32, 33, 100, 1000, 4096, 16383})
    for (int ctas : {1, 2, 3, 7, 32, 64, 132}) {
      moe::TokenSplit sp{T, ctas};
      std::vector<int> seen(T, 0);
      EXPECT_EQ(0, sp.ctaStart(0));
      EXPECT_EQ(T, sp.ctaStart(ctas));
      for (int b = 0; b < ctas; ++b) {
        EXPECT_EQ(sp.ctaStart(b), sp.warpStart(b, 0));
        EXPECT_EQ(sp.ctaStart(b + 1), sp.warpStart(b, moe::kWarps));
        for (int w = 0; w < moe::kWarps; ++w)
          for (int t = sp.warpStart(b, w); t < sp.warpStart(b, w + 1); ++t) {
            ++seen[t];
            EXPECT_EQ(b, sp.ctaOf(t)) << "T " << T << " ctas " << ctas << " t " << t;
            EXPECT_EQ(w, sp.warpOf(t)) << "T " << T << " ctas " << ctas << " t " << t;
          }
      }
      for (int t = 0; t < T; ++t) ASSERT_EQ(1, seen[t]) << "T " << T << " ctas " << ctas << " t " << t;
    }
}

// The worst case of the receive buffer bounds every routing, and is reached.
TEST(MoeLayout, WorstRecvRowsBoundsEveryRouting) {
  std::mt19937_64 g(7);
  for (int ranks : {1, 2, 3, 4})
    for (int El : {1, 2, 5, 32})
      for (int k : {1, 2, 8}) {
        Dims d = dims(ranks, El * ranks, k, 16, 37, 16);
        // The worst routing: every token of every rank on the last rank, all k slots.
        std::vector<Routing> worst(ranks);
        for (int s = 0; s < ranks; ++s) {
          worst[s] = makeRouting(RouteKind::Uniform, (int)d.cap, d, g());
          for (int t = 0; t < (int)d.cap; ++t)
            for (int j = 0; j < k; ++j)
              worst[s].idx[(size_t)t * k + j] = (ranks - 1) * El + (j + t) % El;
        }
        const auto lay = referenceLayout(d, worst);
        EXPECT_LE(lay[ranks - 1].total(), (long long)moe::worstRecvRows(d));
        EXPECT_GT(lay[ranks - 1].total() + d.localExperts() * d.align, (long long)moe::worstRecvRows(d)) << "a loose bound";
        for (RouteKind kind : {RouteKind::Uniform, RouteKind::Skewed, RouteKind::OneRank, RouteKind::Duplicates}) {
          std::vector<Routing> r(ranks);
          for (int s = 0; s < ranks; ++s) r[s] = makeRouting(kind, (int)d.cap, d, g());
          for (const RankLayout& l : referenceLayout(d, r)) EXPECT_LE(l.total(), (long long)moe::worstRecvRows(d));
        }
      }
}

// The kernel's placement (emulated) for every routing kind, world size, grid and alignment.
TEST(MoeLayout, PlacementFillsSegmentsInSourceOrder) {
  std::mt19937_64 g(11);
  for (int ranks : {1, 2, 3, 4})
    for (RouteKind kind : {RouteKind::Uniform, RouteKind::Skewed, RouteKind::EmptyExperts, RouteKind::Dropped,
                           RouteKind::Duplicates, RouteKind::OneRank})
      for (int ctas : {1, 3, 16})
        for (int align : {1, 16, 128}) {
          Dims d = dims(ranks, 4 * ranks, kind == RouteKind::Uniform ? 4 : 3, 8, 300, align);
          std::vector<Routing> r(ranks);
          for (int s = 0; s < ranks; ++s) {
            const int T = s == 0 ? 0 : s == 1 ? 1 : (int)(g() % 300);  // T = 0 and 1 among them
            r[s] = makeRouting(kind, T, d, g());
          }
          SCOPED_TRACE(testing::Message() << ranks << " ranks, " << routeKindName(kind) << ", " << ctas
                                          << " CTAs, align " << align);
          const auto lay = referenceLayout(d, r);
          for (const RankLayout& l : lay) {
            for (int le = 0; le < d.localExperts(); ++le) {
              EXPECT_EQ(0, l.offsets[le] % align);
              EXPECT_LE(l.offsets[le] + l.counts[le], l.offsets[le + 1]);
              EXPECT_LT(l.offsets[le + 1] - l.offsets[le] - l.counts[le], align) << "more padding than needed";
            }
          }
          const Placement p = emulatePlacement(d, r, ctas);
          EXPECT_EQ("", checkPlacement(d, r, lay, p));
        }
}

// mkcclMoeDispatchGemm's arrival counts: the fused dispatch walks each source's send list (index
// myScan[e] + rank of the slot among the source's rows of global expert e, i.e. row - the source's
// first row of e at the owner) and adds one per row to the row's 128-row block at the owner; the
// GEMM waits, per block, for clamp(count_e - (block start - offset_e), 0, 128). Checked on the
// emulated placement: the send list is a permutation of [0, rows sent) ordered by (expert, row),
// and every block receives exactly what the GEMM waits for (no more: a counter above the wait
// would mean a row of another block counted here; no less: a hang).
TEST(MoeLayout, FusedArrivalsMatchTheGemmsWait) {
  std::mt19937_64 g(29);
  for (int ranks : {1, 2, 3, 4})
    for (RouteKind kind : {RouteKind::Uniform, RouteKind::Skewed, RouteKind::EmptyExperts, RouteKind::Dropped,
                           RouteKind::Duplicates, RouteKind::OneRank})
      for (int ctas : {1, 5}) {
        Dims d = dims(ranks, 4 * ranks, 3, 8, 700, 128);
        std::vector<Routing> r(ranks);
        for (int s = 0; s < ranks; ++s) r[s] = makeRouting(kind, s == 0 ? 1 : (int)(g() % 700), d, g());
        SCOPED_TRACE(testing::Message() << ranks << " ranks, " << routeKindName(kind) << ", " << ctas << " CTAs");
        const auto lay = referenceLayout(d, r);
        const Placement p = emulatePlacement(d, r, ctas);
        ASSERT_EQ("", checkPlacement(d, r, lay, p));
        const int E = d.experts, El = d.localExperts(), k = d.topk;
        std::vector<std::vector<long long>> arrived(ranks);
        for (int q = 0; q < ranks; ++q) arrived[q].assign((lay[q].total() + 127) / 128, 0);
        for (int s = 0; s < ranks; ++s) {
          std::vector<long long> mine(E, 0), first(E, -1);
          for (int i = 0; i < r[s].T * k; ++i) {
            const int e = r[s].idx[i];
            if (e < 0 || e >= E) continue;
            ++mine[e];
            if (first[e] < 0 || p.pos[s][i] < first[e]) first[e] = p.pos[s][i];
          }
          std::vector<long long> scan(E + 1, 0);
          for (int e = 0; e < E; ++e) scan[e + 1] = scan[e] + mine[e];
          std::vector<int> seen(scan[E], 0);
          for (int i = 0; i < r[s].T * k; ++i) {
            const int e = r[s].idx[i];
            if (e < 0 || e >= E) continue;
            const long long L = scan[e] + (p.pos[s][i] - first[e]);
            ASSERT_GE(L, scan[e]);
            ASSERT_LT(L, scan[e + 1]) << "source " << s << "'s rows of expert " << e << " are not contiguous";
            ++seen[L];
            arrived[e / El][p.pos[s][i] / 128]++;
          }
          for (long long L = 0; L < scan[E]; ++L) ASSERT_EQ(1, seen[L]) << "send list entry " << L;
        }
        for (int q = 0; q < ranks; ++q) {
          const RankLayout& l = lay[q];
          for (int le = 0; le < El; ++le)
            for (long long b = l.offsets[le] / 128; b < l.offsets[le + 1] / 128; ++b) {
              const long long want = std::min<long long>(128, std::max<long long>(0, l.counts[le] - (b * 128 - l.offsets[le])));
              EXPECT_EQ(want, arrived[q][b]) << "rank " << q << " expert " << le << " block " << b;
            }
        }
      }
}

TEST(MoeLayout, RoutingsAreWhatTheyClaim) {
  Dims d = dims(4, 32, 8, 8, 512);
  const Routing sk = makeRouting(RouteKind::Skewed, 512, d, 3);
  size_t hot = 0, all = 0;
  for (int e : sk.idx) {
    all += e >= 0;
    hot += e >= 0 && e < 2;
  }
  EXPECT_GT(hot, all / 2) << "skewed: most slots on rank 0's first experts";
  const auto lay = referenceLayout(d, {makeRouting(RouteKind::EmptyExperts, 512, d, 4)});
  EXPECT_EQ(0, lay[0].counts[1]) << "empty experts: expert 1 never chosen";
  const Routing dr = makeRouting(RouteKind::Dropped, 512, d, 5);
  size_t dropped = 0;
  for (int e : dr.idx) dropped += e < 0;
  EXPECT_GT(dropped, dr.idx.size() / 5);
}

TEST(MoeLayout, HalfPrecisionConversions) {
  std::mt19937_64 g(1);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (bool fp16 : {false, true})
    for (int i = 0; i < 10000; ++i) {
      const float f = u(g);
      const float back = fromBits(toBits(f, fp16), fp16);
      EXPECT_LE(fabsf(back - f), fabsf(f) * (fp16 ? 1.0f / 2048 : 1.0f / 256) + 1e-7f) << f;
    }
  EXPECT_EQ(1.0f, fromBits(toBits(1.0f, true), true));
  EXPECT_EQ(-2.5f, fromBits(toBits(-2.5f, false), false));
}

}  // namespace
