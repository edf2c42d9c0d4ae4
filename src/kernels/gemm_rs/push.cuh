// GEMM+RS/AR communication, run by the idle warps of every compute CTA (the producer warpgroup's
// warps 1..3; for AR also the consumers once their last tile is done). The partials themselves
// are staged locally and copied by these warps (gemm_rs.push=team, the default), or leave
// from the consumers' shared memory by bulk stores (=bulk; epilogue.cuh: sendPartial).
//
//   pushTeam  walks the CTA's own schedule, the same tiles in the same order as its consumers.
//             A tile of phase j < ws-1, bulk: once the consumers' counters say both
//             halves' bulk stores into the owner's rx slot (j, u) completed, raise the owner's
//             flag (thread 0 alone). Team (default): once the counters say its bulk stores
//             into our staging slot completed (after the consumers' next mainloop, or early in
//             it), copy it to the owner's rx slot, paced by a later mainloop (paceUntil), fence,
//             raise the flag. A tile that adds partials (the final phase; ring reduction, every
//             phase after the first): once the consumers started it, wait for their flags and
//             prefetch them into L2, then tell the consumers (their epilogue reads them).
//             Copy engines (=ce): once staged, the tile is counted in its batch (slot j, B
//             tiles); the batch's last one raises the batch's word, which a copy stream of ours
//             waits for (cuStreamWaitValue64) before it copies the batch to the owner and raises
//             the owner's flag (ops/gemm_rs/ce.cu). The last CTA to end raises every word, so that no
//             copy stream waits forever after a failed call.
//   arWorker  AR, one warp: claims items of the CTA's final tiles from a shared counter. Item
//             (n, 0) copies our finished tile #n from C to every other rank's ag slot and raises
//             their flags; item (n, s) copies the tile of chunk (r + s) mod ws that its owner sent
//             us from our ag slot into C. In place (C registered on every rank, ReduceParams.direct)
//             item (n, 0) stores the tile straight into every other rank's C, where that rank's
//             info word (kernels/coll/direct_rule.h, posted by `start` before its entry) says, and
//             item (n, s) only waits for the owner's flag: no ag slot, no copy. Before it sends,
//             item (n, 0) checks that every other rank entered in the same mode (its entry's
//             sub-value, kDirectEntry in place, 0 otherwise) and, in place, names the same
//             registration and size of C; a mismatch records mkcclInvalidUsage
//             (kSiteDirectMismatch) and sends nothing.
// Before its first write into rank q's memory a warp waits for q's entry into this call (q is then
// done with every earlier call's use of that memory). A failed wait (recorded as dev::waitGeq does)
// puts the CTA in drain mode: nothing more is sent, missing partials are skipped, the GEMM runs
// out and the kernel ends; the host reports the error.
#pragma once
#include <stdint.h>
#include "kernels/device/signal.cuh"
#include "kernels/device/team.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/gemm_rs/layout.h"
#include "kernels/abi/devcomm.h"
#include "kernels/abi/direct_site.h"
#include "kernels/coll/direct_rule.h"

namespace mkccl {
namespace rs {

// What the kernel's communication needs (by value in kernel parameters). Indexed by rank: the
// communicator is one node, so every rank is a local peer.
struct ReduceParams {
  DevComm comm;
  Layout L;
  int rank;
  int localOf[kMaxLocalRanks];      // rank -> local index (error reports, barrier slots)
  char* scratchOf[kMaxLocalRanks];  // each rank's share of the scratch region, mapped here
  const uint64_t* rxFlags;          // our rx flags (Layout::rxFlag): from kOpFlagSlot of our flags,
                                    // raised to the call's flag value by the SM pushes; under the
                                    // copy-engine push our scratch's (ceRxFlagsOffset), raised to
                                    // kCeValue (ops/gemm_rs/ce.cu)
  uint64_t* wsOf[kMaxLocalRanks];   // each rank's workspace flags, mapped here
  char* C;                          // the user's output (AR: [M, N]; RS: [M/ws, N])
  int pushBulk;                     // 1: the consumers bulk-store partials to their owners
                                    // (gemm_rs.push=bulk); 0: staged, the push team copies
  int earlyPublish;                 // 1: staged tiles published a few k-blocks into the next
                                    // tile, paced by it (gemm_rs.publish=early)
  int pushCe;                       // 1: staged, counted in batches, copied by our copy streams
                                    // (gemm_rs.push=ce; L.ceBatch > 0)
  const uint64_t* seqCtr;           // this rank's call counter (kSeqSlot): the call's number, which a
                                    // graph replay must not take from `comm.seq` (signal.cuh)
  // AR in place (C registered, docs/GRAPHS.md): finished tiles go straight into every other
  // rank's C (regBase[q] + the offset q posts in its info words).
  int direct;
  int regIndex;                     // the registration's index (the same on every rank)
  uint64_t regOff;                  // C's byte offset in it
  char* regBase[kMaxLocalRanks];    // rank q's registration, mapped here
  // Across nodes (L.subs > 1; gemm_rs.net=fused, net_layout.h): ranks above are the node's, by
  // local index; the final tiles' TMA stores go to netArea (our scratch's net area, also C's map),
  // and netOut is the user's C, which the node sums' sum fills (net.cuh).
  char* netArea;
  char* netOut;

  // This call's entry value (in place: flagValue(s, kDirectEntry)).
  __device__ __forceinline__ uint64_t entryValue() const {
    return dev::flagValue(callSeq(), direct ? coll::kDirectEntry : 0);
  }

  __device__ __forceinline__ uint64_t callSeq() const { return dev::peekCallSeqAt(seqCtr); }

  __device__ __forceinline__ uint64_t* opFlags(int q) const { return wsOf[q] + kOpFlagSlot; }

  // Our barrier slot that rank q posts its entry into, and q's slot we post ours into.
  __device__ __forceinline__ const uint64_t* entryOf(int q) const { return wsOf[rank] + kBarrierSlot + localOf[q]; }
  __device__ __forceinline__ uint64_t* entrySlotAt(int q) const { return wsOf[q] + kBarrierSlot + localOf[rank]; }
};

// Shared-memory words of a compute CTA (SmemLayout::flags(), after the engine's two).
struct CtaWords {
  static constexpr uint32_t kAbort = 0, kDrain = 1;  // the engine's
  static constexpr uint32_t kDone0 = 2;              // + consumer: tiles of its sequence in global memory
  static constexpr uint32_t kOk0 = 4;                // + consumer: its partials arrived (this tile)
  static constexpr uint32_t kPushOk = 6;             // push team verdict (this tile)
  static constexpr uint32_t kInReady = 7;            // the push team saw the partials of tile #n arrive
  static constexpr uint32_t kStarted = 8;            // the consumers started tile #n (pacing only)
  static constexpr uint32_t kArNext = 9;             // AR: next item to claim
  static constexpr uint32_t kEntered0 = 10;          // + consumer, bulk: ranks whose entry it saw
  static constexpr uint32_t kLoaded = 12;            // k-blocks the producer issued (all tiles); ~0: done
  static constexpr uint32_t kWaiting0 = 13;          // + consumer: waiting for another rank's partials
  static constexpr uint32_t kCount = 15;
};

// How many of a final tile's partials the push team prefetches into L2 (ws - 1 of them arrive;
// more than 3 x 64 KiB per SM would crowd the GEMM's operands out of L2).
constexpr int kPrefetchInputs = 3;

__device__ __forceinline__ void stReleaseCtaShared(uint32_t addr, uint32_t v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ldAcquireCtaShared(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ volatile uint32_t* wordPtr(uint32_t words, uint32_t slot) {
  return reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(words)) + slot;
}

// Pulls `bytes` (a multiple of 16) at p into L2: a hint, the data is read later by ordinary loads.
// Issued in 16 KiB pieces (bulk operations of modest size).
__device__ __forceinline__ void prefetchL2(const char* p, uint32_t bytes) {
  for (uint32_t off = 0; off < bytes; off += 16384u) {
    const uint32_t n = bytes - off < 16384u ? bytes - off : 16384u;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
  }
}

// The copy-engine push's batch words and rx flags: cleared by the caller's stream before each call
// (ops/gemm_rs/gemm_rs.cu), then raised to this constant.
constexpr uint64_t kCeValue = 1;

// Until every rx slot that a tile of phase `step` adds (Layout::inCount / inFirst) has landed for
// tile u; false after a failed (bounded, recorded) wait. The push team's thread 0 waits so before
// it prefetches them, a consumer's thread 0 where the team has not (awaitInputs).
__device__ __forceinline__ bool waitInputsLanded(const ReduceParams& p, int step, int u, uint64_t want) {
  const Layout& L = p.L;
  const int first = L.inFirst(step), n = L.inCount(step);
  bool ok = true;
  for (int j = first; ok && j < first + n; ++j)
    ok = dev::waitGeqInline(p.comm, p.rxFlags + L.rxFlag(j, u), p.pushCe ? kCeValue : want, p.localOf[L.senderOf(p.rank, j)],
                       kSiteFusedTile);
  return ok;
}

using dev::Team;

__device__ __forceinline__ bool draining(uint32_t words) { return *wordPtr(words, CtaWords::kDrain) != 0; }
__device__ __forceinline__ void setDrain(uint32_t words) { *wordPtr(words, CtaWords::kDrain) = 1; }

// Until both consumer warpgroups have published `tiles` tiles (kDone0/1), or, `started`, until
// they started tile `tiles`. Bounded (a consumer that gave up sets the CTA's abort word); false
// on failure (recorded as an internal error: a bug).
__device__ __forceinline__ bool waitConsumers(const DevComm& comm, uint32_t words, uint32_t tiles, uint64_t timeoutNs,
                                              bool started) {
  uint64_t start = 0;
  unsigned backoff = 32;
  while (true) {
    uint32_t a, b;
    if (started) {
      a = b = *wordPtr(words, CtaWords::kStarted);
    } else {
      a = ldAcquireCtaShared(words + 4 * CtaWords::kDone0);
      b = ldAcquireCtaShared(words + 4 * (CtaWords::kDone0 + 1));
    }
    if (a >= tiles && b >= tiles) return true;
    if (*wordPtr(words, CtaWords::kAbort) != 0) return false;
    const uint64_t now = dev::globalTimerNs();
    if (start == 0) start = now;
    if (now - start > timeoutNs) {
      dev::recordError(comm, /*mkcclInternalError*/ 3, -1, kSiteFusedTile, a < b ? a : b, tiles);
      return false;
    }
    __nanosleep(backoff);
    if (backoff < 512) backoff <<= 1;
  }
}

// Sends are paced by the GEMM's own progress. Every SM ends its tiles at about the same moment, so
// unpaced, all of them push a tile's partial (64 KiB) at once, far beyond what NVLink drains, and
// the queued stores appear to hold up the next mainloop's loads (2xH200, fused RS: the sends cost
// 57-73 us of GEMM time; four staging buffers for the bulk path did not help, so it is not the
// epilogue waiting for its buffers). Piece j of n of the tile staged as #index (published once
// the consumers finished tile #index+1; earlyPublish: a few k-blocks into it) leaves once the
// producer has issued kPaceNum/kPaceDen x j/n of tile #index+2's (earlyPublish: #index+1's)
// k-blocks: a CTA's partial goes out over most of a mainloop instead of at its start (2xH200:
// 8192^3 792 -> 762 us; spreading over 2/3 to all of the tile time measured the same). A team
// that has fallen behind finds its thresholds passed and copies at once.
constexpr uint32_t kPaceNum = 3, kPaceDen = 4;

// Until the producer has issued `target` k-blocks of the CTA's sequence (it posts ~0 when it has
// issued its last). Pacing only: gives up (and lets the copy go) on an abort, after timeoutNs, and
// while a consumer waits for another rank's partials. That last one keeps pacing from closing a
// cycle: the clock is a later tile's loads, which stall while a final tile's epilogue waits, and
// that wait may be for a rank whose own copies are paced the same way (2xH200, the spread order
// with a one-wave lag: 993 us at 8192^3 instead of ~790 before this exit).
__device__ __forceinline__ void paceUntil(uint32_t words, uint32_t target, uint64_t timeoutNs) {
  if (*wordPtr(words, CtaWords::kLoaded) >= target) return;
  const uint64_t start = dev::globalTimerNs();
  while (*wordPtr(words, CtaWords::kLoaded) < target && *wordPtr(words, CtaWords::kAbort) == 0 &&
         *wordPtr(words, CtaWords::kWaiting0) == 0 && *wordPtr(words, CtaWords::kWaiting0 + 1) == 0 &&
         dev::globalTimerNs() - start < timeoutNs)
    __nanosleep(256);
}

// Thread 0 decided; every thread of the team gets the verdict (the word is rewritten only after
// the team's next sync, so reading it between the two syncs of an iteration is safe).
__device__ __forceinline__ bool teamVerdict(const Team& t, uint32_t words, uint32_t slot, bool mine) {
  if (t.tid == 0) *wordPtr(words, slot) = mine ? 1u : 0u;
  t.sync();
  return *wordPtr(words, slot) != 0;
}

// Across nodes (net.cuh, included after this file by op.cuh).
template <int kBN>
__device__ __forceinline__ uint64_t netFinalTile(const ReduceParams& p, Team t, uint32_t words, int mb, int nb,
                                                 uint32_t index, uint64_t timeoutNs);
template <int kBN>
__device__ __forceinline__ void netDrain(const ReduceParams& p, uint64_t ticket);

template <int kBN, bool kNet = false>
__device__ void pushTeam(const ReduceParams& p, const Team& t, uint32_t words, ScheduleT<kNet> sched, int kBlocks,
                         uint64_t timeoutNs) {
  const Layout& L = p.L;
  // Read where needed, not held in a register across the loop (these warps have 72).
  auto want = [&p] { return dev::flagValue(p.callSeq()); };
  const bool bulk = p.pushBulk != 0, ce = p.pushCe != 0;
  // Flags, counts and prefetches: one thread, no team syncs (unless some slots go by the team).
  if ((bulk || ce) && t.tid != 0) return;
  Tile tile;
  uint32_t index = 0, entered = 0;  // entered: ranks whose entry thread 0 has seen
  uint64_t netTicket = 0;           // across nodes: 1 + thread 0's last put's ticket (netFinalTile)
  while (sched.next(tile)) {
    ++index;
    // Tiles are taken in order, so every flag of an earlier tile is raised before this thread
    // waits for the partials of a final one (and the consumers published those tiles before
    // they wait themselves), and a final tile comes after every rank's sends of it at the same
    // positions of the order: no wait can close a cycle between ranks.
    // A tile that adds rx slots (the final phase; ring reduction: every phase after the first):
    // thread 0 alone (the others go on to the send and wait for it there) waits for them once the
    // consumers started the tile and prefetches them.
    const int nIn = L.inCount(tile.step);
    if (nIn > 0 && t.tid == 0 && !draining(words)) {
      const int first = L.inFirst(tile.step);
      const bool ok = waitConsumers(p.comm, words, index, timeoutNs, /*started=*/true) &&
                      waitInputsLanded(p, tile.step, tile.u, want());
      if (ok) {
        for (int j = first; j < first + nIn && j < first + kPrefetchInputs; ++j)
          prefetchL2(p.scratchOf[p.rank] + L.rxOffset(j, tile.u), uint32_t(L.tileBytes()));
        // The consumers then skip their own (system-scope) polls: these acquires, passed on at CTA scope.
        stReleaseCtaShared(words + 4 * CtaWords::kInReady, index);
      } else {
        setDrain(words);
      }
    }
    if (tile.step == L.ws - 1) {  // our own chunk: nothing to send in the node
      if constexpr (kNet) {
        const uint64_t put = netFinalTile<kBN>(p, t, words, tile.mb, tile.nb, index, timeoutNs);
        if (put != 0) netTicket = put;
      }
      continue;
    }
    const int dst = L.sendTo(p.rank, tile.step);
    if (bulk) {
      // The consumers waited for dst's entry and sent both halves; their counter says the bulk
      // stores completed (bulkWait + proxy fence, then a CTA-scope release). Drain: the
      // consumers may have skipped the send, so no flag.
      if (draining(words)) continue;
      if (!waitConsumers(p.comm, words, index, timeoutNs, false)) {
        setDrain(words);
        continue;
      }
      if (draining(words)) continue;
      dev::fenceSys();  // what the consumers' release passed on, before the flag
      dev::storeRelease(p.opFlags(dst) + L.rxSlot(tile.step, tile.u), want());
      continue;
    }
    bool ok = false;
    if (t.tid == 0) {
      ok = !draining(words) && waitConsumers(p.comm, words, index, timeoutNs, false);
      if (ok && !((entered >> dst) & 1u)) {
        ok = dev::waitGeqInline(p.comm, p.entryOf(dst), want(), p.localOf[dst], kSiteFusedTile);
        if (ok) entered |= 1u << dst;
      }
      if (!ok) setDrain(words);
    }
    if (ce) {
      // Thread 0 alone. Staged (the consumers' counter) and the owner entered (our copy stream
      // writes into its slot once the batch's word is up): count the tile. Drain: not counted
      // (the words go up at the kernel's end).
      if (!ok) continue;
      uint64_t* own = p.opFlags(p.rank);
      const int b = tile.u / L.ceBatch;
      dev::fenceSys();  // the staged tile (passed on by the consumers' release) before the count
      const unsigned long long seen =
          atomicAdd(reinterpret_cast<unsigned long long*>(own + L.ceCountSlot(tile.step, b)), 1ull);
      if (seen + 1 == static_cast<unsigned long long>(L.ceBatchTiles(b))) {
        dev::fenceSys();  // every count's tile (their fences, then their adds) before the word
        dev::storeRelease(own + L.ceWordSlot(tile.step, b), kCeValue);
      }
      continue;
    }
    const bool go = teamVerdict(t, words, CtaWords::kPushOk, ok);
    if (go) {
      constexpr int kUnroll = 6;
      uint4* to = reinterpret_cast<uint4*>(p.scratchOf[dst] + L.rxOffset(tile.step, tile.u));
      const uint4* from = reinterpret_cast<const uint4*>(p.scratchOf[p.rank] + L.stagingOffset(tile.step, tile.u));
      const int64_t nvec = L.tileBytes() / 16, piece = kUnroll * int64_t(t.n);
      // Paced by the tile after the one during which the consumers published this one.
      const uint32_t pieces = uint32_t((nvec + piece - 1) / piece),
                     next = (index + (p.earlyPublish ? 0u : 1u)) * uint32_t(kBlocks);
      for (uint32_t j = 0; j < pieces; ++j) {
        paceUntil(words, next + (j * uint32_t(kBlocks) * kPaceNum) / (pieces * kPaceDen), timeoutNs);
        const int64_t off = int64_t(j) * piece;
        dev::teamCopy<kUnroll>(t, to + off, from + off, nvec - off < piece ? nvec - off : piece);
      }
      dev::fenceSys();  // our stores to the owner before the flag (cumulative through the sync)
    }
    t.sync();
    if (go && t.tid == 0) dev::storeRelease(p.opFlags(dst) + L.rxSlot(tile.step, tile.u), want());
  }
  if constexpr (kNet) {
    if (netTicket != 0) netDrain<kBN>(p, netTicket - 1);
  }
}

// Copy engines: the last CTA to end raises every batch word (already up after a good call), so
// that our copy streams, which have no timeout of their own, never wait past the kernel. One
// thread per CTA, after the CTA's last sync.
__device__ __forceinline__ void ceEndOfKernel(const ReduceParams& p) {
  const Layout& L = p.L;
  uint64_t* own = p.opFlags(p.rank);
  dev::fenceSys();
  const unsigned long long ended = atomicAdd(reinterpret_cast<unsigned long long*>(own + L.ceDoneSlot()), 1ull);
  if (ended + 1 != gridDim.x) return;
  dev::fenceSys();
  for (int j = 0; j < L.ws - 1; ++j)  // every slot has a copy stream
    for (int b = 0; b < L.ceBatches(); ++b)
      if (dev::loadAcquire(own + L.ceWordSlot(j, b)) < kCeValue) dev::storeRelease(own + L.ceWordSlot(j, b), kCeValue);
}

// Rows of tile (mb, nb) of chunk c that lie in the output, and its first row (AR chunks are whole
// tiles: only M clips).
__device__ __forceinline__ int tileRows(const Layout& L, int c, int mb, int64_t* r0) {
  *r0 = L.chunkBegin(c) + int64_t(mb) * kTileRows;
  return int(max64(0, min64(kTileRows, L.chunkEnd(c) - *r0)));
}

// AR item (n, 0), one warp: our finished tile (rows x vpr vectors of C from `src`, row pitch ldc
// vectors) to the ag slot (row-major, pitch kVpr) of every other rank, kUnroll loads in flight per
// lane, each stored to every destination. 32-bit indices: a tile has at most 128 x 32 vectors.
template <int kVpr, int kUnroll>
__device__ __forceinline__ void sendFinished(const ReduceParams& p, uint32_t lane, const uint4* src, int64_t ldc,
                                             int rows, int vpr, int64_t dstOffset) {
  const int ws = p.L.ws;
  const int total = rows * kVpr;
  for (int e0 = int(lane); e0 < total; e0 += kUnroll * 32) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = e0 + u * 32;
      if (e < total && e % kVpr < vpr) r[u] = __ldcg(src + (e / kVpr) * ldc + e % kVpr);
    }
    for (int d = 1; d < ws; ++d) {
      uint4* dst = reinterpret_cast<uint4*>(p.scratchOf[(p.rank + d) % ws] + dstOffset) + e0;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int e = e0 + u * 32;
        if (e < total && e % kVpr < vpr) dst[u * 32] = r[u];
      }
    }
  }
}

// AR item (n, 0) in place, one warp: the same tile straight into every other rank's C (pitch ldc
// vectors there too); lane d - 1 holds the byte offset of the tile's place in rank (rank + d)'s
// registration (checkPeersInPlace).
template <int kVpr, int kUnroll>
__device__ __forceinline__ void sendFinishedInPlace(const ReduceParams& p, uint32_t lane, const uint4* src,
                                                    int64_t ldc, int rows, int vpr, uint64_t myOff) {
  const int ws = p.L.ws;
  const int total = rows * kVpr;
  // Every lane runs every round (the shuffles below need the whole warp).
  for (int b = 0; b < total; b += kUnroll * 32) {
    const int e0 = b + int(lane);
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = e0 + u * 32;
      if (e < total && e % kVpr < vpr) r[u] = __ldcg(src + (e / kVpr) * ldc + e % kVpr);
    }
    for (int d = 1; d < ws; ++d) {
      const uint64_t off = __shfl_sync(0xffffffffu, myOff, d - 1);
      uint4* dst = reinterpret_cast<uint4*>(p.regBase[(p.rank + d) % ws] + off);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int e = e0 + u * 32;
        if (e < total && e % kVpr < vpr) dst[(e / kVpr) * ldc + e % kVpr] = r[u];
      }
    }
  }
}

// Every lane of a warp, after lane 0 saw every other rank's entry: lane d - 1 checks rank
// (rank + d): the same mode (entry sub-value), and in place the same registration and size of C;
// returns in *off where C starts in that rank's registration. False on every lane if any rank
// differs (recorded: mkcclInvalidUsage, kSiteDirectMismatch).
__device__ __forceinline__ bool checkPeersInPlace(const ReduceParams& p, uint32_t lane, uint64_t* off) {
  const int ws = p.L.ws;
  bool ok = true;
  *off = 0;
  if (int(lane) < ws - 1) {
    const int q = (p.rank + 1 + int(lane)) % ws;
    const uint64_t want = p.entryValue();
    uint64_t seen = dev::loadAcquire(p.entryOf(q)), expect = want;
    if (seen == want && p.direct) {
      const uint64_t* w = reinterpret_cast<const uint64_t*>(dev::dataOf(p.comm, p.localOf[q])) +
                          coll::kDirectInfoWords * p.localOf[p.rank];
      const uint64_t len = dev::loadRelaxed(w + 1), dst = dev::loadRelaxed(w + 2);
      const uint64_t bytes = uint64_t(p.L.M) * uint64_t(p.L.N) * 2;
      if (len != bytes) {
        seen = len;
        expect = bytes;
      } else if (coll::regWordIndex(dst) != p.regIndex) {
        seen = dst >> 48;
        expect = uint64_t(p.regIndex + 1);
      }
      *off = coll::regWordOffset(dst);
    }
    if (seen != expect) {
      dev::recordError(p.comm, /*mkcclInvalidUsage*/ 5, p.localOf[q], kSiteDirectMismatch, seen, expect);
      ok = false;
    }
  }
  return __all_sync(0xffffffffu, ok ? 1 : 0) != 0;
}

// AR item (n, s > 0), one warp: a received tile (ag slot, row-major, pitch kVpr) into C.
template <int kVpr, int kUnroll>
__device__ __forceinline__ void copyReceived(uint32_t lane, uint4* dst, int64_t ldc, const uint4* src, int rows,
                                             int vpr) {
  const int total = rows * kVpr;
  for (int e0 = int(lane); e0 < total; e0 += kUnroll * 32) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = e0 + u * 32;
      if (e < total && e % kVpr < vpr) r[u] = __ldcg(src + e);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = e0 + u * 32;
      if (e < total && e % kVpr < vpr) dst[(e / kVpr) * ldc + e % kVpr] = r[u];
    }
  }
}

// One warp (see the file comment). Item (n, s) is number n * ws + s; those of tiles that are not
// final are claimed and dropped (a shared-memory atomic each: cheaper than finding the CTA's k-th
// final tile in an order where they are spread). Items are claimed in order, so an item (n, 0) is
// always taken before any (n, s > 0): every rank's sends of tile n are under way before anyone
// waits for them.
template <int kBN, int kUnroll>
__device__ __forceinline__ void arWorker(const ReduceParams& p, uint32_t lane, uint32_t words, const Schedule& sched,
                                         uint64_t timeoutNs) {
  constexpr int kVpr = kBN / 8;  // 16-byte vectors per tile row
  const Layout& L = p.L;
  const int ws = L.ws;
  // Read where needed, not held in a register across the loop (these warps have 72).
  auto want = [&p] { return dev::flagValue(p.callSeq()); };
  const int64_t ldc = L.N / 8;  // C's row pitch in vectors (N is a multiple of 8)
  const int64_t items = int64_t(sched.count()) * ws;
  unsigned* next = reinterpret_cast<unsigned*>(__cvta_shared_to_generic(words + 4 * CtaWords::kArNext));
  while (true) {
    unsigned item = 0;
    if (lane == 0) item = atomicAdd(next, 1u);
    item = __shfl_sync(0xffffffffu, item, 0);
    if (int64_t(item) >= items) break;
    const int n = int(int64_t(item) / ws);
    const int s = int(int64_t(item) - int64_t(n) * ws);
    if (sched.stepAt(n) != ws - 1) continue;
    Tile tile;
    sched.at(n, tile);
    const uint32_t index = uint32_t(n + 1);
    const int c = (p.rank + s) % ws;  // s == 0: our own chunk
    const int64_t col0 = int64_t(tile.nb) * kBN;
    const int vpr = int(min64(kBN, L.N - col0) / 8);
    int64_t r0 = 0;
    const int rows = tileRows(L, c, tile.mb, &r0);
    if (rows == 0) continue;  // a padding tile past M: neither side sends or waits
    bool ok = false;
    if (lane == 0) {
      ok = !draining(words);
      if (s == 0) {
        // Our tile is in C (its TMA stores completed), and every other rank has entered.
        if (ok) ok = waitConsumers(p.comm, words, index, timeoutNs, false);
        for (int d = 1; ok && d < ws; ++d) {
          const int q = (p.rank + d) % ws;
          ok = dev::waitGeqInline(p.comm, p.entryOf(q), want(), p.localOf[q], kSiteFusedTile);
        }
      } else if (ok) {
        ok = dev::waitGeqInline(p.comm, p.opFlags(p.rank) + L.agSlot(c, tile.u), want(), p.localOf[c], kSiteFusedTile);
      }
      if (!ok) setDrain(words);
    }
    __syncwarp();  // lane 0's acquires before every lane's reads
    if (__shfl_sync(0xffffffffu, ok ? 1 : 0, 0) == 0) continue;
    if (s == 0) {
      const uint4* src = reinterpret_cast<const uint4*>(p.C + (r0 * L.N + col0) * 2);
      uint64_t off = 0;
      if (!checkPeersInPlace(p, lane, &off)) {
        if (lane == 0) setDrain(words);
        continue;
      }
      if (p.direct)
        sendFinishedInPlace<kVpr, kUnroll>(p, lane, src, ldc, rows, vpr, off + uint64_t(r0 * L.N + col0) * 2);
      else
        sendFinished<kVpr, kUnroll>(p, lane, src, ldc, rows, vpr, L.agOffset(p.rank, tile.u));
      dev::fenceSys();
      __syncwarp();
      if (lane == 0)
        for (int d = 1; d < ws; ++d) dev::storeRelease(p.opFlags((p.rank + d) % ws) + L.agSlot(p.rank, tile.u), want());
    } else if (!p.direct) {  // in place the owner stored it into our C already
      copyReceived<kVpr, kUnroll>(lane, reinterpret_cast<uint4*>(p.C + (r0 * L.N + col0) * 2), ldc,
                                  reinterpret_cast<const uint4*>(p.scratchOf[p.rank] + L.agOffset(c, tile.u)), rows,
                                  vpr);
    }
  }
}

}  // namespace rs
}  // namespace mkccl
