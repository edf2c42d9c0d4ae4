// AllGather+GEMM communication, run by "teams" of threads: whole CTAs (dedicated comm CTAs, the
// sequential plan's gather kernel) or the three idle warps of a compute CTA's producer warpgroup
// (whose thread 0 issues the TMA loads), so that the fused kernel can push without taking SMs
// away from the GEMM. Layout and counters: layout.h.
//
// Protocol of a call (seq s, F = flagValue(s, 0)); counters: layout.h. (The ce plan
// keeps "enter" and the counters; its pushes are copy-engine copies, ops/ag_gemm/ce.cu.)
//   enter   one team per rank, the leader, sets this rank's counters (work queues, arrivals) to F,
//           then posts its entry (F) in every rank's barrier slot [me] (signal.cuh's slots), its
//           own included. Every team waits for the entries of the ranks it will write to, and for
//           its own rank's: a sender writes into rank p's region only after p has started this
//           call (so p's earlier kernels, which read its region, are done, and p's counters are
//           at F before the first add), and nobody claims work before the queues are reset. The
//           fused kernel's producers also wait for their own rank's entry before they first read
//           a counter: until the reset a counter word holds whatever the region held.
//   push    teams claim slices of the own shard from a work queue (in order: the shard goes out
//           front to back), copy each slice to every receiver (peers' regions; also this rank's
//           region and the user's gathered A when asked) with 16-byte loads and stores by every
//           thread, fence at system scope, then add to each receiver's counter of the chunks the
//           slices belong to (red.release.sys).
//   gather  when the user wants the gathered A: teams claim peers' slices in arrival order, wait
//           for their chunk, copy them from this rank's region (L2-only loads).
// In place (gatheredA registered on every rank, PushArgs.direct): the pushes go straight into each
// peer's gatheredA, the tiles read this rank's gatheredA, and there is no gather-out. The leader
// then posts, before its entry, the collectives' info words (kernels/coll/direct_rule.h: where
// each peer writes into my registration) and its entries carry flagValue(s, kDirectEntry). In both
// modes the leader posts its own entry only after it has seen every peer's entry and checked that
// the peer is in the same mode (and, in place, names the same registration and shard size); it
// records the verdict and the peers' offsets in this rank's data region first (kAgOffWord,
// kAgFailWord), so every team and producer, which waits for the own entry, reads them. A peer
// cannot leave call s before this rank's own entry (it needs this rank's shard, pushed only after
// that entry), so the leader always reads the peer's entry and words of call s. On a mismatch the
// error is mkcclInvalidUsage (kSiteDirectMismatch) on every rank and nothing is pushed.
// Across nodes (PushArgs::net.nodes > 1): the entries and pushes above are among this node's
// ranks (indexed by local rank); shards and counters are by global rank; the other nodes' shards
// arrive through the network and are spread over NVLink by net.cuh's roles. In place is one node only.
// Work queues hold F + items claimed; items are only claimed by running teams, so a CTA that is
// not resident yet holds no work. Every wait is dev::waitGeq (bounded; on failure the team stops
// and the error is recorded).
#pragma once
#include <stdint.h>
#include "kernels/abi/devcomm.h"
#include "kernels/abi/direct_site.h"
#include "kernels/ag_gemm/layout.h"
#include "kernels/ag_gemm/net_layout.h"
#include "kernels/coll/direct_rule.h"
#include "kernels/device/signal.cuh"
#include "kernels/device/team.cuh"

namespace mkccl {
namespace ag {

using dev::Team;

// What the communication of a call needs (by value in kernel parameters).
struct PushArgs {
  DevComm dev;
  Layout L;
  const char* A;                      // this rank's shard, the user's A
  char* region[kMaxLocalRanks];       // rank q's gathered-A region, mapped here
  uint64_t* counters[kMaxLocalRanks]; // rank q's counters (in its region, after the gathered A)
  uint64_t* flags[kMaxLocalRanks];    // rank q's flags region (its barrier slots: entries)
  char* gathered;                     // the user's gathered A, or null
  int gatheredOwn;                    // push the own shard into `gathered` too (0 when in place)
  int ownToRegion;                    // push the own shard into this rank's region too
  int ce;                             // the copy engines move the shards (ce plan, ops/ag_gemm/ce.cu)
  uint64_t* ceGo;                     // ce: this rank's go word for its copy-engine streams
  const uint64_t* seqCtr;             // this rank's call counter (kSeqSlot): the call's number, which a
                                      // graph replay must not take from `dev.seq` (signal.cuh)
  // In place (gatheredA registered, docs/GRAPHS.md): region[me] is this rank's gatheredA, and a
  // push to peer q goes to regBase[q] + the offset q posts (its info word for this rank).
  int direct;
  int regIndex;                       // the registration's index (the same on every rank)
  uint64_t regOff;                    // gatheredA's byte offset in it
  char* regBase[kMaxLocalRanks];      // rank q's registration, mapped here
  // The ranks reached over NVLink: this node's lws ranks; this rank is local rank lme. The arrays
  // above are indexed by local rank. In one node lws == L.ws and lme == L.me.
  int lws, lme;
  NetLayout net;                      // across nodes (net.nodes > 1, dev.net set): net.cuh
  const float* aScales;               // fp8 block scales (L.scaleRowBytes > 0): this rank's shard's scale
                                      // rows, the user's; they go where its rows go (layout.h)

  __device__ __forceinline__ uint64_t callSeq() const { return dev::peekCallSeqAt(seqCtr); }
  // What the arrival counters start from in this call. The copy engines write constants that the
  // host enqueued once (a graph replays them as they are), so under the ce plan the counters start
  // from 0 and a chunk is complete at exactly its slice count; the SM pushes add to the call's F.
  __device__ __forceinline__ uint64_t counterBase() const { return ce ? 0 : dev::flagValue(callSeq(), 0); }
};

// The ce plan's go word: the caller's stream clears it before the kernel, the leader sets it to
// this constant once the call is entered, the copy-engine streams wait for it (ops/ag_gemm/ce.cu).
constexpr uint64_t kCeGoValue = 1;

constexpr int kCopyUnroll = 4;  // 16-byte loads in flight per thread (8 spills at the side team's 72 registers)
constexpr int kMaxDsts = kMaxLocalRanks + 1;

// Receiver i of this rank's pushes, by local rank (lws ranks in the node, this one lme): peers
// lme+1, lme+2, ... (so senders start on different receivers), then this rank itself when the own
// shard goes to its region.
MKCCL_HD int localReceiverAt(int lws, int lme, int i) {
  if (i == lws - 1) return lme;
  const int q = lme + 1 + i;
  return q >= lws ? q - lws : q;
}
// The same in one node (rank == local rank).
MKCCL_HD int receiverAt(const Layout& L, int i) { return localReceiverAt(L.ws, L.me, i); }

// This rank's words in its own data region, after the collectives' info words: the offset in
// peer q's registration where this rank's shard goes (kAgOffWord + q), and the call's verdict
// (kAgFailWord: nonzero when a peer is in the other mode or names other buffers). Written by the
// leader before its own entry, read after it.
constexpr int kAgOffWord = coll::kDirectInfoWords * kMaxLocalRanks;
constexpr int kAgFailWord = kAgOffWord + kMaxLocalRanks;

__device__ __forceinline__ uint64_t* agWords(const PushArgs& p) {
  return reinterpret_cast<uint64_t*>(dev::dataOf(p.dev, p.lme));
}

// The leader's thread 0, once peer q has entered call s (want: this rank's own entry value): is q
// in the same mode, and in place, does it name the same registration and shard size? Records
// mkcclInvalidUsage otherwise. Keeps the offset q posted for this rank.
__device__ __forceinline__ bool checkPeer(const PushArgs& p, int q, uint64_t want) {
  const Layout& L = p.L;
  const uint64_t v = dev::loadAcquire(p.flags[p.lme] + kBarrierSlot + q);
  uint64_t seen = v, expect = want;
  if (v == want) {
    if (!p.direct) return true;
    const uint64_t* w = reinterpret_cast<const uint64_t*>(dev::dataOf(p.dev, q)) + coll::kDirectInfoWords * p.lme;
    const uint64_t len = dev::loadRelaxed(w + 1), dst = dev::loadRelaxed(w + 2);
    if (len == static_cast<uint64_t>(L.shardBytes()) && coll::regWordIndex(dst) == p.regIndex) {
      dev::storeRelaxed(agWords(p) + kAgOffWord + q, coll::regWordOffset(dst));
      return true;
    }
    seen = len != static_cast<uint64_t>(L.shardBytes()) ? len : dst >> 48;
    expect = len != static_cast<uint64_t>(L.shardBytes()) ? static_cast<uint64_t>(L.shardBytes()) : p.regIndex + 1;
  }
  dev::recordError(p.dev, /*mkcclInvalidUsage*/ 5, q, kSiteDirectMismatch, seen, expect);
  return false;
}

// The leader's start of the call, then every team's wait for the entries it needs.
__device__ __forceinline__ bool enterCall(const PushArgs& p, const Team& t, bool leader) {
  const Layout& L = p.L;
  const uint64_t s = p.callSeq();
  const uint64_t F = dev::flagValue(s, 0);
  const uint64_t E = dev::flagValue(s, p.direct ? coll::kDirectEntry : 0);
  const uint64_t* entries = p.flags[p.lme] + kBarrierSlot;
  uint64_t* words = agWords(p);
  if (leader) {
    uint64_t* mine = p.counters[p.lme];
    const uint64_t base = p.counterBase();
    for (int i = static_cast<int>(t.tid); i < L.slotsUsed(); i += static_cast<int>(t.n))
      dev::storeRelaxed(mine + i, base);
    if (p.direct && t.tid < static_cast<uint32_t>(p.lws)) {
      // The collectives' info words for peer t: where its shard goes in my gatheredA.
      uint64_t* w = words + coll::kDirectInfoWords * t.tid;
      dev::storeRelaxed(w + 0, 0);
      dev::storeRelaxed(w + 1, static_cast<uint64_t>(L.shardBytes()));
      dev::storeRelaxed(w + 2, coll::regWord(p.regIndex, p.regOff + t.tid * static_cast<uint64_t>(L.shardBytes())));
    }
    __threadfence_system();
    t.sync();
    if (t.tid < static_cast<uint32_t>(p.lws) && t.tid != static_cast<uint32_t>(p.lme))
      dev::storeRelease(p.flags[t.tid] + kBarrierSlot + p.lme, E);
  }
  bool ok = true;
  if (t.tid == 0) {
    // Peers, then this rank (receiverAt(ws - 1)); the leader checks each peer and posts its own
    // entry just before that last wait. Keep this a single wait call in a loop: with a second call
    // site here ptxas spends many minutes and gigabytes on the fused kernel (seen with ptxas 13.0;
    // check the build time of ag_gemm_bf16.cu after touching this file).
    bool same = true;
    for (int i = 0; i < p.lws && ok; ++i) {
      const int q = localReceiverAt(p.lws, p.lme, i);
      if (leader && q == p.lme) {
        dev::storeRelaxed(words + kAgFailWord, same ? 0 : 1);
        __threadfence_system();
        dev::storeRelease(p.flags[p.lme] + kBarrierSlot + p.lme, E);
      }
      ok = dev::waitGeq(p.dev, entries + q, F, q, kSiteBarrier);
      if (ok && leader && q != p.lme && same) same = checkPeer(p, q, E);
    }
    if (ok && dev::loadRelaxed(words + kAgFailWord) != 0) ok = false;
  }
  return dev::teamBroadcast(t, ok ? 1 : 0) != 0;
}

// The scale area of local rank q's region (fp8 block scales): reached through q's counters, which
// point into its region in every mode (in place, region[me] is the user's gatheredA instead).
MKCCL_HD char* scaleArea(const PushArgs& p, int q) {
  return reinterpret_cast<char*>(p.counters[q]) + p.L.scalesFromCounters();
}

// fp8 block scales: the scale rows of shard rows [r0, r1) into the first `receivers` receivers'
// scale areas, at this shard's rows. Called between a slice's row copy and the fence and counter
// adds that publish it, which then publish the scales too. In 4-byte words: a row of scales is
// ceil(K / 128) floats, rarely a multiple of 16 bytes (a slice's scales are ~1/32 of its bytes).
__device__ __forceinline__ void pushScaleRows(const PushArgs& p, const Team& t, int r0, int r1, int receivers) {
  const Layout& L = p.L;
  const int64_t words = L.scaleRowBytes / 4, n = (r1 - r0) * words;
  const float* src = p.aScales + r0 * words;
  const int64_t at = (static_cast<int64_t>(L.me) * L.m + r0) * L.scaleRowBytes;
  for (int i = 0; i < receivers; ++i) {
    float* dst = reinterpret_cast<float*>(scaleArea(p, localReceiverAt(p.lws, p.lme, i)) + at);
    for (int64_t j = t.tid; j < n; j += t.n) dst[j] = src[j];
  }
}

// Pushes claimed slices until the shard is out. unit: slices per claim.
__device__ __forceinline__ void pushShard(const PushArgs& p, const Team& t, int unit) {
  const Layout& L = p.L;
  const uint64_t F = dev::flagValue(p.callSeq(), 0);
  uint64_t* mine = p.counters[p.lme];
  const int receivers = p.lws - 1 + (p.ownToRegion ? 1 : 0);
  __shared__ char* dsts[kMaxDsts];
  if (t.tid == 0) {
    const int64_t at = L.me * L.shardBytes();  // the shard's place in every gathered A
    for (int i = 0; i < receivers; ++i) {
      const int q = localReceiverAt(p.lws, p.lme, i);
      // In place: straight into peer q's gatheredA, where q said (its offset includes `at`).
      dsts[i] = p.direct && q != p.lme ? p.regBase[q] + dev::loadRelaxed(agWords(p) + kAgOffWord + q)
                                      : p.region[q] + at;
    }
    if (p.gatheredOwn) dsts[receivers] = p.gathered + at;
  }
  const int nd = receivers + (p.gatheredOwn ? 1 : 0);
  while (true) {
    const int g0 = static_cast<int>(dev::teamBroadcast(t, t.tid == 0 ? dev::claim(mine + L.pushClaimSlot(), F, unit) : 0));
    if (g0 >= L.nSlices) return;
    const int g1 = minI(g0 + unit, L.nSlices);
    const int64_t off = L.sliceRowBegin(g0) * L.rowBytes;
    const int64_t len = (L.sliceRowEnd(g1 - 1) - L.sliceRowBegin(g0)) * L.rowBytes;
    dev::teamCopyMulti<kCopyUnroll>(t, dsts, nd, off, p.A + off, len);
    if (L.scaleRowBytes > 0) pushScaleRows(p, t, L.sliceRowBegin(g0), L.sliceRowEnd(g1 - 1), receivers);
    __threadfence_system();  // this thread's stores reach every receiver before the counters move
    t.sync();
    if (t.tid < static_cast<uint32_t>(receivers)) {
      uint64_t* counters = p.counters[localReceiverAt(p.lws, p.lme, static_cast<int>(t.tid))];
      for (int c = L.chunkOfSlice(g0); c <= L.chunkOfSlice(g1 - 1); ++c)
        dev::addRelease(counters + L.chunkSlot(L.me, c), static_cast<uint64_t>(L.slicesIn(c, g0, g1)));
    }
  }
}

// Thread 0: waits until sender q's chunks holding shard rows [r0, r1) have landed here.
__device__ __forceinline__ bool waitRows(const PushArgs& p, int q, int r0, int r1) {
  const Layout& L = p.L;
  const uint64_t base = p.counterBase();
  const uint64_t* mine = p.counters[p.lme];
  for (int c = L.chunkOfRow(r0); c <= L.chunkOfRow(r1 - 1); ++c)
    if (!dev::waitGeq(p.dev, mine + L.chunkSlot(q, c), base + static_cast<uint64_t>(L.slicesOfChunk(c)), q,
                      kSiteGemmChunk))
      return false;
  return true;
}

// Copies peers' shards from this rank's region to the user's gathered A as they land.
__device__ __forceinline__ bool gatherOut(const PushArgs& p, const Team& t, int unit) {
  const Layout& L = p.L;
  if (p.gathered == nullptr || p.direct || L.ws == 1) return true;  // in place: the pushes wrote it
  const uint64_t F = dev::flagValue(p.callSeq(), 0);
  uint64_t* mine = p.counters[p.lme];
  const int peers = L.ws - 1;
  const int items = peers * L.nSlices;  // slice-major: arrival order
  while (true) {
    const int i0 = static_cast<int>(dev::teamBroadcast(t, t.tid == 0 ? dev::claim(mine + L.gatherClaimSlot(), F, unit) : 0));
    if (i0 >= items) return true;
    const int i1 = minI(i0 + unit, items);
    for (int i = i0; i < i1; ++i) {
      const int g = i / peers;
      int q = L.me + 1 + (i - g * peers);
      if (q >= L.ws) q -= L.ws;
      const int r0 = L.sliceRowBegin(g), r1 = L.sliceRowEnd(g);
      const bool ok = t.tid == 0 ? waitRows(p, q, r0, r1) : true;
      if (dev::teamBroadcast(t, ok ? 1 : 0) == 0) return false;
      const int64_t at = (static_cast<int64_t>(q) * L.m + r0) * L.rowBytes;
      dev::teamCopy<kCopyUnroll>(t, reinterpret_cast<uint4*>(p.gathered + at),
                                   reinterpret_cast<const uint4*>(p.region[p.lme] + at), (r1 - r0) * L.rowBytes / 16);
    }
  }
}

// Thread 0 of worker w of nw: waits for its share of the peers' chunks (the sequential plan,
// before its GEMM reads the region).
__device__ __forceinline__ bool waitArrivals(const PushArgs& p, const Team& t, int w, int nw) {
  const Layout& L = p.L;
  bool ok = true;
  if (t.tid == 0) {
    const int n = (L.ws - 1) * L.nChunks;
    for (int i = w; i < n && ok; i += nw) {
      const int j = i / L.nChunks, c = i - j * L.nChunks;
      int q = L.me + 1 + j;
      if (q >= L.ws) q -= L.ws;
      const int r0 = c * L.chunkRows();
      ok = waitRows(p, q, r0, minI(r0 + L.chunkRows(), L.m));
    }
  }
  return dev::teamBroadcast(t, ok ? 1 : 0) != 0;
}

}  // namespace ag
}  // namespace mkccl

// The network roles (across nodes), which use the pieces above.
#include "kernels/ag_gemm/net.cuh"

namespace mkccl {
namespace ag {

// A team's whole part of a call. leader: exactly one team per rank and call. Never inlined: with
// it inlined into the GEMM kernel, ptxas takes many minutes and gigabytes on the whole kernel. The
// team comes by value (by reference it would live on the stack).
// ce: the copy engines move the shards (their streams wait for the go word); the leader's team only
// enters the call and then releases them, also after a failed wait (recorded as the call's error)
// so that they never wait for ever: the copies then land in whatever state the peers are in.
static __device__ __noinline__ bool commTeam(const PushArgs& p, Team t, bool leader, int unit) {
  const bool entered = enterCall(p, t, leader);
  if (p.ce) {
    if (leader && t.tid == 0) {
      __threadfence_system();
      dev::storeRelease(p.ceGo, kCeGoValue);
    }
    return entered;
  }
  if (!entered) return false;
  if (p.net.nodes <= 1) {
    pushShard(p, t, unit);
    return gatherOut(p, t, unit);
  }
  // Across nodes: the own shard onto the network first (the slowest link), then over NVLink to
  // this node's ranks, then the pieces that arrive from the other nodes (net.cuh).
  uint64_t ticket = 0;
  bool put = false;
  if (!netSend(p, t, leader, &ticket, &put)) return false;
  pushShard(p, t, unit);
  if (!netSpread(p, t) || !gatherOut(p, t, unit)) return false;
  const bool ok = t.tid == 0 && put ? dev::netWaitSent(p.dev, ticket) : true;
  return dev::teamBroadcast(t, ok ? 1 : 0) != 0;
}

}  // namespace ag
}  // namespace mkccl
