// AllGather+GEMM communication, run by "teams" of threads: whole CTAs (dedicated comm CTAs, the
// sequential plan's gather kernel) or the three idle warps of a compute CTA's producer warpgroup
// (whose thread 0 issues the TMA loads), so that the fused kernel can push without taking SMs
// away from the GEMM. Layout and counters: ag_gemm_layout.cuh.
//
// Protocol of a call (seq s, F = flagValue(s, 0)); counters: ag_gemm_layout.cuh. (The ce plan
// keeps "enter" and the counters; its pushes are copy-engine copies, ag_gemm_ce.cu.)
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
//           region and the user's gathered A when asked), fence at system scope, then add to each
//           receiver's counter of the chunks the slices belong to (red.release.sys).
//           Two ways to move the bytes: every thread of the team with 16-byte loads and stores
//           (side teams; MKCCL_AG_GEMM_PUSH=threads), or, in a team that has shared memory to
//           spare (dedicated comm CTAs, the gather kernel), a few "lanes" (one thread each) that
//           stream their claims through shared memory with the bulk-copy engine (pushBulk).
//   gather  when the user wants the gathered A: teams claim peers' slices in arrival order, wait
//           for their chunk, copy them from this rank's region (L2-only loads).
// Work queues hold F + items claimed; items are only claimed by running teams, so a CTA that is
// not resident yet holds no work. Every wait is dev::waitGeq (bounded; on failure the team stops
// and the error is recorded).
#pragma once
#include <stdint.h>
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/fused/ag_gemm_layout.cuh"
#include "runtime/devcomm.h"

namespace mkccl {
namespace ag {

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
  int bulk;                           // teams with shared memory push with bulk copies (pushBulk)
  int ce;                             // the copy engines move the shards (ce plan, ag_gemm_ce.cu)
  uint64_t* ceGo;                     // ce: this rank's go word for its copy-engine streams
};

// Threads [0, n) of a team (n a multiple of 32) and the named barrier they share.
struct Team {
  uint32_t tid, n, bar;
};

__device__ __forceinline__ void teamSync(const Team& t) { dev::namedBarrierSync(t.bar, t.n); }

// A team barrier that also tells whether any thread passed v = true. Warps must be converged.
__device__ __forceinline__ bool teamAny(const Team& t, bool v) {
  uint32_t r;
  asm volatile(
      "{\n\t.reg .pred p, q;\n\t"
      "setp.ne.u32 p, %1, 0;\n\t"
      "bar.red.or.pred q, %2, %3, p;\n\t"
      "selp.u32 %0, 1, 0, q;\n\t}"
      : "=r"(r)
      : "r"(v ? 1u : 0u), "r"(t.bar), "r"(t.n)
      : "memory");
  return r != 0;
}

// Thread 0's value, seen by every thread of the team. One team per CTA uses it at a time.
__device__ __forceinline__ int64_t teamBroadcast(const Team& t, int64_t v) {
  __shared__ int64_t word;
  if (t.tid == 0) word = v;
  teamSync(t);
  const int64_t r = word;
  teamSync(t);
  return r;
}

__device__ __forceinline__ int64_t claim(uint64_t* queue, uint64_t base, int64_t unit) {
  return static_cast<int64_t>(
      atomicAdd(reinterpret_cast<unsigned long long*>(queue), static_cast<unsigned long long>(unit)) - base);
}

constexpr int kCopyUnroll = 4;  // 16-byte loads in flight per thread (8 spills at the side team's 72 registers)
constexpr int kMaxDsts = kMaxLocalRanks + 1;

// dsts[o] + off <- src[0, n) for o < nd, one read of the source; n and every address 16-byte
// aligned. dsts is a shared-memory array (the same for every thread). Plain stores: the caller
// fences before it publishes.
__device__ __forceinline__ void teamCopyMulti16(char* const* dsts, int nd, int64_t off, const char* src, int64_t n,
                                                const Team& t) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  const int64_t nvec = n / 16, stride = t.n;
  int64_t i = t.tid;
  for (; i + (kCopyUnroll - 1) * stride < nvec; i += kCopyUnroll * stride) {
    uint4 r[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) r[u] = __ldcg(s + i + u * stride);
    for (int o = 0; o < nd; ++o) {
      uint4* d = reinterpret_cast<uint4*>(dsts[o] + off);
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) d[i + u * stride] = r[u];
    }
  }
  for (; i < nvec; i += stride) {
    const uint4 r = __ldcg(s + i);
    for (int o = 0; o < nd; ++o) reinterpret_cast<uint4*>(dsts[o] + off)[i] = r;
  }
}

// dst[0, n) <- src[0, n), 16-byte aligned, L2-only loads (src was written by peers).
__device__ __forceinline__ void teamCopy16(char* dst, const char* src, int64_t n, const Team& t) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  const int64_t nvec = n / 16, stride = t.n;
  int64_t i = t.tid;
  for (; i + (kCopyUnroll - 1) * stride < nvec; i += kCopyUnroll * stride) {
    uint4 r[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) r[u] = __ldcg(s + i + u * stride);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) d[i + u * stride] = r[u];
  }
  for (; i < nvec; i += stride) d[i] = __ldcg(s + i);
}

// Receiver i of this rank's pushes: peers me+1, me+2, ... (so senders start on different
// receivers), then this rank itself when the own shard goes to its region.
MKCCL_AG_HD int receiverAt(const Layout& L, int i) {
  if (i == L.ws - 1) return L.me;
  const int q = L.me + 1 + i;
  return q >= L.ws ? q - L.ws : q;
}

// The leader's start of the call, then every team's wait for the entries it needs.
__device__ __forceinline__ bool enterCall(const PushArgs& p, const Team& t, bool leader) {
  const Layout& L = p.L;
  const uint64_t F = dev::flagValue(p.dev.seq, 0);
  const uint64_t* entries = p.flags[L.me] + kBarrierSlot;
  if (leader) {
    uint64_t* mine = p.counters[L.me];
    for (int i = static_cast<int>(t.tid); i < L.slotsUsed(); i += static_cast<int>(t.n)) dev::storeRelaxed(mine + i, F);
    __threadfence_system();
    teamSync(t);
    if (t.tid < static_cast<uint32_t>(L.ws)) dev::storeRelease(p.flags[t.tid] + kBarrierSlot + L.me, F);
  }
  bool ok = true;
  if (t.tid == 0) {
    // Peers, then this rank (receiverAt(ws - 1)). Keep this a single wait call in a loop: with a
    // second call site here ptxas spends many minutes and gigabytes on the fused kernel (seen with
    // ptxas 13.0; check the build time of ag_gemm_bf16.cu after touching this file).
    for (int i = 0; i < L.ws && ok; ++i) {
      const int q = receiverAt(L, i);
      ok = dev::waitGeq(p.dev, entries + q, F, q, kSiteBarrier);
    }
  }
  return teamBroadcast(t, ok ? 1 : 0) != 0;
}

// Pushes claimed slices until the shard is out. unit: slices per claim.
__device__ __forceinline__ void pushShard(const PushArgs& p, const Team& t, int unit) {
  const Layout& L = p.L;
  const uint64_t F = dev::flagValue(p.dev.seq, 0);
  uint64_t* mine = p.counters[L.me];
  const int receivers = L.ws - 1 + (p.ownToRegion ? 1 : 0);
  __shared__ char* dsts[kMaxDsts];
  if (t.tid == 0) {
    const int64_t at = L.me * L.shardBytes();  // the shard's place in every gathered A
    for (int i = 0; i < receivers; ++i) dsts[i] = p.region[receiverAt(L, i)] + at;
    if (p.gatheredOwn) dsts[receivers] = p.gathered + at;
  }
  const int nd = receivers + (p.gatheredOwn ? 1 : 0);
  while (true) {
    const int g0 = static_cast<int>(teamBroadcast(t, t.tid == 0 ? claim(mine + L.pushClaimSlot(), F, unit) : 0));
    if (g0 >= L.nSlices) return;
    const int g1 = minI(g0 + unit, L.nSlices);
    const int64_t off = L.sliceRowBegin(g0) * L.rowBytes;
    const int64_t len = (L.sliceRowEnd(g1 - 1) - L.sliceRowBegin(g0)) * L.rowBytes;
    teamCopyMulti16(dsts, nd, off, p.A + off, len, t);
    __threadfence_system();  // this thread's stores reach every receiver before the counters move
    teamSync(t);
    if (t.tid < static_cast<uint32_t>(receivers)) {
      uint64_t* counters = p.counters[receiverAt(L, static_cast<int>(t.tid))];
      for (int c = L.chunkOfSlice(g0); c <= L.chunkOfSlice(g1 - 1); ++c)
        dev::addRelease(counters + L.chunkSlot(L.me, c), static_cast<uint64_t>(L.slicesIn(c, g0, g1)));
    }
  }
}

// Shared memory a team may give the bulk push: [base, base + bytes) in the shared window, base
// 128-byte aligned. bytes = 0: the team pushes with its threads.
struct BulkSmem {
  uint32_t base, bytes;
};

// The bulk push: each lane (one thread, lane 0 of warps 0, 1, ...) claims slices like a thread
// team and streams them in pieces through its own ring of stages: a bulk load of the piece from
// the user's A into a stage (completes on the stage's mbarrier), then one bulk store of the stage
// per receiver (one bulk group per piece). Loads run up to kBulkStages - 1 pieces ahead of the
// stores; a stage is reloaded once its stores have read it. A claim is published after its
// stores have been performed (bulkWait<0>) and made visible to generic loads, then as the thread
// teams do. Several lanes per CTA keep one lane's drain at the end of its claim from idling the
// CTA's stream. 16 KiB pieces x 3 stages x 4 lanes: 192 KiB of stages, up to ~600 KiB of stores
// in flight per CTA without spending registers or issue slots on them.
constexpr uint32_t kBulkPieceBytes = 16 << 10;
constexpr int kBulkStages = 3;
constexpr int kBulkMaxLanes = 4;
constexpr uint32_t kBulkLaneBytes = kBulkStages * kBulkPieceBytes;
constexpr uint32_t kBulkBarrierBytes = 128;  // kBulkMaxLanes * kBulkStages mbarriers
constexpr uint32_t kBulkSmemBytes = kBulkBarrierBytes + kBulkMaxLanes * kBulkLaneBytes;  // what 4 lanes need
static_assert(kBulkMaxLanes * kBulkStages * 8 <= kBulkBarrierBytes, "bulk barrier area");

// Lanes that `bytes` of shared memory hold in a team of `threads` (0: push with threads).
MKCCL_AG_HD int bulkLanes(uint32_t bytes, uint32_t threads) {
  if (bytes < kBulkBarrierBytes + kBulkLaneBytes) return 0;
  return minI(minI(kBulkMaxLanes, static_cast<int>((bytes - kBulkBarrierBytes) / kBulkLaneBytes)),
              static_cast<int>(threads / 32));
}

// One lane's part of the bulk push (one thread). dsts: the team's shared array. False when a load
// did not complete within the communicator's timeout (recorded as its error). The loads read
// local memory, so the wait does not give up on an abort: a lane never leaves with a load still
// writing its stages (like the thread teams, it pushes on after an abort; receivers give up).
__device__ __forceinline__ bool bulkLane(const PushArgs& p, char* const* dsts, int nd, int receivers, uint32_t stages,
                                         uint32_t bars, int unit, const volatile int* neverSet) {
  const Layout& L = p.L;
  const uint64_t F = dev::flagValue(p.dev.seq, 0);
  uint64_t* mine = p.counters[L.me];
  for (int s = 0; s < kBulkStages; ++s) dev::mbarInit(bars + 8u * s, 1);
  dev::fenceBarrierInit();
  uint32_t k = 0;  // pieces this lane loaded before the current claim (stage k % S, phase k / S)
  bool ok = true;
  while (ok) {
    const int g0 = static_cast<int>(claim(mine + L.pushClaimSlot(), F, unit));
    if (g0 >= L.nSlices) break;
    const int g1 = minI(g0 + unit, L.nSlices);
    const int64_t off = L.sliceRowBegin(g0) * L.rowBytes;
    const int64_t len = (L.sliceRowEnd(g1 - 1) - L.sliceRowBegin(g0)) * L.rowBytes;
    const int n = static_cast<int>((len + kBulkPieceBytes - 1) / kBulkPieceBytes);
    // Piece j of the claim: stage (k + j) % S. Every stage is free here (the last claim waited for
    // all its stores).
    auto load = [&](int j) {
      const uint32_t s = (k + static_cast<uint32_t>(j)) % kBulkStages;
      const uint32_t bytes = static_cast<uint32_t>(minI64(kBulkPieceBytes, len - int64_t{j} * kBulkPieceBytes));
      dev::mbarArriveExpectTx(bars + 8u * s, bytes);
      dev::bulkLoad1d(stages + s * kBulkPieceBytes, p.A + off + int64_t{j} * kBulkPieceBytes, bytes,
                      bars + 8u * s);
    };
    for (int j = 0; j < minI(kBulkStages, n); ++j) load(j);
    for (int j = 0; j < n; ++j) {
      const uint32_t kk = k + static_cast<uint32_t>(j), s = kk % kBulkStages;
      if (!dev::mbarWait(bars + 8u * s, (kk / kBulkStages) & 1u, p.dev.timeoutNs, neverSet)) {
        dev::recordError(p.dev, /*mkcclTimeout*/ 8, L.me, kSiteAllGather, 0, 0);
        ok = false;
        break;
      }
      const int64_t at = off + int64_t{j} * kBulkPieceBytes;
      const uint32_t bytes = static_cast<uint32_t>(minI64(kBulkPieceBytes, len - int64_t{j} * kBulkPieceBytes));
      const uint32_t src = stages + s * kBulkPieceBytes;
      for (int o = 0; o < nd; ++o) dev::bulkStore1d(dsts[o] + at, src, bytes);
      dev::bulkCommit();
      // Reload the stage of the previous piece once its stores have read it (the newest group,
      // this piece's, may still be reading).
      if (j >= 1 && j - 1 + kBulkStages < n) {
        dev::bulkWaitRead<1>();
        load(j - 1 + kBulkStages);
      }
    }
    k += static_cast<uint32_t>(n);
    dev::bulkWait<0>();  // the stores are performed (and every stage is free again)
    if (!ok) break;
    dev::fenceProxyAsyncGlobal();  // async-proxy writes before the generic release below
    __threadfence_system();
    for (int i = 0; i < receivers; ++i) {
      uint64_t* counters = p.counters[receiverAt(L, i)];
      for (int c = L.chunkOfSlice(g0); c <= L.chunkOfSlice(g1 - 1); ++c)
        dev::addRelease(counters + L.chunkSlot(L.me, c), static_cast<uint64_t>(L.slicesIn(c, g0, g1)));
    }
  }
  return ok;
}

// pushShard through the bulk-copy engine (sm.bytes must hold at least one lane). False when a
// lane failed (the team then stops, as after a failed wait).
__device__ __forceinline__ bool pushBulk(const PushArgs& p, const Team& t, int unit, BulkSmem sm) {
  const Layout& L = p.L;
  const int receivers = L.ws - 1 + (p.ownToRegion ? 1 : 0);
  __shared__ char* dsts[kMaxDsts];
  __shared__ int zero;  // the lanes' mbarrier waits have no abort word (bulkLane)
  if (t.tid == 0) {
    const int64_t at = L.me * L.shardBytes();
    for (int i = 0; i < receivers; ++i) dsts[i] = p.region[receiverAt(L, i)] + at;
    if (p.gatheredOwn) dsts[receivers] = p.gathered + at;
    zero = 0;
  }
  teamSync(t);
  const int nd = receivers + (p.gatheredOwn ? 1 : 0);
  const int lanes = bulkLanes(sm.bytes, t.n);
  const int lane = static_cast<int>(t.tid / 32);
  bool failed = false;
  if (t.tid % 32 == 0 && lane < lanes)
    failed = !bulkLane(p, dsts, nd, receivers, sm.base + kBulkBarrierBytes + lane * kBulkLaneBytes,
                       sm.base + 8u * kBulkStages * lane, unit, &zero);
  __syncwarp();
  return !teamAny(t, failed);
}

// Thread 0: waits until sender q's chunks holding shard rows [r0, r1) have landed here.
__device__ __forceinline__ bool waitRows(const PushArgs& p, int q, int r0, int r1) {
  const Layout& L = p.L;
  const uint64_t F = dev::flagValue(p.dev.seq, 0);
  const uint64_t* mine = p.counters[L.me];
  for (int c = L.chunkOfRow(r0); c <= L.chunkOfRow(r1 - 1); ++c)
    if (!dev::waitGeq(p.dev, mine + L.chunkSlot(q, c), F + static_cast<uint64_t>(L.slicesOfChunk(c)), q,
                      kSiteGemmChunk))
      return false;
  return true;
}

// Copies peers' shards from this rank's region to the user's gathered A as they land.
__device__ __forceinline__ bool gatherOut(const PushArgs& p, const Team& t, int unit) {
  const Layout& L = p.L;
  if (p.gathered == nullptr || L.ws == 1) return true;
  const uint64_t F = dev::flagValue(p.dev.seq, 0);
  uint64_t* mine = p.counters[L.me];
  const int peers = L.ws - 1;
  const int items = peers * L.nSlices;  // slice-major: arrival order
  while (true) {
    const int i0 = static_cast<int>(teamBroadcast(t, t.tid == 0 ? claim(mine + L.gatherClaimSlot(), F, unit) : 0));
    if (i0 >= items) return true;
    const int i1 = minI(i0 + unit, items);
    for (int i = i0; i < i1; ++i) {
      const int g = i / peers;
      int q = L.me + 1 + (i - g * peers);
      if (q >= L.ws) q -= L.ws;
      const int r0 = L.sliceRowBegin(g), r1 = L.sliceRowEnd(g);
      const bool ok = t.tid == 0 ? waitRows(p, q, r0, r1) : true;
      if (teamBroadcast(t, ok ? 1 : 0) == 0) return false;
      const int64_t at = (static_cast<int64_t>(q) * L.m + r0) * L.rowBytes;
      teamCopy16(p.gathered + at, p.region[L.me] + at, (r1 - r0) * L.rowBytes, t);
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
  return teamBroadcast(t, ok ? 1 : 0) != 0;
}

// A team's whole part of a call. leader: exactly one team per rank and call. Never inlined: with
// it inlined into the GEMM kernel, ptxas takes many minutes and gigabytes on the whole kernel. The
// team comes by value (by reference it would live on the stack).
// sm: shared memory for the bulk push (bytes = 0, or too few for a lane: the threads push).
// ce: the copy engines move the shards (their streams wait for the go word); the leader's team only
// enters the call and then releases them, also after a failed wait (recorded as the call's error)
// so that they never wait for ever: the copies then land in whatever state the peers are in.
static __device__ __noinline__ bool commTeam(const PushArgs& p, Team t, bool leader, int unit, BulkSmem sm) {
  const bool entered = enterCall(p, t, leader);
  if (p.ce) {
    if (leader && t.tid == 0) {
      __threadfence_system();
      dev::storeRelease(p.ceGo, dev::flagValue(p.dev.seq, 1));
    }
    return entered;
  }
  if (!entered) return false;
  if (bulkLanes(sm.bytes, t.n) > 0) {
    if (!pushBulk(p, t, unit, sm)) return false;
  } else {
    pushShard(p, t, unit);
  }
  return gatherOut(p, t, unit);
}

}  // namespace ag
}  // namespace mkccl
