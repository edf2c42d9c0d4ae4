// The fused GEMM+ReduceScatter / GEMM+AllReduce kernel: one persistent launch per call (the ring
// of gemm_rs_layout.cuh).
//
// It is the GEMM engine's persistent kernel (src/kernels/gemm: the same tile configuration,
// barriers, mainloop and failure behaviour) with what its hooks cannot express yet:
//   - the tile order and the A rows of a tile come from the ring schedule (rank-dependent, rows
//     counted per chunk, so not multiples of 128 globally);
//   - the epilogue adds the incoming running sum and writes either a local staging slot or C,
//     and publishes per-warpgroup counters in shared memory instead of a per-tile hook (a hook
//     that waited for its stores would stall the tensor cores for every NVLink transfer);
//   - the three idle warps of the producer warpgroup send (gemm_rs_copy.cuh).
// Roles of a compute CTA (384 threads, one per SM, clusters of 1 or 2 along M):
//   warp 0, thread 0      TMA producer (the engine's loop, rows from the ring tile)
//   warps 1..3            RS: one push team of 96 threads; AR: warp 1 pushes, warps 2-3 gather
//   warpgroups 1, 2       consumers: mainloop, then the ring epilogue of their 64 rows
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/device/cluster.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/fused/gemm_rs_copy.cuh"
#include "kernels/fused/gemm_rs_epilogue.cuh"
#include "kernels/fused/gemm_rs_layout.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/mainloop.cuh"

namespace mkccl {
namespace rs {

constexpr uint32_t kPushBarrier = 3, kAgBarrier = 4;  // named barriers 1, 2 are the consumers'

// Registers per thread after setmaxnreg (BN = 256): the copy teams of the producer warpgroup need
// more than the engine's 56, the consumers fewer than its 224 (no call in their path).
// 128 * 72 + 256 * 216 = 64512 = the launch allocation (168 x 384).
constexpr uint32_t kProducerRegs = 72, kConsumerRegs = 216;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 168 * 384, "register budget of a 384-thread CTA");

// The engine's producer loop with the ring's tiles (one thread). False if it gave up.
template <class Cfg>
__device__ __forceinline__ bool producer(const GemmArgs& g, const RingParams& p, const CUtensorMap* mapA,
                                         const CUtensorMap* mapB, const SmemLayout<Cfg>& sm, int cluster,
                                         int numClusters, uint32_t ctaRank) {
  const volatile int* abortFlag = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(sm.flags()));
  const Layout& L = p.L;
  dev::PipeState<Cfg::kStages> pipe;
  const int cs = g.clusterSize;
  const int bRows = Cfg::BN / cs;
  const uint32_t bOffset = ctaRank * static_cast<uint32_t>(bRows) * (Cfg::BK * 2);
  const uint16_t mask = static_cast<uint16_t>((1u << cs) - 1u);
  Schedule sched(L, p.rank, cluster, numClusters, static_cast<int>(ctaRank));
  Tile t;
  while (sched.next(t)) {
    // Rows past the chunk (padding M-blocks) load the next chunk's rows or TMA's zero fill.
    const int32_t rowA = static_cast<int32_t>(L.chunkBegin(t.chunk) + int64_t(t.mb) * kTileRows);
    const int32_t rowB = t.nb * Cfg::BN + static_cast<int32_t>(ctaRank) * bRows;
    for (int kb = 0; kb < g.kBlocks; ++kb) {
      const uint32_t s = pipe.stage;
      if (!dev::mbarWait<true>(sm.empty(s), pipe.phase ^ 1u, g.waitTimeoutNs, abortFlag)) {
        gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultProducer);
        return false;
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

// One consumer warpgroup: mainloop, then the ring epilogue of its half of every tile.
template <class Cfg>
__device__ __forceinline__ void consumer(const GemmArgs& g, const RingParams& p, const CUtensorMap* mapC,
                                         const SmemLayout<Cfg>& sm, int half, int cluster, int numClusters,
                                         uint32_t ctaRank) {
  const Layout& L = p.L;
  const uint32_t tid = threadIdx.x % 128u;
  const uint32_t words = sm.flags();
  volatile uint32_t* w = reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(words));
  const uint32_t doneAddr = words + 4u * (CtaWords::kDone0 + half);
  FinalCtx fc{mapC, sm.epi(half), 1u + static_cast<uint32_t>(half), tid, 0};
  const uint64_t want = dev::flagValue(p.comm.seq);
  const int64_t halfOff = half * L.halfBytes();
  float acc[Cfg::kAcc];
  dev::PipeState<Cfg::kStages> pipe;
  Schedule sched(L, p.rank, cluster, numClusters, static_cast<int>(ctaRank));
  uint32_t done = 0;
  bool pending = false;  // AR: the last final tile's TMA stores are not known to be complete
  Tile t;
  uint32_t index = 0;  // this tile's number in the CTA's sequence, from 1
  while (sched.next(t)) {
    ++index;
    if (!consumerMainloop<Cfg>(acc, pipe, g, sm, half, tid & 31u, ctaRank)) break;
    // The previous final tile's stores had a whole mainloop to land: tell the gather team.
    if (pending) {
      if (tid == 0) {
        dev::bulkWait<0>();
        dev::fenceProxyAsyncGlobal();
        stReleaseCtaShared(doneAddr, done + 1);
      }
      ++done;
      pending = false;
    }
    bool in = false;
    if (t.step > 0) {
      if (tid == 0) {
        bool ok = w[CtaWords::kDrain] == 0;
        // Usually the push team has already seen the sum arrive (it prefetched it into L2).
        if (ok && ldAcquireCtaShared(words + 4 * CtaWords::kInReady) < index)
          ok = waitGeqInline(p.comm, p.flags + L.rxSlot(t.step - 1, t.u), want, p.srcLocal, kSiteFusedTile);
        if (!ok) w[CtaWords::kDrain] = 1;
        w[CtaWords::kOk0 + half] = ok ? 1u : 0u;
      }
      dev::namedBarrierSync(fc.barrierId, 128);
      in = w[CtaWords::kOk0 + half] != 0;
    }
    const char* inHalf = in ? p.scratch + L.rxOffset(t.step - 1, t.u) + halfOff : nullptr;
    if (t.step < L.ws - 1) {
      char* out = p.scratch + L.stagingOffset(t.step, t.u) + halfOff;
      if (in) stageTile<Cfg, true>(acc, inHalf, out, tid);
      else stageTile<Cfg, false>(acc, nullptr, out, tid);
      dev::namedBarrierSync(fc.barrierId, 128);  // every thread's stores before the count
      if (tid == 0) stReleaseCtaShared(doneAddr, done + 1);
      ++done;
    } else {
      // RS: C is this rank's rows, counted from the chunk; AR: C is [M, N].
      const int64_t base = L.allReduce() ? L.chunkBegin(t.chunk) : 0;
      const int32_t row0 = static_cast<int32_t>(base + int64_t(t.mb) * kTileRows + half * 64);
      const int32_t col0 = t.nb * Cfg::BN;
      if (in) storeFinal<Cfg, true>(acc, inHalf, fc, row0, col0);
      else storeFinal<Cfg, false>(acc, nullptr, fc, row0, col0);
      if (L.allReduce()) {
        pending = true;
      } else {
        if (tid == 0) stReleaseCtaShared(doneAddr, done + 1);
        ++done;
      }
    }
  }
  if (tid == 0) {
    dev::bulkWait<0>();
    if (pending) {
      dev::fenceProxyAsyncGlobal();
      stReleaseCtaShared(doneAddr, done + 1);
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    ringGemmKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                   const __grid_constant__ CUtensorMap mapC, const __grid_constant__ GemmArgs g,
                   const __grid_constant__ RingParams p) {
  static_assert(SmemLayout<Cfg>::kOffFlags + 4 * CtaWords::kCount <= Cfg::kOffBar + Cfg::kBarrierBytes,
                "the CTA's shared words must fit the barrier area");
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  const uint32_t raw = dev::smemAddr(smemRaw);
  const SmemLayout<Cfg> sm{(raw + 1023u) & ~1023u};
  const int cs = g.clusterSize;
  const uint32_t ctaRank = cs > 1 ? dev::clusterCtaRank() : 0u;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      dev::mbarInit(sm.full(s), 1);
      dev::mbarInit(sm.empty(s), Cfg::kConsumerWarps * cs);
    }
    volatile uint32_t* w = reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(sm.flags()));
    for (uint32_t i = 0; i < CtaWords::kCount; ++i) w[i] = 0;
    dev::fenceBarrierInit();
    // This call has started here, so our earlier kernels are done with our areas: rank+1 may send.
    if (blockIdx.x == 0) dev::storeRelease(p.entryPost, dev::flagValue(p.comm.seq));
  }
  if (cs > 1) dev::clusterSync(); else __syncthreads();

  const int cluster = static_cast<int>(blockIdx.x) / cs;
  const int numClusters = static_cast<int>(gridDim.x) / cs;
  const int wg = static_cast<int>(threadIdx.x / 128u);
  if (wg == 0) {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegDealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      dev::tmaPrefetchMap(&mapA);
      dev::tmaPrefetchMap(&mapB);
      producer<Cfg>(g, p, &mapA, &mapB, sm, cluster, numClusters, ctaRank);
    } else if (threadIdx.x >= 32) {
      const uint32_t q = threadIdx.x - 32u;  // 0..95
      const uint64_t bound = g.waitTimeoutNs;
      if (!p.L.allReduce()) {
        pushTeam<Cfg::BN>(p, Team{q, 96u, kPushBarrier}, sm.flags(), cluster, numClusters, int(ctaRank), bound);
      } else if (q < 32) {
        pushTeam<Cfg::BN>(p, Team{q, 32u, 0u}, sm.flags(), cluster, numClusters, int(ctaRank), bound);
      } else {
        agTeam<Cfg::BN>(p, Team{q - 32u, 64u, kAgBarrier}, sm.flags(), cluster, numClusters, int(ctaRank), bound);
      }
    }
  } else {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegAlloc<kConsumerRegs>();
    consumer<Cfg>(g, p, &mapC, sm, wg - 1, cluster, numClusters, ctaRank);
  }
  // No CTA of a cluster may exit while its peer can still arrive on its barriers or multicast
  // into its shared memory.
  if (cs > 1) dev::clusterSync(); else __syncthreads();
}

}  // namespace rs
}  // namespace mkccl
