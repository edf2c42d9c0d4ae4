// CPU checks of the GEMM+RS/AR ring layout and schedule (src/kernels/fused/gemm_rs_layout.cuh):
// every rank computes every (step, tile) exactly once whatever the grid, both CTAs of a cluster
// see the same steps and N-blocks, a tile's incoming sum is produced `skew` positions earlier,
// chunks cover M, scratch slots and flag slots do not overlap.
#include <gtest/gtest.h>
#include <set>
#include <tuple>
#include <vector>
#include "kernels/fused/gemm_rs_layout.cuh"

using namespace mkccl::rs;

namespace {

struct Case {
  int mode, ws;
  int64_t M, N;
  int bn, cs, skew, group, clusters;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int mode : {kModeReduceScatter, kModeAllReduce})
    for (int ws : {2, 3, 4, 8})
      for (int cs : {1, 2}) {
        v.push_back({mode, ws, int64_t(ws) * 2048, 8192, 256, cs, 132 / cs * 2, 16 / cs, 132 / cs});
        v.push_back({mode, ws, int64_t(ws) * 200, 264, 128, cs, 7, 3, 5});
        v.push_back({mode, ws, int64_t(ws) * 8, 8, 256, cs, 1, 1, 3});
        v.push_back({mode, ws, int64_t(ws) * 1000 + (mode == kModeAllReduce ? 3 : 0), 1032, 256, cs, 1000, 8, 66});
      }
  return v;
}

TEST(GemmRsLayout, ChunksCoverRowsAndSlotsDoNotOverlap) {
  for (const Case& c : cases()) {
    const Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.skew, c.group);
    SCOPED_TRACE(testing::Message() << "mode " << c.mode << " ws " << c.ws << " M " << c.M << " N " << c.N << " bn "
                                    << c.bn << " cs " << c.cs);
    EXPECT_EQ(0, L.mbc % c.cs);
    EXPECT_GE(int64_t(L.mbc) * kTileRows, L.chunkRows);
    EXPECT_EQ(L.nBlocks * int64_t(c.bn) >= c.N, true);
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

TEST(GemmRsLayout, OrderIsAPermutationSortedBySkewedKey) {
  for (const Case& c : cases()) {
    const Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.skew, c.group);
    SCOPED_TRACE(testing::Message() << "ws " << c.ws << " M " << c.M << " N " << c.N << " cs " << c.cs << " skew "
                                    << L.skew);
    std::set<std::pair<int, int>> seen;
    int64_t lastKey = -1;
    int lastStep = -1;
    std::vector<int64_t> pos(size_t(c.ws) * L.clusterTiles, -1);
    for (int64_t p = 0; p < L.orderLength(); ++p) {
      int j = -1, v = -1;
      decodeOrder(L, p, &j, &v);
      ASSERT_TRUE(j >= 0 && j < c.ws && v >= 0 && v < L.clusterTiles) << "position " << p;
      EXPECT_TRUE(seen.insert({j, v}).second) << "position " << p << " repeats (" << j << ", " << v << ")";
      const int64_t key = int64_t(j) * L.skew + v;
      EXPECT_TRUE(key > lastKey || (key == lastKey && j > lastStep)) << "position " << p;
      lastKey = key;
      lastStep = j;
      pos[size_t(j) * L.clusterTiles + v] = p;
    }
    // The sum a tile adds was produced at least `skew` positions earlier.
    for (int j = 1; j < c.ws; ++j)
      for (int v = 0; v < L.clusterTiles; ++v)
        EXPECT_GE(pos[size_t(j) * L.clusterTiles + v] - pos[size_t(j - 1) * L.clusterTiles + v], int64_t(L.skew));
  }
}

TEST(GemmRsLayout, EveryRankComputesEveryTileOnceAndClustersAgree) {
  for (const Case& c : cases()) {
    const Layout L = makeLayout(c.mode, c.ws, c.M, c.N, c.bn, c.cs, c.skew, c.group);
    for (int rank = 0; rank < c.ws; ++rank) {
      SCOPED_TRACE(testing::Message() << "ws " << c.ws << " M " << c.M << " N " << c.N << " cs " << c.cs << " rank "
                                      << rank);
      std::set<std::pair<int, int>> seen;  // (step, u)
      for (int cl = 0; cl < c.clusters; ++cl) {
        std::vector<std::vector<Tile>> perCta(c.cs);
        for (int cr = 0; cr < c.cs; ++cr) {
          Schedule s(L, rank, cl, c.clusters, cr);
          Tile t;
          while (s.next(t)) {
            ASSERT_TRUE(t.mb >= 0 && t.mb < L.mbc && t.nb >= 0 && t.nb < L.nBlocks);
            EXPECT_EQ(t.mb * L.nBlocks + t.nb, t.u);
            EXPECT_EQ(L.chunkAt(rank, t.step), t.chunk);
            EXPECT_EQ(cr, t.mb % c.cs);
            EXPECT_TRUE(seen.insert({t.step, t.u}).second) << "step " << t.step << " tile " << t.u << " twice";
            perCta[cr].push_back(t);
          }
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
      // The last step is this rank's own chunk.
      EXPECT_EQ(rank, L.chunkAt(rank, c.ws - 1));
    }
  }
}

TEST(GemmRsLayout, RingSendsEachChunkToTheRankThatNeedsIt) {
  for (int ws : {2, 3, 4, 8})
    for (int r = 0; r < ws; ++r)
      for (int j = 0; j + 1 < ws; ++j) {
        const Layout L = makeLayout(kModeReduceScatter, ws, int64_t(ws) * 128, 256, 256, 1, 1, 1);
        const int dst = (r + ws - 1) % ws;
        EXPECT_EQ(L.chunkAt(r, j), L.chunkAt(dst, j + 1)) << "rank " << r << " step " << j;
      }
}

}  // namespace
