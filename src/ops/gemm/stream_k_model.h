// When the plain GEMM runs stream-K (split_k.cuh, SplitKParams::splits == 0) instead of whole
// tiles, and with which tile: pure host arithmetic, header-only so that the CPU tests pin it.
//
// A persistent CTA works through whole tiles, so an output of T tiles on P CTAs takes ceil(T / P)
// tile times: 144 tiles of 128 x 256 (2000 x 2056) take two on 132 SMs, 561 (4097 x 4104) five
// for 4.25 waves of work, 40 (1000 x 1032) one tile time with 92 SMs idle. Stream-K keeps the
// full waves but one as whole tiles and cuts the k-blocks of the rest into P equal ranges, one per
// CTA: the time becomes T / P tile times plus the reduction of the tiles that a range boundary
// cuts (each CTA writes at most two fp32 partial tiles; the last part of a tile reads the others).
// Leaving one full wave in the stream-K region gives every CTA at least a tile's worth of
// k-blocks, so a tile is cut into two or three parts, not a dozen.
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/abi/hd.h"
#include "ops/gemm/gemm_plan_model.h"

namespace mkccl {

constexpr int kStreamKMinKBlocks = 4;  // each CTA's range: at least this many k-blocks
// Cost of writing or reading one fp32 partial of a 128-column tile, in k-blocks of a 128 x 128
// tile's mainloop at the 128 x 128 rate: 64 KiB between an SM and L2 at ~110 GB/s (~0.6 us)
// against 2.1 MFLOP at ~4.3 TFLOP/s per SM (~0.48 us). An estimate, not yet measured.
constexpr double kStreamKSlotKBlocks = 1.25;

struct StreamKSplit {
  int dpTiles = 0, skTiles = 0, ctas = 0;  // skTiles 0: no stream-K
};

// The stream-K region of T tiles of kBlocks k-blocks on at most ctaBudget CTAs: every full wave but
// the last as whole tiles, the rest in ranges of at least kStreamKMinKBlocks k-blocks (fewer CTAs
// if the region is small). No region when the tiles fill whole waves or K is too short to cut.
inline StreamKSplit gemmStreamKSplit(int64_t tiles, int kBlocks, int ctaBudget) {
  StreamKSplit s;
  const int64_t P = std::max(ctaBudget, 1);
  if (tiles < 1 || kBlocks < 2 * kStreamKMinKBlocks || tiles % P == 0) return s;
  const int64_t full = tiles / P;
  const int64_t dp = full >= 1 ? (full - 1) * P : 0;
  const int64_t sk = tiles - dp;
  const int64_t ctas = std::min<int64_t>(P, sk * kBlocks / kStreamKMinKBlocks);
  if (ctas < 2) return s;
  s.dpTiles = static_cast<int>(dp);
  s.skTiles = static_cast<int>(sk);
  s.ctas = static_cast<int>(ctas);
  return s;
}

// Predicted time of stream-K with 128 x bn tiles, in k-blocks of a 128 x 128 tile at the 128 x 128
// rate (it picks the tile when stream-K is forced).
inline double gemmStreamKCost(int64_t M, int64_t N, int kBlocks, int bn, const StreamKSplit& s) {
  const double tile = (bn / 128.0) / (gemmTileEfficiency(bn, 1) / gemmTileEfficiency(128, 1));
  const int64_t tiles = ceilDiv(M, 128) * ceilDiv(N, bn);
  const double waves = static_cast<double>(tiles) / s.ctas;  // dpTiles > 0 only when ctas is the budget
  // What ends a range late: the partial of its last tile written, then, in the part that counts
  // in last, every part of that tile read back (a cut tile has (skTiles + ctas) / skTiles parts on
  // average: the range boundaries fall in it).
  const double parts = static_cast<double>(s.skTiles + s.ctas) / s.skTiles;
  return waves * kBlocks * tile + kStreamKSlotKBlocks * (bn / 128.0) * (1.0 + parts);
}

// Stream-K's plan for the plain GEMM, when the tuner's gemm.stream_k forces it (2, `on`): wherever
// a region exists, with the variant's tile if it forces 256x1 or 128x1, else the tile (128 x 256 or
// 128 x 128) its model predicts faster; any other value: `plain`. It measured slower than whole
// tiles on 10 of 13 odd shapes (docs/PERFORMANCE.md), so no rule picks it by itself; the split
// remainder below is auto's. slotUnits: the workspace's room in fp32 tiles of 128 x 128 (each CTA
// needs two of 128 x bn).
inline GemmPlan gemmStreamKPlan(const GemmPlan& plain, int64_t M, int64_t N, int64_t K, GemmVariant v, int forced,
                                int ctaBudget, int slotUnits) {
  if (plain.simple || plain.splits != 1 || forced != 2) return plain;
  if (v != GemmVariant::Auto && v != GemmVariant::F256C1 && v != GemmVariant::F128C1) return plain;
  const int kBlocks = static_cast<int>(ceilDiv(K, 64));
  GemmPlan best = plain;
  double bestCost = 1e300;
  for (const int bn : {256, 128}) {
    if (v == GemmVariant::F256C1 && bn != 256) continue;
    if (v == GemmVariant::F128C1 && bn != 128) continue;
    const StreamKSplit s = gemmStreamKSplit(ceilDiv(M, 128) * ceilDiv(N, bn), kBlocks, ctaBudget);
    if (s.skTiles == 0 || 2 * s.ctas * (bn / 128) > slotUnits) continue;
    const double c = gemmStreamKCost(M, N, kBlocks, bn, s);
    if (c < bestCost) {
      bestCost = c;
      best.bn = bn;
      best.clusterSize = 1;
      best.simple = false;
      best.splits = 0;
      best.dpTiles = s.dpTiles;
      best.skTiles = s.skTiles;
      best.ctas = s.ctas;
    }
  }
  return best;
}

// The split remainder (split_k.cuh: splits >= 2 with dpTiles > 0, or a single partial wave): the
// full waves of tiles whole, then each tile of the partial last wave in s uniform parts, so that
// the R tiles left fill the SMs (R s <= CTAs) and the CTAs work through the same k-blocks at once.
// Stream-K's contiguous ranges left each CTA at its own k offset: on one H100 its mainloop ran
// 15-100% slower per k-block than whole tiles in the same kernel (the L2 no longer serves one
// k-slice to many CTAs at once), and its pieces' epilogues took 4-9 us against 1.3 for a whole
// tile (gemm_streamk_probe_test; docs/PERFORMANCE.md). Parts per tile: at most 4 (the last part
// reads the others' fp32 partials alone), each at least kStreamKMinKBlocks k-blocks.
constexpr int kRemainderMaxSplits = 4;
// What the reduction of a split tile adds to the last part, in k-blocks of its own tile per part
// (it reads the others' partials): its epilogue took 3.9-4.2 us in two parts of 128 x 192, 6.2 in
// three, 4.9 in four of 128 x 128 and 8.0 in four of 128 x 256, against ~1 us for a whole tile (one
// H200, gemm_streamk_probe_test, 3-remainder-h200/): 5-8 k-blocks of the tile per part. With 12
// k-blocks in all, the rule took four parts of 128 x 256 on an H100 at 1000 x 1032 and 4097 x 4104
// and lost 35% and 6% (6-tile192-h100/).
constexpr double kRemainderReduceKBlocksPerPart = 6;
// Auto: only when predicted at least 12% faster. Measured on the odd set (alternating with the
// whole-tile plans): 2000 x 2056 x 4096 58.7 against 68.2 us on an H200, 61.5 against 69.0 on an
// H100 (model 0.81-0.83 of the plain plan) gained; 4097 x 4104 x 4096 and 1000 x 1032 x 4096 in
// 128 x 192 parts (model 0.90-1.0) ran within 2% of the whole-tile plans on the H200, the first
// slower (the split kernel has no 2-CTA clusters, which 4097 x 4104 measured 5% faster with).
constexpr double kRemainderGain = 0.88;

// The plan for the plain GEMM's partial last wave: `plain` unless the split remainder is predicted
// faster (forced 0: auto; 1: off; 3: wherever a remainder exists, with the variant's tile if it
// forces 256x1, 192x1 or 128x1). Not for cluster variants (the split-K kernel has no clusters),
// nor at or below minRows (split K serves decode M), nor by auto on rows off 128 bytes
// (misalignedRows: there the 2-CTA clusters' W multicast is worth more than the last wave; 2000 x
// 2056 x 4104: 79.2 us split against 73.6 in 128 x 192 clusters). Workspace room: slotUnits fp32
// tiles of 128 x 128, counters for maxUnits tiles.
inline GemmPlan gemmSplitRemainderPlan(const GemmPlan& plain, int64_t M, int64_t N, int64_t K, GemmVariant v,
                                       int forced, int ctaBudget, int slotUnits, int maxUnits, int64_t minRows,
                                       const GemmTileRates& rates, bool misalignedRows = false) {
  if (plain.simple || plain.splits != 1 || forced == 1 || forced == 2 || M <= minRows) return plain;
  if (forced == 0 && misalignedRows) return plain;
  const bool anyTile = v == GemmVariant::Auto;
  if (!anyTile && v != GemmVariant::F256C1 && v != GemmVariant::F192C1 && v != GemmVariant::F128C1) return plain;
  const int kBlocks = static_cast<int>(ceilDiv(K, 64));
  const int64_t P = std::max(ctaBudget, 1);
  const int64_t mBlocks = ceilDiv(M, 128);
  // Costs in k-blocks of a tile times tile width over efficiency (gemmWavePlan's unit, times K).
  const double plainCost = static_cast<double>(ceilDiv(ceilDiv(mBlocks, plain.clusterSize) * ceilDiv(N, plain.bn),
                                                       std::max(plain.ctas / plain.clusterSize, 1))) *
                           kBlocks * plain.bn / rates.of(plain.bn, plain.clusterSize);
  GemmPlan best = plain;
  double bestCost = forced == 3 ? 1e300 : plainCost * kRemainderGain;
  for (const int bn : {256, 192, 128}) {
    if (v == GemmVariant::F256C1 && bn != 256) continue;
    if (v == GemmVariant::F192C1 && bn != 192) continue;
    if (v == GemmVariant::F128C1 && bn != 128) continue;
    const int64_t tiles = mBlocks * ceilDiv(N, bn);
    const int64_t full = tiles / P, rest = tiles - full * P;
    if (rest == 0) continue;
    const int64_t s = std::min<int64_t>({P / rest, kRemainderMaxSplits, kBlocks / kStreamKMinKBlocks});
    if (s < 2 || rest * s * (bn / 64) / 2 > slotUnits || rest > maxUnits) continue;
    const double c = (static_cast<double>(full * kBlocks) + static_cast<double>(ceilDiv(kBlocks, s)) +
                      kRemainderReduceKBlocksPerPart * static_cast<double>(s)) *
                     bn / rates.of(bn, 1);
    if (c < bestCost) {
      bestCost = c;
      best.bn = bn;
      best.clusterSize = 1;
      best.simple = false;
      best.splits = static_cast<int>(s);
      best.dpTiles = static_cast<int>(full * P);
      best.skTiles = 0;
      best.ctas = static_cast<int>(full > 0 ? P : rest * s);
    }
  }
  return best;
}

}  // namespace mkccl
