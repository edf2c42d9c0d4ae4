// AllGather+GEMM: the cost model of the plans and the fused kernel's comm CTAs. Host code (also
// used by the CPU tests). docs/AG_GEMM.md says how the constants were fitted and how to refit them
// from mkccl-perf ag_gemm (fused_us, fused_side_us, sequential_us). The auto plan is a rule on the
// shape (rule.h) that uses the model's GEMM time; the model gives the comm CTA count.
#pragma once
#include <stdint.h>
#include <algorithm>
#include "kernels/ag_gemm/layout.h"
#include "kernels/ag_gemm/schedule.h"
#include "ops/gemm/gemm_plan.h"

namespace mkccl {
namespace ag {

// Fitted on 4xH200 (mkccl-perf, 2026-11-22) unless marked as a guess.
constexpr double kSmTflops = 6.1;       // the engine's 128x256 tile: 807 TFLOP/s at 8192^3 over 132 SMs (88 us per tile at K = 8192)
constexpr double kGatherGBps = 330;     // our AllGather, bytes each rank sends: sequential_us minus its GEMM (4096..8192 rows)
constexpr double kGatherStartUs = 15;
constexpr double kNvlinkGBps = 330;     // the most one rank's pushes reach
constexpr double kCtaPushGBps = 30;     // stored to peers per second by one comm CTA of 384 threads (guess: REFERENCE.md's 46 GB/s per 512-thread CTA, derated for fewer threads and a fence per claim)
constexpr double kSidePushGBps = 4;     // by one side team (guess)
constexpr double kSideSlowdown = 1.4;   // the GEMM while side teams push: fused_us over the GEMM's time was 1.37 at 8192^3, 1.46 at 16384x8192x8192
constexpr double kLocalCopyGBps = 1500; // the gather-out copy (region -> the user's gathered A): bytes per second, local HBM
constexpr double kCtaCopyGBps = 80;     // ... by one comm CTA (guess)
constexpr double kSideCopyGBps = 10;    // ... by one side team (guess)
constexpr double kLaunchUs = 4;         // one more kernel on the stream
constexpr double kEntryUs = 5;          // the call's entry handshake before the first push
constexpr int kGatherCtas = 24;         // CTAs of the sequential plan's AllGather (512 threads each)
constexpr double kCeGBps = 360;         // the ce plan's copy engines, bytes each rank sends (2xH200: 362-367 GB/s for 64 MiB to one peer; 4xH200: ~200 GB/s in all, where the rule does not take the ce plan)
constexpr double kCeStartUs = 10;       // the copy streams' go-word wait and first copy (guess)

struct Estimate {
  double fusedUs = 0, sequentialUs = 0;
  double gemmUs = 0, commUs = 0;  // the fused kernel's GEMM alone on its CTAs; its push
};

// Relative rate of the engine's tile configurations (as gemm_plan_model.h, cluster variants
// assumed as fast as without: the fused kernel only takes them when forced).
inline double tileEfficiency(const GemmPlan& p) { return p.bn == 256 ? 1.0 : (p.clusterSize == 2 ? 0.9 : 0.72); }

// One output tile on one SM.
inline double tileUs(const GemmPlan& p, int64_t K) {
  return 2.0 * 128.0 * p.bn * static_cast<double>(K) / (kSmTflops * 1e12) * 1e6 / tileEfficiency(p);
}

// Waves of tiles over the plan's CTAs (the engine's static schedule), times one tile.
inline double gemmUs(const GemmPlan& p, int64_t M, int64_t N, int64_t K) {
  const int64_t units = (M + 128 * p.clusterSize - 1) / (128 * p.clusterSize) * ((N + p.bn - 1) / p.bn);
  const int64_t parallel = std::max(1, p.ctas / p.clusterSize);
  return static_cast<double>((units + parallel - 1) / parallel) * tileUs(p, K);
}

// From the kernel's start until every peer's shard has landed, pushed at storeGBps in all (bytes
// stored to peers per second).
inline double pushUs(const Layout& L, double storeGBps) {
  const double out = static_cast<double>(L.shardBytes()) * (L.ws - 1);
  return kEntryUs + out / (std::min(kNvlinkGBps, std::max(storeGBps, 1e-3)) * 1e3);
}

// When the rows of M-block mb are here, pushUs after the start: every sender pushes its shard
// front to back to all receivers at once, so chunk c of every shard lands after (c+1)/nChunks of
// the push.
inline double blockReadyUs(const Layout& L, int mb, double push) {
  const int64_t r0 = static_cast<int64_t>(mb) * kTileRows;
  if (r0 >= L.M || L.ownBlock(mb)) return 0;
  const int64_t r1 = min64(r0 + kTileRows, L.M);
  double t = 0;
  for (int64_t q = r0 / L.m; q <= (r1 - 1) / L.m; ++q) {
    const int64_t last = min64(r1 - q * L.m, L.m) - 1;
    t = std::max(t, push * (L.chunkOfRow(static_cast<int>(last)) + 1) / L.nChunks);
  }
  return t;
}

// The fused kernel's GEMM: walks the static schedule of the clusters, each tile starting when its
// CTA is free and its rows have landed (push: 0, nothing is waited for).
inline double simulateFusedGemmUs(const Layout& L, const GemmPlan& g, int64_t N, int64_t K, double push,
                                  double tile) {
  const int cs = g.clusterSize;
  dev::TileSchedParams sp;
  sp.mBlocks = static_cast<int>((L.M + kTileRows - 1) / kTileRows);
  sp.nBlocks = static_cast<int>((N + g.bn - 1) / g.bn);
  sp.clusterM = cs;
  sp.group = std::max(1, g.groupM / cs);
  sp.rowRotate = 0;
  const TileOrder o = tileOrderFor(L, cs);
  const int clusters = std::max(1, g.ctas / cs);
  // Every cluster, or for huge problems every 7th (7: coprime to the periods the tile order has
  // in practice, peers and chunk rows; a regular sample could miss the latest cluster).
  const int64_t tiles = static_cast<int64_t>((sp.mBlocks + cs - 1) / cs) * sp.nBlocks;
  const int step = tiles <= 65536 ? 1 : 7;
  double end = 0;
  for (int cl = 0; cl < clusters; cl += step) {
    TileScheduler s(sp, o, cl, clusters, 0);
    dev::TileCoord t;
    double now = 0;
    while (s.next(t)) {
      double ready = 0;
      for (int r = 0; r < cs; ++r) ready = std::max(ready, blockReadyUs(L, t.m + r, push));
      now = std::max(now, ready) + tile;
    }
    end = std::max(end, now);
  }
  return end;
}

// The fused kernel with commCtas dedicated comm CTAs next to the plan's compute CTAs, and/or the
// side teams (the compute CTAs' idle producer warps). gathered: the user wants the gathered A too
// (the comm teams copy the peers' rows out of the region once their own push is done).
// ctaPushGBps: one comm CTA's push rate.
inline Estimate estimateFused(const Layout& L, const GemmPlan& g, int64_t N, int64_t K, int commCtas, bool side,
                              bool gathered, double ctaPushGBps = kCtaPushGBps) {
  Estimate e;
  const double sideTeams = side ? g.ctas : 0.0;
  const double tile = tileUs(g, K) * (side ? kSideSlowdown : 1.0);
  const double push = pushUs(L, commCtas * ctaPushGBps + sideTeams * kSidePushGBps);
  e.commUs = push;
  if (gathered)
    e.commUs += static_cast<double>(L.shardBytes()) * (L.ws - 1) /
                (std::max(1e-3, std::min(kLocalCopyGBps, commCtas * kCtaCopyGBps + sideTeams * kSideCopyGBps)) * 1e3);
  e.gemmUs = simulateFusedGemmUs(L, g, N, K, 0, tile);
  e.fusedUs = std::max(simulateFusedGemmUs(L, g, N, K, push, tile), e.commUs) + kLaunchUs;
  return e;
}

// The fused kernel's communication for a call. commCtas asked for (MKCCL_COMM_CTAS,
// config.commCtas, ag_gemm.comm_ctas):
//   n > 0  n CTAs taken from the GEMM do all the communication (the classic SM split);
//   0      the side teams (the compute CTAs' idle producer warps) push, plus the CTAs the GEMM
//          leaves idle;
//   -1     the model picks how many CTAs to take (0 to 24): enough that tiles do not wait for
//          rows, few enough that the GEMM keeps its waves; CTAs the GEMM leaves idle come free.
//          Side teams off: with them pushing, the GEMM ran ~1.4x slower (4xH200, 2026-11-22).
// planFor(taken, &plan) plans the GEMM on the SMs `taken` comm CTAs leave and returns how many
// more comm CTAs fit on SMs (cluster slots) the GEMM leaves idle. ctaPushGBps: as estimateFused.
struct FusedChoice {
  GemmPlan gemm;
  int commCtas = 0;         // comm CTAs in the launch
  bool side = false;        // side teams push too
  bool fromBudget = false;  // some comm CTAs were taken from the GEMM
  Estimate est;
};

template <class PlanFor>
FusedChoice chooseFused(const Layout& L, int64_t N, int64_t K, int smCount, int commCtas, bool gathered,
                        PlanFor planFor, double ctaPushGBps = kCtaPushGBps) {
  FusedChoice best;
  if (commCtas > 0) {
    const int n = std::max(2, std::min((commCtas + 1) / 2 * 2, smCount / 2 / 2 * 2));
    planFor(n, &best.gemm);
    best.commCtas = n;
    best.fromBudget = true;
    best.est = estimateFused(L, best.gemm, N, K, n, false, gathered, ctaPushGBps);
    return best;
  }
  if (commCtas < 0) {
    static const int kTaken[] = {0, 2, 4, 6, 8, 10, 12, 16, 20, 24};
    bool found = false;
    for (int taken : kTaken) {
      if (taken > smCount / 4) break;
      GemmPlan g;
      const int n = taken + planFor(taken, &g);
      if (n == 0) continue;  // nobody would push
      const Estimate e = estimateFused(L, g, N, K, n, false, gathered, ctaPushGBps);
      if (!found || e.fusedUs < best.est.fusedUs * 0.99) {  // near-ties: fewer CTAs taken
        found = true;
        best.gemm = g;
        best.commCtas = n;
        best.fromBudget = taken > 0;
        best.est = e;
      }
    }
    if (found) return best;
  }
  // Side teams (asked for, or a GPU too small to give communication an SM).
  best.commCtas = planFor(0, &best.gemm);
  best.side = true;
  best.est = estimateFused(L, best.gemm, N, K, best.commCtas, true, gathered, ctaPushGBps);
  return best;
}

// The ce plan: the fused kernel on every SM, the copy engines pushing (they take no SM; the
// GEMM is assumed to keep its speed beside them, as cuBLAS did in the 2xH200 probe).
inline Estimate estimateCe(const Layout& L, const GemmPlan& full, int64_t N, int64_t K, bool gathered) {
  Estimate e;
  const double tile = tileUs(full, K);
  const double out = static_cast<double>(L.shardBytes()) * (L.ws - 1);
  const double push = kEntryUs + kCeStartUs + out / (kCeGBps * 1e3);
  e.commUs = push;
  e.gemmUs = simulateFusedGemmUs(L, full, N, K, 0, tile);
  e.fusedUs = std::max(simulateFusedGemmUs(L, full, N, K, push, tile), push) + kLaunchUs;
  if (gathered) e.fusedUs += out / (kLocalCopyGBps * 1e3);
  return e;
}

// The ce plan's copies (ops/ag_gemm/ce.cu): chunks per copy, at most this many (the counter writes
// of a copy go in one batch).
constexpr int kMaxGroupChunks = 64;

// Bytes per copy when the user sets none: a quarter of the shard, at least 4 MiB. Every copy and
// its counter writes cost the stream a gap of ~6-12 us (2xH200, 8192x2048x8192, 64 MiB shards:
// 1 MiB copies 1090 us, 4 MiB 435-440, 16 MiB 369 = 1.045x the GEMM alone), while smaller copies
// let the first peers' tiles start sooner: at 4 ranks a quarter of a 32 MiB shard is the balance
// of the two in the model (the ce plan loses at 4 ranks whatever the copy size: docs/AG_GEMM.md).
inline int64_t ceAutoGroupBytes(const Layout& L) { return std::max<int64_t>(int64_t{4} << 20, L.shardBytes() / 4); }

inline int ceGroupChunks(const Layout& L, int64_t groupBytes) {
  if (groupBytes <= 0) groupBytes = ceAutoGroupBytes(L);
  const int64_t chunkBytes = static_cast<int64_t>(L.chunkRows()) * L.rowBytes;
  const int64_t n = std::max<int64_t>(1, groupBytes / std::max<int64_t>(1, chunkBytes));
  return static_cast<int>(std::min<int64_t>(n, kMaxGroupChunks));
}

// Our AllGather, then the GEMM engine on every SM.
inline double estimateSequential(const Layout& L, const GemmPlan& full, int64_t N, int64_t K, bool gathered) {
  double ag = kGatherStartUs + static_cast<double>(L.shardBytes()) * (L.ws - 1) / (kGatherGBps * 1e3);
  if (gathered) ag += static_cast<double>(L.shardBytes()) * (L.ws - 1) / (kLocalCopyGBps * 1e3);
  return ag + gemmUs(full, L.M, N, K) + 2 * kLaunchUs;
}

}  // namespace ag
}  // namespace mkccl
