#include "moe_reference.h"
#include <math.h>
#include <string.h>
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>

namespace mkccl {
namespace moetest {

const char* routeKindName(RouteKind k) {
  switch (k) {
    case RouteKind::Uniform: return "uniform";
    case RouteKind::Skewed: return "skewed";
    case RouteKind::EmptyExperts: return "empty experts";
    case RouteKind::Dropped: return "dropped slots";
    case RouteKind::Duplicates: return "duplicate experts";
    default: return "one rank";
  }
}

Routing makeRouting(RouteKind kind, int T, const Dims& d, uint64_t seed) {
  std::mt19937_64 g(seed);
  const int E = d.experts, k = d.topk, El = d.localExperts();
  Routing r;
  r.T = T;
  r.idx.assign((size_t)T * k, -1);
  r.w.assign((size_t)T * k, 0.f);
  std::uniform_real_distribution<float> wd(0.1f, 1.0f);
  std::uniform_int_distribution<int> ed(0, E - 1);
  for (int t = 0; t < T; ++t) {
    std::set<int> used;
    for (int j = 0; j < k; ++j) {
      int e = -1;
      switch (kind) {
        case RouteKind::Uniform:
        case RouteKind::Dropped:
          if (kind == RouteKind::Dropped && (g() % 3 == 0 || t % 7 == 3)) break;
          if ((int)used.size() < E) do e = ed(g); while (used.count(e));
          break;
        case RouteKind::Skewed: {
          // 3 of 4 slots on rank 0's first two experts (or its only one), the rest anywhere.
          const int hot = std::min(El, 2);
          e = g() % 4 ? (int)(g() % hot) : ed(g);
          break;
        }
        case RouteKind::EmptyExperts: {
          const int m = (E + 2) / 3;
          e = 3 * (int)(g() % m);
          break;
        }
        case RouteKind::Duplicates:
          e = j > 0 && g() % 3 == 0 ? r.idx[(size_t)t * k + j - 1] : ed(g);
          break;
        case RouteKind::OneRank:
          e = (d.ranks - 1) * El + (int)(g() % El);
          break;
      }
      r.idx[(size_t)t * k + j] = e;
      r.w[(size_t)t * k + j] = wd(g);
      if (e >= 0) used.insert(e);
    }
  }
  return r;
}

std::vector<RankLayout> referenceLayout(const Dims& d, const std::vector<Routing>& routing) {
  const int El = d.localExperts(), k = d.topk;
  std::vector<RankLayout> lay(d.ranks);
  for (auto& l : lay) {
    l.counts.assign(El, 0);
    l.rows.assign(El, {});
  }
  for (int s = 0; s < (int)routing.size(); ++s)
    for (int t = 0; t < routing[s].T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = routing[s].idx[(size_t)t * k + j];
        if (e < 0 || e >= d.experts) continue;
        RankLayout& l = lay[e / El];
        l.counts[e % El]++;
        l.rows[e % El].push_back(Slot{s, t, j});
      }
  for (auto& l : lay) {
    l.offsets.assign(El + 1, 0);
    for (int le = 0; le < El; ++le)
      l.offsets[le + 1] = l.offsets[le] + (long long)moe::alignUp((size_t)l.counts[le], (size_t)d.align);
    for (auto& v : l.rows) std::sort(v.begin(), v.end());
  }
  return lay;
}

Placement emulatePlacement(const Dims& d, const std::vector<Routing>& routing, int ctas) {
  const int n = d.ranks, E = d.experts, K = d.keys(), k = d.topk, El = d.localExperts();
  Placement p;
  p.pos.resize(n);
  p.pair.resize(n);
  // Per source: in-warp ranks, warp bases, CTA bases; then key totals per source.
  std::vector<std::vector<long long>> totals(n, std::vector<long long>(K, 0));
  std::vector<std::vector<long long>> within(n), pairWithin(n);  // rank in (CTA) order, per slot
  for (int s = 0; s < n; ++s) {
    const Routing& r = routing[s];
    moe::TokenSplit sp{r.T, ctas};
    within[s].assign((size_t)r.T * k, -1);
    pairWithin[s].assign((size_t)r.T * k, -1);
    std::vector<long long> ctaBase(K, 0);
    for (int b = 0; b < ctas; ++b) {
      std::vector<std::vector<long long>> warpCnt(moe::kWarps, std::vector<long long>(K, 0));
      std::vector<std::vector<long long>> slotR((size_t)moe::kWarps), pairR((size_t)moe::kWarps);
      for (int w = 0; w < moe::kWarps; ++w) {
        const int w0 = sp.warpStart(b, w), w1 = sp.warpStart(b, w + 1);
        for (int base = w0; base < w1; base += 32)
          for (int j = 0; j < k; ++j)
            for (int lane = 0; lane < 32 && base + lane < w1; ++lane) {
              const int t = base + lane;
              const int e = r.idx[(size_t)t * k + j];
              if (e < 0 || e >= E) continue;
              within[s][(size_t)t * k + j] = warpCnt[w][e]++;
              bool first = true;
              for (int jj = 0; jj < j; ++jj) {
                const int f = r.idx[(size_t)t * k + jj];
                if (f >= 0 && f < E && f / El == e / El) first = false;
              }
              if (first) pairWithin[s][(size_t)t * k + j] = warpCnt[w][E + e / El]++;
            }
      }
      // Add warp bases and CTA bases.
      std::vector<long long> acc(K, 0);
      for (int w = 0; w < moe::kWarps; ++w) {
        const int w0 = sp.warpStart(b, w), w1 = sp.warpStart(b, w + 1);
        for (int t = w0; t < w1; ++t)
          for (int j = 0; j < k; ++j) {
            const int e = r.idx[(size_t)t * k + j];
            if (e < 0 || e >= E) continue;
            within[s][(size_t)t * k + j] += ctaBase[e] + acc[e];
            if (pairWithin[s][(size_t)t * k + j] >= 0) pairWithin[s][(size_t)t * k + j] += ctaBase[E + e / El] + acc[E + e / El];
          }
        for (int key = 0; key < K; ++key) acc[key] += warpCnt[w][key];
      }
      for (int key = 0; key < K; ++key) ctaBase[key] += acc[key];
    }
    totals[s] = ctaBase;
  }
  // Segment starts at each rank, then this source's base inside each segment.
  std::vector<long long> segStart(E, 0);
  for (int dd = 0; dd < n; ++dd) {
    long long at = 0;
    for (int le = 0; le < El; ++le) {
      const int e = dd * El + le;
      long long col = 0;
      for (int s = 0; s < n; ++s) col += totals[s][e];
      segStart[e] = at;
      at += (long long)moe::alignUp((size_t)col, (size_t)d.align);
    }
  }
  for (int s = 0; s < n; ++s) {
    const Routing& r = routing[s];
    p.pos[s].assign((size_t)r.T * k, -1);
    p.pair[s].assign((size_t)r.T * k, -1);
    for (int t = 0; t < r.T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = r.idx[(size_t)t * k + j];
        if (e < 0 || e >= E) continue;
        long long before = 0;
        for (int q = 0; q < s; ++q) before += totals[q][e];
        p.pos[s][(size_t)t * k + j] = segStart[e] + before + within[s][(size_t)t * k + j];
        if (e / El != s) p.pair[s][(size_t)t * k + j] = pairWithin[s][(size_t)t * k + j];
      }
  }
  return p;
}

std::string checkPlacement(const Dims& d, const std::vector<Routing>& routing, const std::vector<RankLayout>& lay,
                           const Placement& p) {
  const int n = d.ranks, k = d.topk, El = d.localExperts();
  std::ostringstream err;
  std::vector<std::map<long long, Slot>> taken(n);
  std::vector<std::vector<std::set<long long>>> pairsTo(n, std::vector<std::set<long long>>(n));
  for (int s = 0; s < n; ++s)
    for (int t = 0; t < routing[s].T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = routing[s].idx[(size_t)t * k + j];
        const long long pos = p.pos[s][(size_t)t * k + j];
        if (e < 0 || e >= d.experts) {
          if (pos != -1) return "a dropped slot has a row";
          continue;
        }
        const int dd = e / El, le = e % El;
        const RankLayout& l = lay[dd];
        if (pos < l.offsets[le] || pos >= l.offsets[le] + l.counts[le]) {
          err << "slot (" << s << "," << t << "," << j << ") of expert " << e << " at row " << pos
              << ", outside its segment [" << l.offsets[le] << ", +" << l.counts[le] << ")";
          return err.str();
        }
        if (!taken[dd].emplace(pos, Slot{s, t, j}).second) {
          err << "row " << pos << " of rank " << dd << " taken twice";
          return err.str();
        }
        const long long pr = p.pair[s][(size_t)t * k + j];
        if (pr >= 0 && !pairsTo[s][dd].insert(pr).second) return "a pair index used twice";
      }
  // Within a segment, the rows of each source are contiguous and sources come in rank order.
  for (int dd = 0; dd < n; ++dd) {
    int lastSrc = -1;
    long long lastRow = -2;
    for (const auto& kv : taken[dd]) {
      const bool newSegment = std::upper_bound(lay[dd].offsets.begin(), lay[dd].offsets.end(), lastRow) !=
                              std::upper_bound(lay[dd].offsets.begin(), lay[dd].offsets.end(), kv.first);
      if (!newSegment && kv.second.src < lastSrc) return "sources out of rank order inside a segment";
      if (!newSegment && kv.first != lastRow + 1) return "a gap inside a segment";
      lastSrc = kv.second.src;
      lastRow = kv.first;
    }
  }
  // Pair indices of (src -> d) are 0 .. pairs-1.
  for (int s = 0; s < n; ++s)
    for (int dd = 0; dd < n; ++dd)
      if (!pairsTo[s][dd].empty() && (*pairsTo[s][dd].rbegin() != (long long)pairsTo[s][dd].size() - 1))
        return "pair indices are not dense";
  return "";
}

uint16_t toBits(float f, bool fp16) {
  if (fp16) {
    // Round to nearest even through the float's bits (normal and subnormal halves; no inf/nan here).
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    float a = fabsf(f);
    if (a >= 65520.f) return (uint16_t)(sign | 0x7c00u);
    if (a < 6.103515625e-05f) {  // subnormal: multiples of 2^-24
      const float q = nearbyintf(a * 16777216.f);
      return (uint16_t)(sign | (uint32_t)q);
    }
    memcpy(&x, &a, 4);
    const uint32_t lsb = (x >> 13) & 1u;
    x += 0xfffu + lsb;
    const uint32_t exp = ((x >> 23) & 0xffu) - 127 + 15;
    return (uint16_t)(sign | (exp << 10) | ((x >> 13) & 0x3ffu));
  }
  uint32_t x;
  memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float fromBits(uint16_t b, bool fp16) {
  if (fp16) {
    const uint32_t sign = (uint32_t)(b & 0x8000u) << 16, exp = (b >> 10) & 0x1fu, man = b & 0x3ffu;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = INFINITY;
    else v = ldexpf((float)(man | 0x400u), (int)exp - 25);
    return sign ? -v : v;
  }
  const uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

}  // namespace moetest
}  // namespace mkccl
