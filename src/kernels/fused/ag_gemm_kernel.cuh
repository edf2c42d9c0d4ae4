// The fused AllGather+GEMM kernel: C[M, N] = gathered A . W^T in one persistent launch.
//
// It is the GEMM engine's persistent kernel (src/kernels/gemm/gemm_kernel.cuh: the same barriers,
// consumer role, epilogue and failure behaviour) with three differences the engine's hooks do not
// express yet:
//   - A tile that lies wholly inside this rank's shard is loaded from the user's A (a second
//     tensor map, in the params), so the first tiles start at once, with no copy; every other
//     tile is loaded from the gathered region, after the producer waited for the chunks it needs
//     (at its first k-block; then fence.proxy.async, the flag was read by generic loads).
//   - The tile order (ag_gemm_sched.cuh) needs the rank and world size.
//   - Communication runs in the three idle warps of every compute CTA's producer warpgroup (its
//     thread 0 issues the TMA loads) and/or in dedicated comm CTAs (blocks [0, nCommCtas)), as
//     teams of ag_gemm_push.cuh. The side warps cost no SM. A comm CTA may push through the
//     bulk-copy engine (PushArgs::bulk) with the shared memory the GEMM's stages would use.
// (README of the engine: when it grows a map-selection hook and a scheduler that sees the op's
// params, this file reduces to an Op struct.)
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/device/cluster.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/fused/ag_gemm_push.cuh"
#include "kernels/fused/ag_gemm_sched.cuh"
#include "kernels/gemm/gemm_kernel.cuh"

namespace mkccl {
namespace ag {

struct FusedParams {
  CUtensorMap mapOwn;  // this rank's shard (the user's A), boxes of 128 rows: first, 64-aligned
  PushArgs push;
  TileOrder order;
  int sideTeams;       // the producer warpgroup's warps 1..3 communicate
  int unitCta, unitSide;  // slices per claim of a comm CTA / of a side team
};

// The consumer role's Op: only the tile order differs from the plain GEMM.
struct ConsumerOp : GemmOpDefaults {
  using Scheduler = TileScheduler;
};

constexpr uint32_t kTeamBarrier = 3;  // named barriers 1 and 2 are the epilogue's

// setmaxnreg split when BN = 256: the producer warpgroup also runs the side team (calls out of
// line), which spills at the engine's 56; consumers still fit their 128 accumulators in 216.
// 128 x 72 + 256 x 216 = 64512, the launch allocation (168 x 384).
constexpr uint32_t kProducerRegs = 72, kConsumerRegs = 216;

// Thread 0 of a compute CTA: waits until every chunk that tile row block mb needs has landed.
// Its first wait in a call is for this rank's own entry (entered: done): until the leader has
// reset the counters they hold whatever the region held before, e.g. rows of another shape's
// gathered A after the layout moved (a shape change) or the region was re-created (growth), and
// such a stale word usually looks "complete". Peers add only after that entry too.
// One waitGeq call site in the whole producer (ptxas hazard: see enterCall in ag_gemm_push.cuh).
__device__ __forceinline__ bool waitTileRows(const PushArgs& p, int mb, bool* entered) {
  const Layout& L = p.L;
  if (static_cast<int64_t>(mb) * kTileRows >= L.M) return true;  // a cluster's padding block: zero-filled
  const int r0 = mb * kTileRows;
  const int r1 = static_cast<int>(minI64(static_cast<int64_t>(r0) + kTileRows, L.M));
  const uint64_t F = dev::flagValue(p.dev.seq, 0);
  const uint64_t* mine = p.counters[L.me];
  int q = r0 / L.m;
  const int qLast = (r1 - 1) / L.m;
  int c = L.chunkOfRow(r0 - q * L.m);
  while (q <= qLast) {
    const bool entry = !*entered;
    const uint64_t* flag = entry ? p.flags[L.me] + kBarrierSlot + L.me : mine + L.chunkSlot(q, c);
    const uint64_t want = entry ? F : F + static_cast<uint64_t>(L.slicesOfChunk(c));
    if (!dev::waitGeq(p.dev, flag, want, entry ? L.me : q, entry ? kSiteBarrier : kSiteGemmChunk)) return false;
    if (entry) {
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

// The engine's producerLoop with the A map chosen per tile and the chunk wait (one thread).
template <class Cfg>
__device__ __forceinline__ bool producer(const GemmArgs& g, const FusedParams& p, const CUtensorMap* mapRegion,
                                         const CUtensorMap* mapB, const SmemLayout<Cfg>& sm, TileScheduler& sched,
                                         uint32_t ctaRank) {
  volatile int* flags = reinterpret_cast<volatile int*>(__cvta_shared_to_generic(sm.flags()));
  const Layout& L = p.push.L;
  dev::PipeState<Cfg::kStages> pipe;
  const int cs = g.clusterSize;
  const int bRows = Cfg::BN / cs;
  const uint32_t bOffset = ctaRank * static_cast<uint32_t>(bRows) * (Cfg::BK * 2);
  const uint16_t mask = static_cast<uint16_t>((1u << cs) - 1u);
  bool drain = false, entered = false;
  dev::TileCoord t;
  while (sched.next(t)) {
    const bool own = L.ownBlock(t.m);
    const CUtensorMap* mapA = own ? &p.mapOwn : mapRegion;
    const int32_t rowA = static_cast<int32_t>(static_cast<int64_t>(t.m) * Cfg::BM - (own ? L.me * L.m : 0));
    const int32_t rowB = t.n * Cfg::BN + static_cast<int32_t>(ctaRank) * bRows;
    for (int kb = 0; kb < g.kBlocks; ++kb) {
      const uint32_t s = pipe.stage;
      // CTA-scope wait, as the engine's producer: only TMA follows it (mbarrier.cuh).
      if (!dev::mbarWait(sm.empty(s), pipe.phase ^ 1u, g.waitTimeoutNs, flags)) {
        gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultProducer);
        return false;
      }
      if (kb == 0 && !own && !drain && !waitTileRows(p.push, t.m, &entered)) {
        drain = true;  // the error is recorded; run the schedule out on whatever memory holds
        flags[1] = 1;
      }
      dev::mbarArriveExpectTx(sm.full(s), Cfg::kStageBytes);
      const int32_t k0 = kb * Cfg::BK;
      dev::tmaLoad2d(sm.a(s), mapA, sm.full(s), k0, rowA);
      if (cs == 1)
        dev::tmaLoad2d(sm.b(s), mapB, sm.full(s), k0, rowB);
      else
        dev::tmaLoad2dMulticast(sm.b(s) + bOffset, mapB, sm.full(s), k0, rowB, mask);
      pipe.advance();
    }
  }
  return true;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    fusedKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                const __grid_constant__ CUtensorMap mapC, const __grid_constant__ GemmArgs g,
                const __grid_constant__ FusedParams p) {
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  const uint32_t raw = dev::smemAddr(smemRaw);
  if (static_cast<int>(blockIdx.x) < g.nCommCtas) {
    // A comm CTA has the GEMM's whole shared memory (its stages) for the bulk push.
    const Team team{threadIdx.x, blockDim.x, kTeamBarrier};
    const BulkSmem sm{(raw + 1023u) & ~1023u, p.push.bulk ? Cfg::kSmemBytes - Cfg::kAlignSlack : 0u};
    commTeam(p.push, team, blockIdx.x == 0, p.unitCta, sm);
    return;
  }
  const SmemLayout<Cfg> sm{(raw + 1023u) & ~1023u};
  const int cs = g.clusterSize;
  const uint32_t ctaRank = cs > 1 ? dev::clusterCtaRank() : 0u;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      dev::mbarInit(sm.full(s), 1);
      dev::mbarInit(sm.empty(s), Cfg::kConsumerWarps * cs);
    }
    volatile int* flags = reinterpret_cast<volatile int*>(__cvta_shared_to_generic(sm.flags()));
    flags[0] = 0;
    flags[1] = 0;
    dev::fenceBarrierInit();
  }
  if (cs > 1) dev::clusterSync(); else __syncthreads();

  const int computeCta = static_cast<int>(blockIdx.x) - g.nCommCtas;
  const int numClusters = (static_cast<int>(gridDim.x) - g.nCommCtas) / cs;
  TileScheduler sched(g.sched, p.order, computeCta / cs, numClusters, static_cast<int>(ctaRank));

  const int wg = static_cast<int>(threadIdx.x / 128u);
  if (wg == 0) {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegDealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      dev::tmaPrefetchMap(&mapA);
      dev::tmaPrefetchMap(&p.mapOwn);
      dev::tmaPrefetchMap(&mapB);
      producer<Cfg>(g, p, &mapA, &mapB, sm, sched, ctaRank);
    } else if ((p.sideTeams || (p.push.ce && computeCta == 0)) && threadIdx.x >= 32) {
      // (ce: only the first compute CTA's warps, to enter the call and release the copy engines)
      const Team team{threadIdx.x - 32u, 96u, kTeamBarrier};
      commTeam(p.push, team, computeCta == 0 && g.nCommCtas == 0, p.unitSide, BulkSmem{0, 0});  // no smem to spare
    }
  } else {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegAlloc<kConsumerRegs>();
    consumerRole<Cfg, ConsumerOp>(g, ConsumerOp::Params{}, &mapC, sm, sched, wg - 1, ctaRank);
  }
  if (cs > 1) dev::clusterSync(); else __syncthreads();
}

}  // namespace ag
}  // namespace mkccl
