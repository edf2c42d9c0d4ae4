// The fused GEMM+ReduceScatter / GEMM+AllReduce kernel: one persistent launch per call (the
// direct reduction of gemm_rs_layout.cuh).
//
// It is the GEMM engine's persistent kernel (src/kernels/gemm: the same tile configuration,
// barriers, mainloop and failure behaviour) with what its hooks cannot express yet:
//   - the tile order and the A rows of a tile come from the fused schedule (rank-dependent, rows
//     counted per chunk, so not multiples of 128 globally);
//   - the epilogue either sends a partial to its owner (staged locally for the push team, which
//     copies it paced by a later mainloop; or bulk stores from shared memory) or adds the other
//     ranks' partials on the way to C, and publishes per-warpgroup counters in shared memory
//     instead of a per-tile hook (a hook that waited for its stores would stall the tensor cores
//     for every NVLink transfer);
//   - the three idle warps of the producer warpgroup raise the owners' flags (bulk) or copy the
//     staged partials (team), and prefetch the final tiles' partials (gemm_rs_copy.cuh).
// Roles of a compute CTA (384 threads, one per SM, clusters of 1 or 2 along M):
//   warp 0, thread 0      TMA producer (the engine's loop, rows from the fused tile; posts its
//                         k-block count, the push team's pacing clock)
//   warps 1..3            RS: the push team (96 threads; bulk: thread 32 alone). AR: warps 1-2
//                         push, then claim AR items; warp 3 claims AR items from the start
//   warpgroups 1, 2       consumers: mainloop, then the epilogue of their 64 rows; AR: then they
//                         claim AR items too (the kernel's tail is the finished tiles' exchange)
// No role waits on another rank inside the GEMM: only epilogues that add partials wait for them
// (the final phase's; ring reduction: every phase after the first), which were sent about one
// phase earlier.
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

constexpr uint32_t kPushBarrier = 3;  // named barriers 1, 2 are the consumers'
// A consumer's unpublished tile (consumer()): none, local bulk stores, bulk stores to a peer.
constexpr int kPendingNone = 0, kPendingLocal = 1, kPendingRemote = 2;
// earlyPublish: local stores are published once this k-block of the next tile is issued.
constexpr int kPublishKBlock = 3;

// Registers per thread after setmaxnreg (BN = 256): the copy warps of the producer warpgroup need
// more than the engine's 56, the consumers fewer than its 224 (no call in their tile path).
// 128 * 72 + 256 * 216 = 64512 = the launch allocation (168 x 384).
constexpr uint32_t kProducerRegs = 72, kConsumerRegs = 216;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 168 * 384, "register budget of a 384-thread CTA");

// The engine's producer loop with the fused schedule's tiles (one thread). False if it gave up.
template <class Cfg>
__device__ __forceinline__ bool producer(const GemmArgs& g, const ReduceParams& p, const CUtensorMap* mapA,
                                         const CUtensorMap* mapB, const SmemLayout<Cfg>& sm, Schedule sched,
                                         uint32_t ctaRank) {
  const volatile int* abortFlag = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(sm.flags()));
  volatile uint32_t* loaded = wordPtr(sm.flags(), CtaWords::kLoaded);  // the push team's pacing clock
  uint32_t issued = 0;
  const Layout& L = p.L;
  dev::PipeState<Cfg::kStages> pipe;
  const int cs = g.clusterSize;
  const int bRows = Cfg::BN / cs;
  const uint32_t bOffset = ctaRank * static_cast<uint32_t>(bRows) * (Cfg::BK * 2);
  const uint16_t mask = static_cast<uint16_t>((1u << cs) - 1u);
  Tile t;
  while (sched.next(t)) {
    // Rows past the chunk (padding M-blocks) load the next chunk's rows or TMA's zero fill.
    const int32_t rowA = static_cast<int32_t>(L.chunkBegin(t.chunk) + int64_t(t.mb) * kTileRows);
    const int32_t rowB = t.nb * Cfg::BN + static_cast<int32_t>(ctaRank) * bRows;
    for (int kb = 0; kb < g.kBlocks; ++kb) {
      const uint32_t s = pipe.stage;
      // CTA-scope wait even with remote arrivals: only TMA follows (mbarrier.cuh).
      if (!dev::mbarWait(sm.empty(s), pipe.phase ^ 1u, g.waitTimeoutNs, abortFlag)) {
        gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultProducer);
        *loaded = ~0u;
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
      *loaded = ++issued;
    }
  }
  *loaded = ~0u;
  return true;
}

// The rx slots tile t adds (Layout::inCount): their count once they have all landed, else 0 (none,
// or a failed wait: the CTA drains). Thread 0 of the warpgroup waits unless the push team saw them
// land (kInReady); the warpgroup's barrier passes its acquires on.
__device__ __forceinline__ int awaitInputs(const ReduceParams& p, uint32_t words, const FinalCtx& fc, int half,
                                           const Tile& t, uint32_t index, uint64_t want) {
  const Layout& L = p.L;
  const int n = L.inCount(t.step);
  if (n == 0) return 0;
  if (fc.tid == 0) {
    bool ok = !draining(words);
    if (ok && ldAcquireCtaShared(words + 4 * CtaWords::kInReady) < index) {
      volatile uint32_t* waiting = wordPtr(words, CtaWords::kWaiting0 + half);  // the push team stops pacing
      *waiting = 1;
      ok = waitInputsLanded(p, t.step, t.u, want);
      *waiting = 0;
    }
    if (!ok) setDrain(words);
    *wordPtr(words, CtaWords::kOk0 + half) = ok ? 1u : 0u;
  }
  dev::namedBarrierSync(fc.barrierId, 128);
  return *wordPtr(words, CtaWords::kOk0 + half) != 0 ? n : 0;
}

// One consumer warpgroup: mainloop, then the epilogue of its half of every tile.
template <class Cfg>
__device__ __forceinline__ void consumer(const GemmArgs& g, const ReduceParams& p, const CUtensorMap* mapC,
                                         const SmemLayout<Cfg>& sm, int half, Schedule sched, uint32_t ctaRank) {
  const Layout& L = p.L;
  const uint32_t tid = threadIdx.x % 128u;
  const uint32_t words = sm.flags();
  const uint32_t doneAddr = words + 4u * (CtaWords::kDone0 + half);
  FinalCtx fc{mapC, sm.epi(half), 1u + static_cast<uint32_t>(half), tid, 0};
  const uint64_t want = dev::flagValue(p.comm.seq);
  const int64_t halfOff = half * L.halfBytes();
  char* const scratch = p.scratchOf[p.rank];
  float acc[Cfg::kAcc];
  dev::PipeState<Cfg::kStages> pipe;
  uint32_t done = 0;
  // The last tile's bulk stores are not known to be complete when its epilogue ends: it is
  // published (counted in kDone) after the next mainloop, so the tensor cores do not wait for
  // them, and always before this warpgroup waits for a peer's partials. With earlyPublish, local
  // stores (a partial staged for the push team; AR: a final tile's TMA stores to C)
  // are published once k-block kPublishKBlock of the next tile is issued instead (the push team
  // then paces by that tile); a bulk send to a peer always waits for the whole next mainloop.
  int pending = kPendingNone;
  auto publish = [&]() {
    if (tid == 0) {
      dev::bulkWait<0>();
      dev::fenceProxyAsyncGlobal();
      stReleaseCtaShared(doneAddr, done + 1);
    }
    ++done;
    pending = kPendingNone;
  };
  auto earlyPublish = [&](int kb) {
    if (kb == kPublishKBlock && pending == kPendingLocal && p.earlyPublish) publish();
  };
  Tile t;
  uint32_t index = 0;  // this tile's number in the CTA's sequence, from 1
  while (sched.next(t)) {
    ++index;
    if (half == 0 && tid == 0) *wordPtr(words, CtaWords::kStarted) = index;
    if (!consumerMainloop<Cfg>(acc, pipe, g, sm, half, tid & 31u, ctaRank, earlyPublish)) break;
    // Whatever is still unpublished had a whole mainloop to land: tell the push team (which
    // copies it on, or raises the owner's flag) or the AR workers.
    if (pending != kPendingNone) publish();
    // What this tile adds (the final phase: the other ranks' partials; ring reduction, every phase
    // after the first: the neighbour's sum). Usually the push team has seen them arrive and
    // prefetched them; else thread 0 waits here. 0 after a failed wait (drain).
    const int nIn = awaitInputs(p, words, fc, half, t, index, want);
    const char* in0 = scratch + L.rxOffset(L.inFirst(t.step), t.u) + halfOff;
    if (t.step < L.ws - 1) {
      const char* add = nIn > 0 ? in0 : nullptr;
      if (p.pushBulk) {
        const int dst = L.sendTo(p.rank, t.step);
        bool send = false;
        if (tid == 0) {
          // Into the owner's memory only once it has entered this call; a failed wait drains.
          // (The ranks seen are kept in shared memory: a register live across the mainloop
          // costs the consumers a spill.)
          volatile uint32_t* entered = wordPtr(words, CtaWords::kEntered0 + half);
          send = !draining(words);
          if (send && !((*entered >> dst) & 1u)) {
            send = waitGeqInline(p.comm, p.entryOf(dst), want, p.localOf[dst], kSiteFusedTile);
            if (send) *entered |= 1u << dst;
            else setDrain(words);
          }
        }
        sendPartial<Cfg>(acc, p.scratchOf[dst] + L.rxOffset(t.step, t.u) + halfOff, send, fc, add);
        pending = kPendingRemote;
        continue;
      }
      // Staged for the push team by bulk stores from shared memory, published during or after
      // the next mainloop (above): the tensor cores do not wait for 64 KiB of stores to drain
      // (stored from registers, the partials cost the GEMM 10-25 us at 2 ranks).
      sendPartial<Cfg>(acc, scratch + L.stagingOffset(t.step, t.u) + halfOff, true, fc, add);
      pending = kPendingLocal;
      continue;
    }
    // RS: C is this rank's rows, counted from the chunk; AR: C is [M, N].
    const int64_t base = L.allReduce() ? L.chunkBegin(t.chunk) : 0;
    const int32_t row0 = static_cast<int32_t>(base + int64_t(t.mb) * kTileRows + half * 64);
    const int32_t col0 = t.nb * Cfg::BN;
    storeFinal<Cfg>(acc, in0, nIn, L.slotStride(), fc, row0, col0);
    if (L.allReduce()) {
      pending = kPendingLocal;
    } else {
      if (tid == 0) stReleaseCtaShared(doneAddr, done + 1);
      ++done;
    }
  }
  if (pending != kPendingNone) publish();
  if (tid == 0) dev::bulkWait<0>();
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    reduceGemmKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                     const __grid_constant__ CUtensorMap mapC, const __grid_constant__ GemmArgs g,
                     const __grid_constant__ ReduceParams p) {
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
    for (uint32_t i = 0; i < CtaWords::kCount; ++i) *wordPtr(sm.flags(), i) = 0;
    dev::fenceBarrierInit();
    // This call has started here, so our earlier kernels are done with our areas: others may send.
    if (blockIdx.x == 0)
      for (int q = 0; q < p.L.ws; ++q)
        if (q != p.rank) dev::storeRelease(p.entrySlotAt(q), dev::flagValue(p.comm.seq));
  }
  if (cs > 1) dev::clusterSync(); else __syncthreads();

  const int cluster = static_cast<int>(blockIdx.x) / cs;
  const int numClusters = static_cast<int>(gridDim.x) / cs;
  const Schedule sched(p.L, p.rank, cluster, numClusters, static_cast<int>(ctaRank));
  const int wg = static_cast<int>(threadIdx.x / 128u);
  const uint64_t bound = g.waitTimeoutNs;
  if (wg == 0) {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegDealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      dev::tmaPrefetchMap(&mapA);
      dev::tmaPrefetchMap(&mapB);
      producer<Cfg>(g, p, &mapA, &mapB, sm, sched, ctaRank);
    } else if (threadIdx.x >= 32) {
      const uint32_t q = threadIdx.x - 32u;  // 0..95
      if (!p.L.allReduce()) {
        pushTeam<Cfg::BN>(p, Team{q, 96u, kPushBarrier}, sm.flags(), sched, g.kBlocks, bound);
      } else {
        if (q < 64) pushTeam<Cfg::BN>(p, Team{q, 64u, kPushBarrier}, sm.flags(), sched, g.kBlocks, bound);
        arWorker<Cfg::BN, 4>(p, q & 31u, sm.flags(), sched, bound);
      }
    }
  } else {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegAlloc<kConsumerRegs>();
    consumer<Cfg>(g, p, &mapC, sm, wg - 1, sched, ctaRank);
    if (p.L.allReduce()) arWorker<Cfg::BN, 8>(p, threadIdx.x & 31u, sm.flags(), sched, bound);
  }
  // No CTA of a cluster may exit while its peer can still arrive on its barriers or multicast
  // into its shared memory.
  if (cs > 1) dev::clusterSync(); else __syncthreads();
  if (p.pushCe && threadIdx.x == 0) ceEndOfKernel(p);
}

}  // namespace rs
}  // namespace mkccl
