// CPU checks of the fused GEMM+ReduceScatter across nodes (gemm_rs.net=fused; the kernel's
// GPU tests are in gemm_rs_net_test): its layout (kernels/gemm_rs/net_layout.h), its order
// (layout.h: NetSchedule) and its plan (ops/gemm_rs/net_plan.h).
//   - every rank computes every (phase, tile) once; the other nodes' sub-chunks come before its
//     own in every CTA's sequence, their final tiles cluster row by cluster row (so the pieces the
//     network carries complete in order, each as soon as its M-block's N-blocks are done); a final
//     tile comes after every local sender's partial of it, and the node's ranks agree on the rows a
//     tile index names;
//   - pieces: every row of every sub-chunk lies in exactly one piece (128-row M-blocks, the last
//     clipped, padding M-blocks none), their bytes tile the slot's data, items of the node sum lie
//     in one piece, and their data flags are distinct and within the flags per sender;
//   - the whole data flow emulated with the layout's own offsets, in the order of the positions
//     (node sums in the scratch's net area at the rows the TMA map writes, copied into window out
//     slots, counted per M-block, each piece put into the counterpart's in slot when its count
//     completes, added item by item once the item's piece is counted and has arrived from every
//     node) gives every rank exactly the sum of its rows over all ranks (integer-valued doubles);
//   - window slots, net area, count and claim slots do not overlap and fit what the plan checks;
//   - the plan's refusals (the sequential route then runs) at their exact boundaries.
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>
#include "kernels/gemm_rs/layout.h"
#include "kernels/gemm_rs/net_layout.h"
#include "ops/gemm_rs/net_plan.h"

using namespace mkccl::rs;

namespace {

struct NetCase {
  int nodes, perNode;
  int64_t mPerRank, N;
  int bn, cs, clusters;
};

const NetCase kCases[] = {
    {2, 1, 200, 392, 256, 1, 5},  {2, 2, 200, 392, 256, 1, 7},  {4, 1, 72, 136, 128, 1, 3},
    {2, 2, 72, 136, 128, 2, 2},   {3, 2, 130, 264, 256, 1, 4},  {2, 4, 8, 64, 128, 1, 6},
    {4, 2, 256, 256, 256, 2, 3},  {2, 3, 1000, 520, 256, 1, 11}, {2, 1, 333, 136, 128, 2, 3},
    {3, 1, 645, 264, 256, 1, 4},  {2, 2, 333, 392, 256, 2, 5},
};

NetFusedInputs inputsOf(const NetCase& c, int node) {
  NetFusedInputs in;
  in.nodes = c.nodes;
  in.perNode = c.perNode;
  in.node = node;
  in.nodeMajor = true;
  in.M = c.mPerRank * c.nodes * c.perNode;
  in.N = c.N;
  in.es = 2;
  in.ctaBudget = c.clusters * c.cs;
  in.clusters256 = in.clusters128 = c.clusters;
  in.bn = c.bn;
  in.cs = c.cs;
  in.flagSlots = 1 << 20;
  in.flagsPerPeer = 4096;
  in.windowBytes = uint64_t(1) << 40;
  return in;
}

Layout layoutOf(const NetCase& c, int node) {
  const NetFusedPlan p = netFusedPlan(inputsOf(c, node));
  EXPECT_TRUE(p.ok) << (p.why ? p.why : "");
  return p.L;
}

std::string name(const NetCase& c) {
  return std::to_string(c.nodes) + "x" + std::to_string(c.perNode) + " m=" + std::to_string(c.mPerRank) +
         " N=" + std::to_string(c.N) + " tile 128x" + std::to_string(c.bn) + " cs " + std::to_string(c.cs);
}

// (position in the order, step, u, mb) of every tile of a rank, over all its CTAs.
struct Placed {
  int pos, step, u, mb, nb;
};
std::vector<Placed> placedTiles(const Layout& L, int rank, int clusters) {
  std::vector<Placed> out;
  for (int cl = 0; cl < clusters; ++cl)
    for (int cr = 0; cr < L.cs; ++cr) {
      const NetSchedule s(L, rank, cl, clusters, cr);
      for (int n = 0; n < s.count(); ++n) {
        Tile t;
        s.at(n, t);
        EXPECT_EQ(t.step, s.stepAt(n));
        out.push_back({cl + n * clusters, t.step, t.u, t.mb, t.nb});
      }
    }
  return out;
}

TEST(GemmRsNetFused, LayoutOfSubChunks) {
  for (const NetCase& c : kCases) {
    const Layout L = layoutOf(c, 0);
    EXPECT_EQ(c.mPerRank, L.subRows) << name(c);
    EXPECT_EQ(c.nodes, L.subs);
    EXPECT_EQ(0, L.mbs % L.cs);
    EXPECT_GE(int64_t(L.mbs) * kTileRows, L.subRows);
    EXPECT_LT(int64_t(L.mbs - L.cs) * kTileRows, std::max<int64_t>(L.subRows, 1)) << "no whole padding cluster row";
    EXPECT_EQ(L.subs * L.mbs * L.nBlocks, L.tiles);
    EXPECT_EQ(0, L.clusterTiles % L.subs);
    // A rows: M-block mb of chunk c lies in the rows of rank (mb / mbs) * ws + c.
    for (int ch = 0; ch < L.ws; ++ch)
      for (int mb = 0; mb < L.mbc; ++mb) {
        const int s = mb / L.mbs;
        const int64_t g = int64_t(s) * L.ws + ch;
        const int64_t r = L.aRow(ch, mb);
        EXPECT_EQ((mb % L.mbs) * int64_t(kTileRows), r - g * L.subRows);
      }
  }
}

TEST(GemmRsNetFused, OrderCoversEveryTileForeignFirstAndSendsBeforeWaits) {
  for (const NetCase& c : kCases)
    for (int node = 0; node < c.nodes; ++node) {
      const Layout L = layoutOf(c, node);
      const int grid = c.clusters;
      std::vector<std::vector<Placed>> all(L.ws);
      for (int r = 0; r < L.ws; ++r) all[r] = placedTiles(L, r, grid);
      for (int r = 0; r < L.ws; ++r) {
        std::set<std::pair<int, int>> seen;
        int lastForeign = -1, firstOwn = 1 << 30;
        for (const Placed& p : all[r]) {
          EXPECT_TRUE(seen.insert({p.step, p.u}).second) << name(c) << ": tile twice";
          const int s = netSubOf(L, p.mb);
          if (s == node) firstOwn = std::min(firstOwn, p.pos);
          else lastForeign = std::max(lastForeign, p.pos);
        }
        EXPECT_EQ(size_t(L.ws) * L.tiles, seen.size()) << name(c);
        EXPECT_LT(lastForeign, firstOwn) << name(c) << ": the other nodes' rows come first";
        // Every phase's tiles of the other nodes' sub-chunks, in the order of the positions: sub
        // node + 1, node + 2, ..., inside each cluster row by cluster row (all its N-blocks before
        // the next row's), so each M-block completes as early as it can.
        std::vector<Placed> byPos = all[r];
        std::stable_sort(byPos.begin(), byPos.end(), [](const Placed& a, const Placed& b) { return a.pos < b.pos; });
        const int rowsPerSub = L.mbs / L.cs;
        std::vector<int> lastKey(L.ws, -1);
        for (const Placed& p : byPos) {
          const int s = netSubOf(L, p.mb);
          if (s == node) continue;
          const int k = (s - node - 1 + L.subs) % L.subs;
          const int key = k * rowsPerSub + netPieceOf(L, p.mb) / L.cs;
          EXPECT_LE(lastKey[p.step], key) << name(c) << ", node " << node << ", rank " << r << ", pos " << p.pos;
          lastKey[p.step] = key;
        }
      }
      // A tile index names the same rows on every rank of the node; every sender's partial of a
      // final tile comes at an earlier position than the final tile itself.
      std::vector<std::vector<int>> posOf(L.ws, std::vector<int>(size_t(L.ws) * L.tiles, -1));
      std::vector<int> mbOfU(L.tiles, -1);
      for (int r = 0; r < L.ws; ++r)
        for (const Placed& p : all[r]) {
          posOf[r][size_t(p.step) * L.tiles + p.u] = p.pos;
          if (mbOfU[p.u] < 0) mbOfU[p.u] = p.mb;
          EXPECT_EQ(mbOfU[p.u], p.mb) << name(c) << ": tile " << p.u;
        }
      for (int r = 0; r < L.ws; ++r)
        for (const Placed& p : all[r]) {
          if (p.step != L.ws - 1) continue;
          for (int q = 0; q < L.ws; ++q) {
            if (q == r) continue;
            int j = 0;
            while (L.chunkAt(q, j) != r) ++j;
            EXPECT_LT(posOf[q][size_t(j) * L.tiles + p.u], p.pos) << name(c);
          }
        }
    }
}

TEST(GemmRsNetFused, SlotsAndAreasDoNotOverlap) {
  for (const NetCase& c : kCases) {
    const Layout L = layoutOf(c, c.nodes - 1);
    const int64_t es = 2;
    EXPECT_GE(netAreaOffset(L), L.scratchBytes());
    EXPECT_EQ(0, netAreaOffset(L) % 256);
    EXPECT_EQ(netAreaOffset(L) + netAreaRows(L) * L.N * es, netScratchBytes(L, es));
    for (int s = 0; s + 1 < L.subs; ++s)
      EXPECT_EQ(netSubOffset(L, s, es) + int64_t(L.mbs) * kTileRows * L.N * es, netSubOffset(L, s + 1, es));
    EXPECT_GE(netSlotBytes(L, es), netPutBytes(L, es));
    EXPECT_EQ(0, netSlotBytes(L, es) % kRsNetSlotAlign);
    for (int s = 0; s < L.subs; ++s) {
      EXPECT_LE(netOutOffset(L, s, es) + netSlotBytes(L, es), netInOffset(L, 0, es));
      EXPECT_LE(netInOffset(L, s, es) + netSlotBytes(L, es), netWindowBytes(L, es));
    }
    // A count per M-block of the chunk, then the claim: distinct, past the one-node slots.
    std::set<int64_t> slots;
    for (int mb = 0; mb < L.mbc; ++mb) slots.insert(netCountSlot(L, mb));
    slots.insert(netClaimSlot(L));
    EXPECT_EQ(size_t(L.mbc + 1), slots.size());
    EXPECT_GE(*slots.begin(), L.flagSlots());
    EXPECT_LT(*slots.rbegin(), netFlagSlots(L));
    EXPECT_EQ(netFlagSlots(L) - L.flagSlots(), int64_t(slots.size())) << "no gaps";
    EXPECT_EQ(netAddItems(L) * kNetAddRows >= L.subRows, true);
    EXPECT_GT(kRsNetDataFlag, kRsNetReadyFlag);
    EXPECT_GT(kRsNetReadyFlag, 128u) << "past AllGather+GEMM's flags";
  }
}

// Pieces: every row of a sub-chunk in exactly one, their bytes the slot's data front to back,
// items inside one piece, a distinct data flag each within the flags per sender.
TEST(GemmRsNetFused, PiecesCoverEveryRowOnceWithinTheFlagBudget) {
  for (const NetCase& c : kCases) {
    const Layout L = layoutOf(c, 0);
    const int64_t es = 2;
    const int P = netPieces(L);
    EXPECT_GE(P, 1) << name(c);
    EXPECT_LE(P, L.mbs) << name(c) << ": a piece is an M-block";
    std::vector<int> covered(size_t(L.subRows), 0);
    int64_t bytes = 0;
    for (int p = 0; p < L.mbs; ++p) {
      const int rows = netPieceRows(L, p);
      if (p >= P) {
        EXPECT_EQ(0, rows) << name(c) << ": padding M-block " << p << " has no rows";
        continue;
      }
      EXPECT_GT(rows, 0) << name(c);
      EXPECT_LE(rows, kTileRows);
      if (p + 1 < P) EXPECT_EQ(kTileRows, rows) << name(c) << ": only the last piece is clipped";
      for (int64_t r = int64_t(p) * kTileRows; r < int64_t(p) * kTileRows + rows; ++r) {
        ASSERT_LT(r, L.subRows) << name(c);
        ++covered[size_t(r)];
        EXPECT_EQ(p, netPieceOfRow(r));
      }
      EXPECT_EQ(bytes, netPieceOffset(L, p, es)) << name(c) << ": pieces follow one another";
      EXPECT_EQ(int64_t(rows) * L.N * es, netPieceBytes(L, p, es));
      bytes += netPieceBytes(L, p, es);
      // The M-block of the chunk that carries piece p of sub-chunk s.
      for (int s = 0; s < L.subs; ++s) {
        EXPECT_EQ(s, netSubOf(L, s * L.mbs + p));
        EXPECT_EQ(p, netPieceOf(L, s * L.mbs + p));
      }
    }
    for (int64_t r = 0; r < L.subRows; ++r) EXPECT_EQ(1, covered[size_t(r)]) << name(c) << ": row " << r;
    EXPECT_EQ(netPutBytes(L, es), bytes) << name(c);
    EXPECT_LE(bytes, netSlotBytes(L, es));
    // Items: each one's rows lie in its piece.
    for (int64_t item = 0; item < netAddItems(L); ++item) {
      const int64_t r0 = item * kNetAddRows, r1 = std::min<int64_t>(r0 + kNetAddRows, L.subRows) - 1;
      EXPECT_EQ(netPieceOfItem(item), netPieceOfRow(r0));
      EXPECT_EQ(netPieceOfItem(item), netPieceOfRow(r1)) << name(c) << ": item " << item;
    }
    // Flags: ready, then one per piece; distinct, none below the ready flag, all within budget.
    std::set<uint32_t> flags{kRsNetReadyFlag};
    for (int p = 0; p < P; ++p) {
      EXPECT_TRUE(flags.insert(netDataFlag(p)).second) << name(c);
      EXPECT_LT(int64_t(netDataFlag(p)), netFlagsNeeded(L));
    }
    EXPECT_EQ(int64_t(*flags.rbegin()) + 1, netFlagsNeeded(L));
    EXPECT_LE(netFlagsNeeded(L), inputsOf(c, 0).flagsPerPeer);
    EXPECT_EQ(netBlockTiles(L), L.nBlocks);
  }
}

// The kernel's data flow, element by element, with the layout's offsets (es = 8: doubles), in the
// order of the positions (every rank's CTAs at the same position at once): a piece is put when its
// M-block's count completes, and an item is added only once its piece is counted here and has
// arrived from every other node. Window bytes nobody wrote hold a poison that would show in a sum.
TEST(GemmRsNetFused, EmulatedDataFlowSumsEveryRow) {
  constexpr int64_t es = 8;
  constexpr double kPoison = 1e30;
  std::mt19937 rng(12345);
  for (const NetCase& c : kCases) {
    const int nodes = c.nodes, Lr = c.perNode, ws = nodes * Lr;
    const int64_t M = c.mPerRank * ws, N = c.N;
    // Partials P_g [M, N] of every rank, small integers.
    std::vector<std::vector<double>> P(ws, std::vector<double>(M * N));
    for (auto& p : P)
      for (double& x : p) x = double(int(rng() % 7) - 3);
    std::vector<Layout> Ls;
    for (int m = 0; m < nodes; ++m) Ls.push_back(layoutOf(c, m));
    const Layout& L0 = Ls[0];
    const int pieces = netPieces(L0);
    std::vector<std::vector<char>> area(ws, std::vector<char>(netAreaRows(L0) * N * es, 0));
    std::vector<std::vector<double>> window(ws, std::vector<double>(netWindowBytes(L0, es) / es, kPoison));
    auto at = [&](std::vector<char>& b, int64_t off) { return reinterpret_cast<double*>(b.data() + off); };
    auto win = [&](int g, int64_t off) { return &window[size_t(g)][size_t(off / es)]; };
    // Every rank's final tiles by position; counts per M-block; arrivals [rank][node][piece] and the
    // position at which each piece was counted (own sub-chunk) or arrived.
    std::map<int, std::vector<std::pair<int, Placed>>> timeline;
    for (int g = 0; g < ws; ++g)
      for (const Placed& p : placedTiles(Ls[g / Lr], g % Lr, c.clusters))
        if (p.step == Ls[g / Lr].ws - 1) timeline[p.pos].push_back({g, p});
    std::vector<std::vector<int>> count(ws, std::vector<int>(L0.mbc, 0));
    std::vector<std::vector<std::vector<int>>> readyAt(ws, std::vector<std::vector<int>>(nodes, std::vector<int>(pieces, -1)));
    std::vector<std::vector<int>> lastPut(ws, std::vector<int>(nodes, -1));
    for (const auto& [pos, tiles] : timeline)
      for (const auto& [g, p] : tiles) {
        const int m = g / Lr, i = g % Lr;
        const Layout& L = Ls[m];
        // 1. Node level: the final tile holds the node sum (its own partial plus the others' of the
        //    node, which the one-node protocol brings) of M-block mb, at area row mb*128 + r.
        for (int r = 0; r < kTileRows; ++r) {
          const int64_t arow = L.aRow(i, p.mb) + r;
          for (int64_t col = int64_t(p.nb) * L.bn; col < std::min<int64_t>(N, int64_t(p.nb + 1) * L.bn); ++col) {
            double sum = 0;
            if (arow < M)
              for (int q = 0; q < Lr; ++q) sum += P[m * Lr + q][arow * N + col];
            *at(area[g], ((int64_t(p.mb) * kTileRows + r) * N + col) * es) = sum;
          }
        }
        // 2. Foreign sub-chunks: the tile's rows of its piece into window out slot s.
        const int s = netSubOf(L, p.mb), piece = netPieceOf(L, p.mb), rows = netPieceRows(L, piece);
        if (s != m)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t col = int64_t(p.nb) * L.bn; col < std::min<int64_t>(N, int64_t(p.nb + 1) * L.bn); ++col) {
              const int64_t off = netPieceOffset(L, piece, es) + (r * N + col) * es;
              *win(g, netOutOffset(L, s, es) + off) = *at(area[g], netSubOffset(L, s, es) + off);
            }
        // 3. Count; the count that completes the M-block puts its piece (out slot s of (m, i) to in
        //    slot m of (s, i), the same offset), pieces to one counterpart in order.
        if (++count[g][p.mb] != netBlockTiles(L) || rows == 0) continue;
        if (s == m) {
          readyAt[g][m][piece] = pos;
          continue;
        }
        const int dst = s * Lr + i;
        EXPECT_EQ(lastPut[g][s] + 1, piece) << name(c) << ", rank " << g << " to node " << s;
        lastPut[g][s] = piece;
        const int64_t o = netPieceOffset(L, piece, es);
        std::copy(win(g, netOutOffset(L, s, es) + o), win(g, netOutOffset(L, s, es) + o) + netPieceBytes(L, piece, es) / es,
                  win(dst, netInOffset(Ls[s], m, es) + o));
        readyAt[dst][m][piece] = pos;
      }
    // 4. Node order sum of the items (each reads only its piece's rows), against the sum over all
    //    ranks; every piece was counted / arrived; the first foreign piece was ready before the last.
    for (int m = 0; m < nodes; ++m)
      for (int i = 0; i < Lr; ++i) {
        const Layout& L = Ls[m];
        const int g = m * Lr + i;
        for (int n = 0; n < nodes; ++n) {
          for (int pc = 0; pc < pieces; ++pc)
            EXPECT_GE(readyAt[g][n][pc], 0) << name(c) << ", rank " << g << ", node " << n << ", piece " << pc;
          // (The M-blocks of one cluster row complete together.)
          if (n != m && (pieces - 1) / L.cs > 0)
            EXPECT_LT(readyAt[g][n][0], readyAt[g][n][pieces - 1]) << name(c) << ": pieces go early";
        }
        int64_t wrong = 0;
        for (int64_t item = 0; item < netAddItems(L); ++item) {
          const int pc = netPieceOfItem(item);
          const int64_t lo = int64_t(pc) * kTileRows, hi = lo + netPieceRows(L, pc);
          for (int64_t r = item * kNetAddRows; r < std::min<int64_t>((item + 1) * kNetAddRows, L.subRows); ++r) {
            EXPECT_TRUE(r >= lo && r < hi);
            for (int64_t col = 0; col < N; ++col) {
              double sum = 0;
              for (int n = 0; n < nodes; ++n)
                sum += n == m ? *at(area[g], netSubOffset(L, m, es) + (r * N + col) * es)
                              : *win(g, netInOffset(L, n, es) + (r * N + col) * es);
              double ref = 0;
              for (int q = 0; q < ws; ++q) ref += P[q][(int64_t(g) * L.subRows + r) * N + col];
              wrong += sum != ref;
            }
          }
        }
        EXPECT_EQ(0, wrong) << name(c) << ", rank " << g;
      }
  }
}

TEST(GemmRsNetFused, PlanRefusesAtItsBoundaries) {
  const NetCase c{2, 2, 200, 392, 256, 1, 8};
  NetFusedInputs in = inputsOf(c, 1);
  const NetFusedPlan ok = netFusedPlan(in);
  ASSERT_TRUE(ok.ok);
  EXPECT_EQ(8, ok.ctas);
  const auto refused = [](NetFusedInputs x) { return !netFusedPlan(x).ok; };
  NetFusedInputs x = in;
  x.windowBytes = uint64_t(netWindowBytes(ok.L, 2));
  EXPECT_FALSE(refused(x)) << "a window of exactly the slots";
  x.windowBytes -= 1;
  EXPECT_TRUE(refused(x));
  x = in;
  x.flagSlots = netFlagSlots(ok.L);
  EXPECT_FALSE(refused(x));
  x.flagSlots -= 1;
  EXPECT_TRUE(refused(x));
  x = in;
  x.nodeMajor = false;
  EXPECT_TRUE(refused(x));
  x = in;
  x.N = 396;
  EXPECT_TRUE(refused(x)) << "N % 8";
  x = in;
  x.M += 1;
  EXPECT_TRUE(refused(x)) << "M % ranks";
  x = in;
  x.mode = kModeAllReduce;
  EXPECT_TRUE(refused(x)) << "AllReduce is not fused across nodes";
  x = in;
  x.nodes = 1;
  EXPECT_TRUE(refused(x));
  x = in;
  x.flagsPerPeer = int(netFlagsNeeded(ok.L));
  EXPECT_FALSE(refused(x)) << "exactly the ready flag and a data flag per piece";
  x.flagsPerPeer -= 1;
  EXPECT_TRUE(refused(x));
  x = in;
  x.ctaBudget = 0;
  EXPECT_TRUE(refused(x));
  // gemm_rs.net=auto (the default) refuses a GEMM of one wave of tiles; fused on request runs it.
  x = in;
  x.autoRoute = true;
  EXPECT_FALSE(refused(x)) << "more tiles than CTAs";
  x.ctaBudget = int(ok.L.orderLength());
  EXPECT_TRUE(refused(x)) << "one wave";
  x.autoRoute = false;
  EXPECT_FALSE(refused(x)) << "one wave, fused on request";
  x.autoRoute = true;
  x.ctaBudget = int(ok.L.orderLength()) - 1;
  EXPECT_FALSE(refused(x)) << "a tile more than one wave";
  // Every rank of every node plans the same tiles and grid (only `node` differs).
  for (int node = 0; node < c.nodes; ++node) {
    const NetFusedPlan p = netFusedPlan(inputsOf(c, node));
    ASSERT_TRUE(p.ok);
    EXPECT_EQ(ok.ctas, p.ctas);
    EXPECT_EQ(ok.L.tiles, p.L.tiles);
    EXPECT_EQ(ok.L.order, p.L.order);
    EXPECT_EQ(node, p.L.node);
  }
}

// A rank's rows cross the network in 128-row pieces, a data flag each: at 4096 flags per sender
// (the FIFO header's 12 bits) 4096 - 131 pieces fit; one more row is refused (the sequential
// route runs it), not wrapped into another op's flags.
TEST(GemmRsNetFused, PlanRefusesMorePiecesThanFlags) {
  const int64_t maxPieces = 4096 - int64_t(kRsNetDataFlag);
  for (const int cs : {1, 2}) {
    NetCase c{2, 1, maxPieces * kTileRows, 8, 128, cs, 4};
    NetFusedPlan p = netFusedPlan(inputsOf(c, 0));
    ASSERT_TRUE(p.ok) << (p.why ? p.why : "");
    EXPECT_EQ(maxPieces, netPieces(p.L));
    EXPECT_EQ(4096, netFlagsNeeded(p.L));
    EXPECT_EQ(4095u, netDataFlag(netPieces(p.L) - 1)) << "the last flag of the budget";
    c.mPerRank += 1;
    p = netFusedPlan(inputsOf(c, 1));
    EXPECT_FALSE(p.ok);
    ASSERT_NE(nullptr, p.why);
    EXPECT_NE(nullptr, strstr(p.why, "arrival flags")) << p.why;
  }
}

}  // namespace
