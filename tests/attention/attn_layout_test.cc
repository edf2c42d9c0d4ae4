// The attention engine's index math on the CPU (src/kernels/attention/attn_layout.h): ring layouts,
// the schedule's units, block lists and masks, the ring's per-step counts, against brute force.
#include <gtest/gtest.h>
#include <stdint.h>
#include <map>
#include <set>
#include <tuple>
#include <vector>
#include "kernels/attention/attn_layout.h"

using namespace mkccl::attn;

namespace {

AttnShape plainShape(int B, int Hq, int Hkv, int sq, int skv, int causal) {
  AttnShape s{};
  s.B = B;
  s.Hq = Hq;
  s.Hkv = Hkv;
  s.causal = causal;
  s.steps = 1;
  s.q.n = 1;
  s.q.s[0] = Seg{0, sq, skv - sq};
  s.kv.n = 1;
  s.kv.s[0] = Seg{0, skv, 0};
  return s;
}

AttnShape ringShape(int B, int Hq, int Hkv, int sLocal, int ws, int r, int layout, int causal) {
  AttnShape s{};
  s.B = B;
  s.Hq = Hq;
  s.Hkv = Hkv;
  s.causal = causal;
  s.steps = ws;
  s.ring = 1;
  s.layout = layout;
  s.rank = r;
  s.ws = ws;
  s.sLocal = sLocal;
  s.q = ringSegs(layout, r, ws, sLocal);
  s.kv = s.q;
  return s;
}

// Whether query position pq attends key position pk.
bool allowed(const AttnShape& s, int64_t pq, int64_t pk) { return !s.causal || pk <= pq; }

// Checks one tile's block list against brute force: every (row, key) pair the tile needs lies in
// a listed block, no listed block is empty of allowed pairs... (a block may hold only masked keys
// for some rows but not for all), blocks listed once, and blocks without the mask flag are full.
void checkTile(const AttnShape& s, const TileWork& w) {
  std::set<std::pair<int, int>> listed;
  for (int it = 0; it < w.total; ++it) {
    int seg, j;
    blockAt(w, it, &seg, &j);
    ASSERT_GE(seg, 0);
    ASSERT_LT(seg, w.kv.n);
    ASSERT_GE(j, 0);
    ASSERT_LT(j, w.nBlk[seg]);
    ASSERT_TRUE(listed.insert({seg, j}).second) << "block listed twice";
    const Seg& k = w.kv.s[seg];
    bool any = false, all = true;
    for (int i = 0; i < w.qRows; ++i)
      for (int c = 0; c < kBlockN; ++c) {
        const int kr = j * kBlockN + c;
        const bool ok = kr < k.len && allowed(s, w.qPos0 + i, k.pos0 + kr);
        any |= ok;
        all &= ok;
      }
    EXPECT_TRUE(any) << "a listed block holds no allowed key";
    if (!blockNeedsMask(k, j, s.causal, w.qPos0)) EXPECT_TRUE(all) << "an unmasked block holds a masked key";
  }
  // Every allowed pair is in a listed block.
  for (int seg = 0; seg < w.kv.n; ++seg) {
    const Seg& k = w.kv.s[seg];
    for (int i = 0; i < w.qRows; ++i)
      for (int kr = 0; kr < k.len; ++kr)
        if (allowed(s, w.qPos0 + i, k.pos0 + kr))
          ASSERT_TRUE(listed.count({seg, kr / kBlockN})) << "row " << i << " key " << kr << " not covered";
  }
}

// Walks every unit: each (step, b, h, seg, m) with work comes exactly once; returns them.
std::map<std::tuple<int, int, int, int, int>, TileWork> walk(const AttnShape& s) {
  std::map<std::tuple<int, int, int, int, int>, TileWork> seen;
  const int64_t units = totalUnits(s);
  for (int64_t u = 0; u < units; ++u) {
    int m2 = -1;
    const TileWork a = unitTiles(s, u, &m2);
    std::vector<TileWork> tiles{a};
    if (m2 >= 0) tiles.push_back(makeTile(s, a.kv, a.step, a.b, a.h, a.seg, m2));
    for (const TileWork& w : tiles) {
      const auto key = std::make_tuple(w.step, w.b, w.h, w.seg, w.m);
      EXPECT_TRUE(seen.emplace(key, w).second) << "tile scheduled twice";
    }
  }
  return seen;
}

void checkShape(const AttnShape& s) {
  const auto seen = walk(s);
  int64_t pairs = 0;
  for (int t = 0; t < s.steps; ++t) {
    const SegList kv = kvSegsAt(s, t);
    int64_t withWork = 0;
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.Hq; ++h)
        for (int seg = 0; seg < s.q.n; ++seg)
          for (int m = 0; m < tilesIn(s.q.s[seg]); ++m) {
            const TileWork w = makeTile(s, kv, t, b, h, seg, m);
            // Brute force: does any row of the tile attend any key at this step?
            bool needs = false;
            for (int i = 0; i < w.qRows && !needs; ++i)
              for (int k = 0; k < kv.n && !needs; ++k)
                for (int kr = 0; kr < kv.s[k].len && !needs; ++kr)
                  needs = allowed(s, w.qPos0 + i, kv.s[k].pos0 + kr);
            EXPECT_EQ(needs, w.total > 0) << "step " << t << " tile " << seg << "/" << m;
            const bool scheduled = seen.count(std::make_tuple(t, b, h, seg, m)) > 0;
            if (needs) EXPECT_TRUE(scheduled) << "a tile with work is not scheduled";
            if (w.total > 0) ++withWork;
            if (b == 0 && h == 0) checkTile(s, w);
            if (b == 0 && h == 0)
              for (int i = 0; i < w.qRows; ++i)
                for (int k = 0; k < kv.n; ++k)
                  for (int kr = 0; kr < kv.s[k].len; ++kr) pairs += allowed(s, w.qPos0 + i, kv.s[k].pos0 + kr);
            // The ring's merge chain: prev / last steps with work.
            if (s.ring && w.total > 0) {
              int prev = -1, last = t;
              for (int u = 0; u < s.steps; ++u) {
                const bool has = makeTile(s, kvSegsAt(s, u), u, b, h, seg, m).total > 0;
                if (has && u < t) prev = u;
                if (has && u > t) last = u;
              }
              EXPECT_EQ(prev, prevWorkStep(s, w));
              EXPECT_EQ(last, lastWorkStep(s, w));
            }
          }
    EXPECT_EQ(withWork, tilesWithWork(s, t)) << "step " << t;
  }
  EXPECT_EQ(pairs * s.B * s.Hq, keptPairs(s));
}

TEST(AttnLayout, PlainShapes) {
  for (int causal = 0; causal < 2; ++causal)
    for (auto [sq, skv] : std::vector<std::pair<int, int>>{{1, 1}, {127, 129}, {129, 127}, {300, 300}, {256, 1000},
                                                            {1000, 256}, {513, 513}}) {
      SCOPED_TRACE(testing::Message() << "sq " << sq << " skv " << skv << " causal " << causal);
      checkShape(plainShape(2, 4, 2, sq, skv, causal));
    }
}

TEST(AttnLayout, RingLayoutsCoverTheSequence) {
  for (int layout : {kLayoutContiguous, kLayoutZigzag})
    for (int ws : {1, 2, 3, 4, 8})
      for (int sl : {2, 130, 256, 1000}) {
        std::vector<int> owner(static_cast<size_t>(ws) * sl, -1);
        for (int r = 0; r < ws; ++r) {
          const SegList l = ringSegs(layout, r, ws, sl);
          int rows = 0;
          for (int i = 0; i < l.n; ++i) {
            EXPECT_EQ(rows, l.s[i].row0);
            rows += l.s[i].len;
            for (int k = 0; k < l.s[i].len; ++k) {
              const int pos = l.s[i].pos0 + k;
              ASSERT_EQ(-1, owner[pos]) << "position held twice";
              owner[pos] = r;
              int rr = -1, row = -1;
              ringOwner(layout, ws, sl, pos, &rr, &row);
              EXPECT_EQ(r, rr);
              EXPECT_EQ(l.s[i].row0 + k, row);
            }
          }
          EXPECT_EQ(sl, rows);
        }
        for (int o : owner) EXPECT_NE(-1, o);
      }
}

TEST(AttnLayout, RingShapes) {
  for (int layout : {kLayoutContiguous, kLayoutZigzag})
    for (int causal = 0; causal < 2; ++causal)
      for (int ws : {1, 2, 3, 4})
        for (int sl : {130, 256, 520})
          for (int r = 0; r < ws; ++r) {
            SCOPED_TRACE(testing::Message() << "layout " << layout << " causal " << causal << " ws " << ws << " S "
                                            << sl << " rank " << r);
            checkShape(ringShape(1, 2, 1, sl, ws, r, layout, causal));
          }
}

// Zigzag balances causal work: every rank attends the same number of pairs.
TEST(AttnLayout, ZigzagBalancesCausalWork) {
  for (int ws : {2, 4, 8}) {
    const int sl = 1024;
    const int64_t r0 = keptPairs(ringShape(1, 1, 1, sl, ws, 0, kLayoutZigzag, 1));
    for (int r = 1; r < ws; ++r) EXPECT_EQ(r0, keptPairs(ringShape(1, 1, 1, sl, ws, r, kLayoutZigzag, 1)));
    // Contiguous: the last rank does the most.
    EXPECT_GT(keptPairs(ringShape(1, 1, 1, sl, ws, ws - 1, kLayoutContiguous, 1)),
              keptPairs(ringShape(1, 1, 1, sl, ws, 0, kLayoutContiguous, 1)));
  }
}

}  // namespace
