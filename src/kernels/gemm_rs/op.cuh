// GEMM+ReduceScatter / GEMM+AllReduce as an op of the GEMM engine (gemm/gemm_kernel.cuh): one
// persistent launch per call, the direct (or ring) reduction of layout.h. What it adds to the
// plain GEMM:
//   Scheduler  the fused order (layout.h: rank-dependent phases, rows counted per chunk, so not
//              multiples of 128 globally);
//   Loads      A rows from the tile's chunk; the producer posts its k-block count (the push team's
//              pacing clock);
//   Epilogue   a tile of another rank's chunk is sent as a partial (staged locally for the push
//              team or the copy engines, or bulk-stored into the owner's memory); a tile of our own
//              chunk adds the partials the other ranks sent (the ring: the neighbour's sum) on its
//              way to C. Completion is published through per-warpgroup counters in shared memory
//              rather than a per-tile hook (a hook that waited for its stores would stall the
//              tensor cores for every NVLink transfer);
//   side warps the producer warpgroup's warps 1..3 raise the owners' flags (bulk), copy the staged
//              partials (team) or count them into copy-engine batches (ce), and prefetch the final
//              tiles' partials (push.cuh); AR: warps 1-2 push, then claim AR items, warp 3 claims
//              AR items from the start;
//   tail       AR: the consumers claim AR items too once their last tile is done (the kernel's tail
//              is the finished tiles' exchange);
//   start/end  block 0 posts this rank's entry into the call to every peer; with copy engines the
//              last CTA to end raises every batch word.
// No role waits on another rank inside the GEMM: only epilogues that add partials wait for them
// (the final phase's; ring reduction: every phase after the first), which were sent about one
// phase earlier.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/gemm/gemm_op.cuh"
#include "kernels/gemm/mainloop.cuh"
#include "kernels/gemm_rs/epilogue.cuh"
#include "kernels/gemm_rs/layout.h"
#include "kernels/gemm_rs/push.cuh"
#include "kernels/gemm_rs/net.cuh"

namespace mkccl {
namespace rs {

constexpr uint32_t kPushBarrier = 3;  // named barriers 1, 2 are the consumers'
// A consumer's unpublished tile: none, local bulk stores, bulk stores to a peer.
constexpr int kPendingNone = 0, kPendingLocal = 1, kPendingRemote = 2;
// earlyPublish: local stores are published once this k-block of the next tile is issued.
constexpr int kPublishKBlock = 3;

// Schedule, built as the engine builds schedulers (kNet: across nodes, net_layout.h).
template <bool kNet>
struct ReduceSchedulerT : ScheduleT<kNet> {
  using Tile = rs::Tile;
  __device__ __forceinline__ ReduceSchedulerT(const GemmArgs&, const ReduceParams& p, int cluster, int numClusters,
                                              int ctaRank)
      : ScheduleT<kNet>(p.L, p.rank, cluster, numClusters, ctaRank) {}
};
using ReduceScheduler = ReduceSchedulerT<false>;

// The producer side: rows from the tile's chunk (padding M-blocks past the chunk load the next
// chunk's rows or TMA's zero fill), and the k-blocks issued (all tiles; ~0 once done).
template <class Cfg, bool kNet = false>
struct ReduceLoads {
  const ReduceParams& p;
  const CUtensorMap* mapA;
  volatile uint32_t* loaded;
  uint32_t count = 0;

  __device__ __forceinline__ ReduceLoads(const GemmArgs&, const ReduceParams& p_, const CUtensorMap* mapA_,
                                         uint32_t words)
      : p(p_), mapA(mapA_), loaded(wordPtr(words, CtaWords::kLoaded)) {}
  __device__ __forceinline__ void prefetch() const { dev::tmaPrefetchMap(mapA); }
  __device__ __forceinline__ TileA a(const Tile& t) const {
    const int64_t row = kNet ? p.L.aRow(t.chunk, t.mb) : p.L.chunkBegin(t.chunk) + int64_t(t.mb) * kTileRows;
    return {mapA, static_cast<int32_t>(row)};
  }
  __device__ __forceinline__ int32_t bRow(const Tile& t) const { return t.nb * Cfg::BN; }
  __device__ __forceinline__ bool wait(const Tile&, int) const { return true; }
  __device__ __forceinline__ void issued() { *loaded = ++count; }
  __device__ __forceinline__ void done() { *loaded = ~0u; }
};

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

// One consumer warpgroup's epilogue of its half of every tile.
// The last tile's bulk stores are not known to be complete when its epilogue ends: it is published
// (counted in kDone) after the next mainloop, so the tensor cores do not wait for them, and always
// before this warpgroup waits for a peer's partials. With earlyPublish, local stores (a partial
// staged for the push team; AR: a final tile's TMA stores to C) are published once k-block
// kPublishKBlock of the next tile is issued instead (the push team then paces by that tile); a
// bulk send to a peer always waits for the whole next mainloop.
template <class Cfg, bool kNet = false>
struct ReduceEpilogue {
  const ReduceParams& p;
  const uint32_t words;
  const int half;
  const uint32_t doneAddr;
  FinalCtx fc;
  const int64_t halfOff;
  char* const scratch;
  uint32_t done = 0;
  uint32_t index = 0;  // this tile's number in the CTA's sequence, from 1
  int pending = kPendingNone;

  __device__ __forceinline__ ReduceEpilogue(const GemmArgs&, const ReduceParams& p_, const CUtensorMap* mapC,
                                            const SmemLayout<Cfg>& sm, int half_)
      : p(p_),
        words(sm.flags()),
        half(half_),
        doneAddr(sm.flags() + 4u * (CtaWords::kDone0 + half_)),
        fc{mapC, sm.epi(half_), 1u + static_cast<uint32_t>(half_), threadIdx.x % 128u, 0},
        halfOff(half_ * p_.L.halfBytes()),
        scratch(p_.scratchOf[p_.rank]) {}

  // This call's flag value, read from the device's call counter where needed rather than held in
  // a register across the mainloop (the consumers have none to spare).
  __device__ __forceinline__ uint64_t want() const { return dev::flagValue(p.callSeq()); }

  __device__ __forceinline__ void publish() {
    if (fc.tid == 0) {
      dev::bulkWait<0>();
      dev::fenceProxyAsyncGlobal();
      stReleaseCtaShared(doneAddr, done + 1);
    }
    ++done;
    pending = kPendingNone;
  }

  __device__ __forceinline__ void begin(const Tile&) {
    ++index;
    if (half == 0 && fc.tid == 0) *wordPtr(words, CtaWords::kStarted) = index;
  }
  __device__ __forceinline__ void afterKBlock(int kb) {
    if (kb == kPublishKBlock && pending == kPendingLocal && p.earlyPublish) publish();
  }

  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const Tile& t) {
    const Layout& L = p.L;
    // Whatever is still unpublished had a whole mainloop to land: tell the push team (which
    // copies it on, or raises the owner's flag) or the AR workers.
    if (pending != kPendingNone) publish();
    // What this tile adds (the final phase: the other ranks' partials; ring reduction, every phase
    // after the first: the neighbour's sum). Usually the push team has seen them arrive and
    // prefetched them; else thread 0 waits here. 0 after a failed wait (drain).
    const int nIn = awaitInputs(p, words, fc, half, t, index, want());
    const char* in0 = scratch + L.rxOffset(L.inFirst(t.step), t.u) + halfOff;
    if (t.step < L.ws - 1) {
      const char* add = nIn > 0 ? in0 : nullptr;
      if (p.pushBulk) {
        const int dst = L.sendTo(p.rank, t.step);
        bool send = false;
        if (fc.tid == 0) {
          // Into the owner's memory only once it has entered this call; a failed wait drains.
          // (The ranks seen are kept in shared memory: a register live across the mainloop
          // costs the consumers a spill.)
          volatile uint32_t* entered = wordPtr(words, CtaWords::kEntered0 + half);
          send = !draining(words);
          if (send && !((*entered >> dst) & 1u)) {
            send = dev::waitGeqInline(p.comm, p.entryOf(dst), want(), p.localOf[dst], kSiteFusedTile);
            if (send) *entered |= 1u << dst;
            else setDrain(words);
          }
        }
        sendPartial<Cfg>(acc, p.scratchOf[dst] + L.rxOffset(t.step, t.u) + halfOff, send, fc, add);
        pending = kPendingRemote;
        return;
      }
      // Staged for the push team by bulk stores from shared memory, published during or after
      // the next mainloop (above): the tensor cores do not wait for 64 KiB of stores to drain
      // (stored from registers, the partials cost the GEMM 10-25 us at 2 ranks).
      sendPartial<Cfg>(acc, scratch + L.stagingOffset(t.step, t.u) + halfOff, true, fc, add);
      pending = kPendingLocal;
      return;
    }
    // RS: C is this rank's rows, counted from the chunk; AR: C is [M, N].
    const int64_t base = L.allReduce() ? L.chunkBegin(t.chunk) : 0;
    const int32_t row0 = static_cast<int32_t>(base + int64_t(t.mb) * kTileRows + half * 64);
    const int32_t col0 = t.nb * Cfg::BN;
    storeFinal<Cfg>(acc, in0, nIn, L.slotStride(), fc, row0, col0);
    // AR, and across nodes (the node sum, which the push team copies on: net.cuh): published once
    // the stores completed.
    if (L.allReduce() || kNet) {
      pending = kPendingLocal;
    } else {
      if (fc.tid == 0) stReleaseCtaShared(doneAddr, done + 1);
      ++done;
    }
  }

  __device__ __forceinline__ void finish() {
    if (pending != kPendingNone) publish();
    if (fc.tid == 0) dev::bulkWait<0>();
  }
};

// kNet: GEMM+ReduceScatter across nodes (net_layout.h, net.cuh), an instantiation of its own.
template <bool kNet>
struct GemmReduceOpT : GemmOpDefaults {
  using Params = ReduceParams;
  using Scheduler = ReduceSchedulerT<kNet>;
  template <class Cfg, class Op>
  using Loads = ReduceLoads<Cfg, kNet>;
  template <class Cfg, class Op>
  using Epilogue = ReduceEpilogue<Cfg, kNet>;

  // The copy warps of the producer warpgroup need more than the engine's 56 registers, the
  // consumers fewer than its 224 (no call in their tile path). 128 x 72 + 256 x 216 = 64512.
  static constexpr uint32_t kProducerRegs = 72, kConsumerRegs = 216;
  static constexpr uint32_t kSharedWords = CtaWords::kCount;

  // This call has started here, so our earlier kernels are done with our areas: others may send.
  static constexpr bool kStart = true;
  // AR in place (p.direct): first the info words (where each peer stores into our C, how many
  // bytes C has; kernels/coll/direct_rule.h), which the entry's release publishes; the entry
  // carries kDirectEntry then, so that a peer in the other mode is told apart (arWorker).
  __device__ static void start(const GemmArgs&, const Params& p, uint32_t) {
    if (blockIdx.x != 0) return;
    if (p.direct) {
      uint64_t* w = reinterpret_cast<uint64_t*>(dev::dataOf(p.comm, p.localOf[p.rank]));
      for (int q = 0; q < p.L.ws; ++q) {
        uint64_t* wq = w + coll::kDirectInfoWords * p.localOf[q];
        dev::storeRelaxed(wq + 0, 0);
        dev::storeRelaxed(wq + 1, uint64_t(p.L.M) * uint64_t(p.L.N) * 2);
        dev::storeRelaxed(wq + 2, coll::regWord(p.regIndex, p.regOff));
      }
      __threadfence_system();
    }
    for (int q = 0; q < p.L.ws; ++q)
      if (q != p.rank) dev::storeRelease(p.entrySlotAt(q), p.entryValue());
    if constexpr (kNet) netStart(p);  // across nodes: our window's in slots are free
  }

  static constexpr bool kSideWarps = true;
  template <class Cfg>
  __device__ static void sideWarps(const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                   const Scheduler& sched, uint32_t q, int) {
    if (!p.L.allReduce()) {
      pushTeam<Cfg::BN, kNet>(p, Team{q, 96u, kPushBarrier}, sm.flags(), sched, g.kBlocks, g.waitTimeoutNs);
      if constexpr (kNet) netAddWorker<typename Cfg::In>(p, q & 31u, sm.flags());
    } else if constexpr (!kNet) {
      if (q < 64) pushTeam<Cfg::BN>(p, Team{q, 64u, kPushBarrier}, sm.flags(), sched, g.kBlocks, g.waitTimeoutNs);
      arWorker<Cfg::BN, 4>(p, q & 31u, sm.flags(), sched, g.waitTimeoutNs);
    }
  }

  static constexpr bool kConsumerTail = true;
  template <class Cfg>
  __device__ static void consumerTail(const GemmArgs& g, const Params& p, const SmemLayout<Cfg>& sm,
                                      const Scheduler& sched, uint32_t tid) {
    if constexpr (kNet) netAddWorker<typename Cfg::In>(p, tid & 31u, sm.flags());
    else if (p.L.allReduce()) arWorker<Cfg::BN, 8>(p, tid & 31u, sm.flags(), sched, g.waitTimeoutNs);
  }

  static constexpr bool kEnd = true;
  __device__ static void end(const GemmArgs&, const Params& p) {
    if (p.pushCe) ceEndOfKernel(p);
  }
};
using GemmReduceOp = GemmReduceOpT<false>;

}  // namespace rs
}  // namespace mkccl
