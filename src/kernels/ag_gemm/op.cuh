// AllGather+GEMM as an op of the GEMM engine (gemm/gemm_kernel.cuh): C[M, N] = gathered A . W^T in
// one persistent launch. What it adds to the plain GEMM:
//   Scheduler  this rank's own rows first, then peers' rows in the order they arrive (schedule.h);
//   Loads      a tile wholly inside this rank's shard is loaded from the user's A (its own tensor
//              map, in Params), so the first tiles start at once with no copy; every other tile
//              from the gathered region, once the producer has waited for the chunks it needs
//              (at its first k-block; then fence.proxy.async: the counters were read by generic
//              loads);
//   roles      the pushes (push.cuh) run in dedicated comm CTAs (blocks [0, nCommCtas)) and/or in
//              the three idle warps of every compute CTA's producer warpgroup (side teams: no SM
//              taken from the GEMM). With the copy engines pushing (the ce plan), only the first
//              compute CTA's side warps run: they enter the call and release the copy streams.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/ag_gemm/push.cuh"
#include "kernels/ag_gemm/schedule.h"
#include "kernels/gemm/gemm_op.cuh"

namespace mkccl {
namespace ag {

struct FusedParams {
  CUtensorMap mapOwn;     // this rank's shard (the user's A), boxes of 128 rows: first, 64-aligned
  PushArgs push;
  TileOrder order;
  int sideTeams;          // the producer warpgroup's warps 1..3 communicate
  int unitCta, unitSide;  // slices per claim of a comm CTA / of a side team
};

constexpr uint32_t kTeamBarrier = 3;  // named barriers 1 and 2 are the epilogue's

// Thread 0 of a compute CTA: waits until every chunk that tile row block mb needs has landed.
// Its first wait in a call is for this rank's own entry (entered: done): until the leader has
// reset the counters they hold whatever the region held before, e.g. rows of another shape's
// gathered A after the layout moved (a shape change) or the region was re-created (growth), and
// such a stale word usually looks "complete". Peers add only after that entry too.
// One waitGeq call site in the whole producer (ptxas hazard: see enterCall in push.cuh).
__device__ __forceinline__ bool waitTileRows(const PushArgs& p, int mb, bool* entered) {
  const Layout& L = p.L;
  if (static_cast<int64_t>(mb) * kTileRows >= L.M) return true;  // a cluster's padding block: zero-filled
  const int r0 = mb * kTileRows;
  const int r1 = static_cast<int>(min64(static_cast<int64_t>(r0) + kTileRows, L.M));
  const uint64_t F = dev::flagValue(p.callSeq(), 0), base = p.counterBase();
  const uint64_t* mine = p.counters[p.lme];
  int q = r0 / L.m;
  const int qLast = (r1 - 1) / L.m;
  int c = L.chunkOfRow(r0 - q * L.m);
  while (q <= qLast) {
    const bool entry = !*entered;
    const uint64_t* flag = entry ? p.flags[p.lme] + kBarrierSlot + p.lme : mine + L.chunkSlot(q, c);
    const uint64_t want = entry ? F : base + static_cast<uint64_t>(L.slicesOfChunk(c));
    // The error names the local rank whose entry it waited for, or the rank (global) whose rows.
    if (!dev::waitGeq(p.dev, flag, want, entry ? p.lme : q, entry ? kSiteBarrier : kSiteGemmChunk)) return false;
    if (entry) {
      // A peer in the other mode (gatheredA registered or not) or with other buffers: the
      // leader recorded it; drain.
      if (dev::loadRelaxed(agWords(p) + kAgFailWord) != 0) return false;
      *entered = true;
      continue;
    }
    const int base = q * L.m;
    if (++c > L.chunkOfRow(minI(r1 - base, L.m) - 1)) {
      ++q;  // the next shard's rows start at its row 0
      c = 0;
    }
  }
  dev::fenceProxyAsync();  // the counters (generic loads) before the TMA reads of the rows
  return true;
}

// The producer side: the A map per tile, and the wait for a peer tile's rows.
template <class Cfg>
struct GatherLoads {
  const FusedParams& p;
  const CUtensorMap* region;  // the gathered A (the kernel's mapA)
  bool own = false, entered = false;

  __device__ __forceinline__ GatherLoads(const GemmArgs&, const FusedParams& p_, const CUtensorMap* mapA, uint32_t)
      : p(p_), region(mapA) {}
  __device__ __forceinline__ void prefetch() const {
    dev::tmaPrefetchMap(region);
    dev::tmaPrefetchMap(&p.mapOwn);
  }
  __device__ __forceinline__ TileA a(const dev::TileCoord& t) {
    const Layout& L = p.push.L;
    own = L.ownBlock(t.m);
    return {own ? &p.mapOwn : region, static_cast<int32_t>(static_cast<int64_t>(t.m) * Cfg::BM - (own ? L.me * L.m : 0))};
  }
  __device__ __forceinline__ int32_t bRow(const dev::TileCoord& t) const { return t.n * Cfg::BN; }
  __device__ __forceinline__ bool wait(const dev::TileCoord& t, int kb) {
    return kb != 0 || own || waitTileRows(p.push, t.m, &entered);
  }
  __device__ __forceinline__ void issued() {}
  __device__ __forceinline__ void done() {}
};

// TileScheduler, built as the engine builds schedulers.
struct GatherScheduler : TileScheduler {
  using Tile = dev::TileCoord;
  __device__ __forceinline__ GatherScheduler(const GemmArgs& g, const FusedParams& p, int cluster, int numClusters,
                                             int ctaRank)
      : TileScheduler(g.sched, p.order, cluster, numClusters, ctaRank) {}
};

struct AllGatherGemmOp : GemmOpDefaults {
  using Params = FusedParams;
  using Scheduler = GatherScheduler;
  template <class Cfg, class Op>
  using Loads = GatherLoads<Cfg>;

  // The side team calls out of line (commTeam), which spills at the engine's 56 registers; the
  // consumers still fit their 128 accumulators in 216. 128 x 72 + 256 x 216 = 64512.
  static constexpr uint32_t kProducerRegs = 72, kConsumerRegs = 216;

  static constexpr bool kCommCtas = true;
  __device__ static void commCta(const GemmArgs&, const Params& p, int cta, uint32_t, uint32_t) {
    commTeam(p.push, Team{threadIdx.x, blockDim.x, kTeamBarrier}, cta == 0, p.unitCta);
  }

  static constexpr bool kSideWarps = true;
  template <class Cfg>
  __device__ static void sideWarps(const GemmArgs& g, const Params& p, const SmemLayout<Cfg>&, const Scheduler&,
                                   uint32_t tid, int computeCta) {
    // (ce: only the first compute CTA's warps, to enter the call and release the copy engines)
    if (p.sideTeams || (p.push.ce && computeCta == 0))
      commTeam(p.push, Team{tid, 96u, kTeamBarrier}, computeCta == 0 && g.nCommCtas == 0, p.unitSide);
  }
};

}  // namespace ag
}  // namespace mkccl
