// CPU checks of MoE across nodes (src/kernels/moe/moe_net_layout.h): the network window's layout
// and pieces for node splits 2x1, 2x2, 4x1 and 2x4, and the data flow emulated on the host with
// the dispatch kernel's placement (moe_reference): entries staged at the sender's out-offsets,
// put piece by piece (in a shuffled order) to the receiver's in-offsets, expanded there; then the
// combine's landing rows back the same way.
#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <random>
#include <utility>
#include <vector>
#include "kernels/moe/moe_net_layout.h"
#include "moe_reference.h"

using namespace mkccl;
using namespace mkccl::moetest;

namespace {

struct NetSplit {
  int nodes, perNode;
};

Dims dimsFor(const NetSplit& s, int El, int k, size_t H, size_t cap) {
  Dims d;
  d.ranks = s.nodes * s.perNode;
  d.localRanks = s.perNode;
  d.experts = El * d.ranks;
  d.topk = k;
  d.hidden = H;
  d.cap = cap;
  d.rows = moe::worstRecvRows(d);
  return d;
}

// One routing per rank and the dispatch's placement of it.
struct Case {
  Dims d;
  std::vector<Routing> routing;
  Placement place;
  moe::NetPairs pairs;
};

Case makeCase(const NetSplit& s, RouteKind kind, int T, int El, int k, size_t H, uint64_t seed) {
  Case c;
  c.d = dimsFor(s, El, k, H, std::max(T, 1));
  const int n = c.d.ranks;
  for (int r = 0; r < n; ++r) c.routing.push_back(makeRouting(kind, T, c.d, seed * 131 + r));
  c.place = emulatePlacement(c.d, c.routing, 3);
  c.pairs.n = n;
  for (int r = 0; r < n; ++r) c.pairs.node[r] = r / s.perNode;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) c.pairs.P[a][b] = 0;
  const int El2 = c.d.localExperts();
  for (int src = 0; src < n; ++src)
    for (size_t i = 0; i < c.place.pair[src].size(); ++i)
      if (c.place.pair[src][i] >= 0) ++c.pairs.P[src][c.routing[src].idx[i] / El2];
  return c;
}

std::vector<NetSplit> splits() { return {{2, 1}, {2, 2}, {4, 1}, {2, 4}}; }

// Every (kind, T, El, k, H) the checks run per split.
template <class Fn>
void forEachCase(Fn fn) {
  const RouteKind kinds[] = {RouteKind::Uniform, RouteKind::Skewed, RouteKind::EmptyExperts, RouteKind::Dropped,
                             RouteKind::Duplicates, RouteKind::OneRank};
  uint64_t seed = 1;
  for (const NetSplit& s : splits())
    for (RouteKind kind : kinds)
      for (int T : {0, 1, 3, 200, 1000})
        for (int k : {1, 4, 8})
          for (size_t H : {72, 136}) {
            if (T == 1000 && (k != 8 || H != 136)) continue;  // keep the run short
            const Case c = makeCase(s, kind, T, 4, k, H, ++seed);
            SCOPED_TRACE(testing::Message() << s.nodes << "x" << s.perNode << " " << routeKindName(kind) << " T "
                                            << T << " k " << k << " H " << H);
            fn(s, c);
          }
}

TEST(MoeNetLayout, EntriesAndStridesAreAligned) {
  for (size_t H : {1, 7, 72, 136, 7168})
    for (int k : {1, 8, 16}) {
      Dims d = dimsFor({2, 2}, 4, k, H, 8);
      EXPECT_EQ(0u, moe::netEntryBytes(d) % 16);
      EXPECT_EQ(0u, moe::netEntryRecord(d) % 16);
      EXPECT_EQ(0u, moe::netEntryInfo(d) % 16);
      EXPECT_EQ(0u, moe::netCombineStride(d) % 16);
      EXPECT_GE(moe::netEntryInfo(d) + 16ull * k, moe::netEntryBytes(d));
      EXPECT_EQ(0u, moe::netDataBase(d) % moe::kNetAlign);
    }
}

TEST(MoeNetLayout, EveryEntryInExactlyOnePiece) {
  for (long long count : {0ll, 1ll, 2ll, 55ll, 56ll, 57ll, 1000ll, 4096ll, 100000ll, 3000000ll})
    for (uint64_t stride : {16ull, 304ull, 8192ull, 1ull << 20}) {
      const long long per = moe::netPer(count, stride);
      ASSERT_GE(per, 1);
      const int pieces = moe::netPieces(count, per);
      EXPECT_LE(pieces, moe::kNetMaxPieces) << count << " " << stride;
      long long sum = 0;
      for (int p = 0; p < pieces; ++p) {
        const long long c = moe::netPieceCount(count, per, p);
        EXPECT_GE(c, 1);
        EXPECT_LE(c, per);
        // Entry i is in piece i / per: the first entry of piece p.
        EXPECT_EQ(p, (int)((p * per) / per));
        sum += c;
      }
      EXPECT_EQ(count, sum);
      // Pieces are at least kNetMinPieceBytes unless the whole flow is shorter.
      if (pieces > 1) EXPECT_GE((uint64_t)per * stride, moe::kNetMinPieceBytes);
      EXPECT_LE(moe::kNetPieceFlag + (uint32_t)pieces, 64u) << "piece flags stay in the free range 3..63";
    }
}

TEST(MoeNetLayout, SendersAndReceiversAgreeAndAreasAreDisjoint) {
  forEachCase([](const NetSplit&, const Case& c) {
    const int n = c.d.ranks;
    for (bool combine : {false, true}) {
      std::vector<moe::NetView> v(n);
      for (int r = 0; r < n; ++r) moe::netViewFor(c.pairs, combine, c.d, r, &v[r]);
      for (int r = 0; r < n; ++r) {
        const uint64_t need = moe::netNeedOf(c.pairs, combine, moe::netDataBase(c.d), v[r].stride, r);
        std::vector<std::pair<uint64_t, uint64_t>> areas;  // [begin, end) of everything in r's window
        areas.push_back({0, moe::netCountsRow(c.d)});
        for (int s = 0; s < n; ++s) areas.push_back({moe::netCountsIn(c.d, s), moe::netCountsIn(c.d, s) + moe::netCountsRow(c.d)});
        for (int q = 0; q < n; ++q) {
          if (!c.pairs.remote(q, r)) {
            EXPECT_EQ(0, v[r].cntIn[q]);
            EXPECT_EQ(0, v[r].cntOut[q]);
            continue;
          }
          EXPECT_EQ(v[r].dst[q], v[q].in[r]) << "what r sends q lands where q reads it";
          EXPECT_EQ(v[r].cntOut[q], v[q].cntIn[r]);
          EXPECT_EQ(v[r].perOut[q], v[q].perIn[r]) << "both sides cut the flow the same way";
          EXPECT_EQ(0u, v[r].in[q] % 16);
          EXPECT_EQ(0u, v[r].out[q] % 16);
          EXPECT_LE(moe::netPieces(v[r].cntOut[q], v[r].perOut[q]), moe::kNetMaxPieces);
          if (v[r].cntIn[q]) areas.push_back({v[r].in[q], v[r].in[q] + v[r].cntIn[q] * v[r].stride});
          if (v[r].cntOut[q]) areas.push_back({v[r].out[q], v[r].out[q] + v[r].cntOut[q] * v[r].stride});
        }
        std::sort(areas.begin(), areas.end());
        for (size_t i = 0; i + 1 < areas.size(); ++i)
          EXPECT_LE(areas[i].second, areas[i + 1].first) << "areas of rank " << r << " overlap";
        EXPECT_LE(areas.back().second, need);
        EXPECT_LE(need, moe::netWindowNeed(c.pairs, c.d, r));
      }
    }
  });
}

TEST(MoeNetLayout, WindowVerdictIsTheSameOnEveryRank) {
  forEachCase([](const NetSplit&, const Case& c) {
    const int n = c.d.ranks;
    uint64_t most = 0;
    for (int r = 0; r < n; ++r) most = std::max(most, moe::netWindowNeed(c.pairs, c.d, r));
    for (uint64_t window : {most - 1, most, most + 1, uint64_t(64) << 20}) {
      // Each rank decides from its own copy of the table (the same values): the kernel's rule.
      int verdict = -2;
      for (int me = 0; me < n; ++me) {
        moe::NetPairs mine = c.pairs;
        int over = -1;
        uint64_t worst = 0;
        for (int r = 0; r < n; ++r) {
          const uint64_t need = moe::netWindowNeed(mine, c.d, r);
          if (need > window && need >= worst) worst = need, over = r;
        }
        if (verdict == -2) verdict = over;
        EXPECT_EQ(verdict, over) << "rank " << me << " decides otherwise";
      }
      EXPECT_EQ(verdict >= 0, window < most);
    }
  });
}

// The dispatch's and the combine's data flows, emulated with bytes.
struct Windows {
  std::vector<std::vector<uint8_t>> w;
  Windows(const Case& c) : w(c.d.ranks) {
    for (int r = 0; r < c.d.ranks; ++r) w[r].assign(moe::netWindowNeed(c.pairs, c.d, r), 0xee);
  }
};

// Every piece of every flow put from its sender's out-area to its receiver's in-area, in a
// shuffled order (nothing is ordered across flags).
void putAll(const Case& c, bool combine, Windows& W, uint64_t seed) {
  const int n = c.d.ranks;
  struct Put {
    int from, to;
    uint64_t src, dst, bytes;
  };
  std::vector<Put> puts;
  for (int r = 0; r < n; ++r) {
    moe::NetView v;
    moe::netViewFor(c.pairs, combine, c.d, r, &v);
    for (int q = 0; q < n; ++q) {
      if (!c.pairs.remote(r, q) || v.cntOut[q] == 0) continue;
      for (int p = 0; p < moe::netPieces(v.cntOut[q], v.perOut[q]); ++p) {
        const uint64_t off = (uint64_t)p * v.perOut[q] * v.stride;
        puts.push_back({r, q, v.out[q] + off, v.dst[q] + off, moe::netPieceCount(v.cntOut[q], v.perOut[q], p) * v.stride});
      }
    }
  }
  std::mt19937_64 rng(seed);
  std::shuffle(puts.begin(), puts.end(), rng);
  for (const Put& p : puts) {
    ASSERT_LE(p.src + p.bytes, W.w[p.from].size());
    ASSERT_LE(p.dst + p.bytes, W.w[p.to].size());
    memcpy(W.w[p.to].data() + p.dst, W.w[p.from].data() + p.src, p.bytes);
  }
}

TEST(MoeNetLayout, DispatchAndCombineEmulatedThroughTheWindows) {
  uint64_t seed = 7;
  forEachCase([&](const NetSplit&, const Case& c) {
    const Dims& d = c.d;
    const int n = d.ranks, k = d.topk, El = d.localExperts();
    Windows W(c);
    // Dispatch, step 4: each source stages one entry per pair to a remote node (the row's first
    // two words tag it: source, token; the record; the rowInfos as {token, src | slot << 16}).
    for (int s = 0; s < n; ++s) {
      moe::NetView v;
      moe::netViewFor(c.pairs, false, d, s, &v);
      const Routing& r = c.routing[s];
      for (int t = 0; t < r.T; ++t)
        for (int j = 0; j < k; ++j) {
          const int e = r.idx[(size_t)t * k + j];
          if (e < 0 || e >= d.experts) continue;
          const int dd = e / El;
          if (!c.pairs.remote(s, dd)) continue;
          // The pair of (t, dd): its first slot's pair index, this slot's rank among the token's slots on dd.
          int first = -1, sub = 0, m = 0;
          for (int jj = 0; jj < k; ++jj) {
            const int f = r.idx[(size_t)t * k + jj];
            if (f < 0 || f >= d.experts || f / El != dd) continue;
            if (first < 0) first = jj;
            if (jj < j) ++sub;
            ++m;
          }
          const long long pi = c.place.pair[s][(size_t)t * k + first];
          ASSERT_GE(pi, 0);
          ASSERT_LT(pi, v.cntOut[dd]);
          uint8_t* ent = W.w[s].data() + v.out[dd] + (uint64_t)pi * v.stride;
          int32_t* row = reinterpret_cast<int32_t*>(ent);
          row[0] = s, row[1] = t;
          int32_t* rec = reinterpret_cast<int32_t*>(ent + moe::netEntryRecord(d));
          rec[0] = m;
          rec[1 + sub] = (int32_t)c.place.pos[s][(size_t)t * k + j];
          int32_t* info = reinterpret_cast<int32_t*>(ent + moe::netEntryInfo(d)) + 4 * sub;
          info[0] = t, info[1] = s | (j << 16);
        }
    }
    putAll(c, false, W, ++seed);
    // Step 5 at every receiver: each remote source's pairs, in pair order, from the in-area.
    for (int dd = 0; dd < n; ++dd) {
      moe::NetView v;
      moe::netViewFor(c.pairs, false, d, dd, &v);
      for (int s = 0; s < n; ++s) {
        if (!c.pairs.remote(s, dd)) continue;
        std::vector<std::pair<int, int>> byPos;  // (pos, slot id) found here
        for (long long i = 0; i < v.cntIn[s]; ++i) {
          const uint8_t* ent = W.w[dd].data() + v.in[s] + (uint64_t)i * v.stride;
          const int32_t* row = reinterpret_cast<const int32_t*>(ent);
          const int32_t* rec = reinterpret_cast<const int32_t*>(ent + moe::netEntryRecord(d));
          const int32_t* info = reinterpret_cast<const int32_t*>(ent + moe::netEntryInfo(d));
          ASSERT_EQ(s, row[0]) << "entry " << i << " from " << s << " at " << dd;
          const int t = row[1];
          ASSERT_GE(rec[0], 1);
          for (int q = 0; q < rec[0]; ++q) {
            ASSERT_EQ(t, info[4 * q]);
            ASSERT_EQ(s, info[4 * q + 1] & 0xffff);
            const int j = info[4 * q + 1] >> 16;
            EXPECT_EQ(c.place.pos[s][(size_t)t * k + j], rec[1 + q]) << "the row the sender placed";
            EXPECT_EQ(dd, c.routing[s].idx[(size_t)t * k + j] / El);
          }
        }
      }
    }
    // Combine: every expert rank returns, per pair of a remote source, a landing row tagged
    // (expert rank, source, pair index); the source finds it from its route (expert rank, pair).
    for (int dd = 0; dd < n; ++dd) {
      moe::NetView v;
      moe::netViewFor(c.pairs, true, d, dd, &v);
      for (int s = 0; s < n; ++s)
        for (long long i = 0; i < v.cntOut[s]; ++i) {
          int32_t* row = reinterpret_cast<int32_t*>(W.w[dd].data() + v.out[s] + (uint64_t)i * v.stride);
          row[0] = dd, row[1] = s, row[2] = (int32_t)i;
        }
    }
    putAll(c, true, W, ++seed);
    for (int s = 0; s < n; ++s) {
      moe::NetView v;
      moe::netViewFor(c.pairs, true, d, s, &v);
      const Routing& r = c.routing[s];
      for (size_t i = 0; i < c.place.pair[s].size(); ++i) {
        const long long pi = c.place.pair[s][i];
        if (pi < 0) continue;
        const int dd = r.idx[i] / El;
        if (!c.pairs.remote(s, dd)) continue;
        const int32_t* row = reinterpret_cast<const int32_t*>(W.w[s].data() + v.in[dd] + (uint64_t)pi * v.stride);
        EXPECT_EQ(dd, row[0]);
        EXPECT_EQ(s, row[1]);
        EXPECT_EQ(pi, row[2]);
      }
    }
  });
}

}  // namespace
