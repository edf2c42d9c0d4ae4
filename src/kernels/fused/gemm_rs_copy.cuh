// GEMM+RS/AR communication, run by the three idle warps of every compute CTA's producer warpgroup
// (its thread 0 issues the TMA loads): the sends cost no SM, and a congested NVLink stalls only
// these warps, never the tensor cores (the epilogues store locally and move on).
//
// Teams (a warp or a few warps with a named barrier) walk the CTA's own schedule, the same tiles in
// the same order as its consumers, and wait for the consumers' per-warpgroup counters
// (shared memory: tiles whose output is in global memory) before touching a tile:
//   pushTeam  for a tile of step j < ws-1: copy the staged sum to rank r-1's rx slot, fence,
//             raise its flag there. Before that, for a tile that adds an incoming sum, wait for
//             the sum's flag and prefetch it into L2, so the epilogue reads it from L2.
//   agTeam    (AR) for a final tile: copy the finished tile from C to rank r-1's ag slot, then
//             receive the ws-1 other chunks' tile u in ring order, copy each into C and forward it
//             to rank r-1 (all but the last).
// Before its first write into rank r-1's memory a team waits for r-1's entry into this call (r-1 is
// then done with every earlier call's use of that memory). A failed wait (recorded by
// dev::waitGeq) puts the CTA in drain mode: nothing more is sent, the GEMM runs out.
#pragma once
#include <stdint.h>
#include "kernels/device/signal.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/fused/gemm_rs_layout.cuh"
#include "runtime/devcomm.h"

namespace mkccl {
namespace rs {

// What the kernel's communication needs (by value in kernel parameters).
struct RingParams {
  DevComm comm;
  Layout L;
  int rank;              // this rank: its position in the ring
  int srcLocal;          // local index of rank+1 (sends to us), for error reports
  int dstLocal;          // local index of rank-1 (we send to it)
  char* scratch;         // our share of the scratch region
  char* scratchDst;      // rank-1's share, mapped here
  uint64_t* flags;       // our flags, from kOpFlagSlot
  uint64_t* flagsDst;    // rank-1's
  uint64_t* entryPost;   // rank+1's barrier slot [us]: we have entered this call
  uint64_t* entryWait;   // our barrier slot [rank-1]: it has entered this call
  char* C;               // the user's output (AR: [M, N]; RS: [M/ws, N])
};

// Shared-memory words of a compute CTA (SmemLayout::flags(), after the engine's two).
struct CtaWords {
  static constexpr uint32_t kAbort = 0, kDrain = 1;  // the engine's
  static constexpr uint32_t kDone0 = 2;              // + consumer: tiles of its sequence in global memory
  static constexpr uint32_t kOk0 = 4;                // + consumer: its incoming sum arrived (this tile)
  static constexpr uint32_t kPushOk = 6, kAgOk = 7;  // team verdicts (this tile)
  static constexpr uint32_t kInReady = 8;            // the push team saw the incoming sum of tile #n
  static constexpr uint32_t kCount = 9;
};

__device__ __forceinline__ void stReleaseCtaShared(uint32_t addr, uint32_t v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ldAcquireCtaShared(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// Pulls `bytes` (a multiple of 16) at p into L2: a hint, the data is read later by ordinary loads.
// Issued in 16 KiB pieces (bulk operations of modest size).
__device__ __forceinline__ void prefetchL2(const char* p, uint32_t bytes) {
  for (uint32_t off = 0; off < bytes; off += 16384u) {
    const uint32_t n = bytes - off < 16384u ? bytes - off : 16384u;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
  }
}

// dev::waitGeq, inlined: for the consumer warpgroups, whose 128 live accumulator registers a call
// would have to save around it.
__device__ __forceinline__ bool waitGeqInline(const DevComm& c, const uint64_t* flag, uint64_t want, int peer,
                                              int site) {
  uint64_t v = dev::loadAcquire(flag);
  if (v >= want) return true;
  const uint64_t start = dev::globalTimerNs();
  unsigned backoff = 32, spins = 0;
  while (true) {
    v = dev::loadAcquire(flag);
    if (v >= want) return true;
    if ((++spins & 63) == 0) {
      if (dev::aborted(c)) return false;
      if (dev::globalTimerNs() - start > c.timeoutNs) {
        dev::recordError(c, /*mkcclTimeout*/ 8, peer, site, v, want);
        return false;
      }
    }
    __nanosleep(backoff);
    if (backoff < 1024) backoff <<= 1;
  }
}

// Threads [0, n) of a team and how they synchronise: n == 32 is one warp (__syncwarp), else the
// named barrier `bar`.
struct Team {
  uint32_t tid, n, bar;
  __device__ __forceinline__ void sync() const {
    if (n == 32) __syncwarp();
    else dev::namedBarrierSync(bar, n);
  }
};

// Until both consumer warpgroups have published `tiles` tiles. Bounded (a consumer that gave up
// sets the CTA's abort word); false on failure (recorded as an internal error: a bug).
static __device__ __noinline__ bool waitConsumers(const RingParams& p, uint32_t words, uint32_t tiles, uint64_t timeoutNs) {
  const volatile uint32_t* w = reinterpret_cast<const volatile uint32_t*>(__cvta_shared_to_generic(words));
  uint64_t start = 0;
  unsigned backoff = 32;
  while (true) {
    const uint32_t a = ldAcquireCtaShared(words + 4 * CtaWords::kDone0);
    const uint32_t b = ldAcquireCtaShared(words + 4 * (CtaWords::kDone0 + 1));
    if (a >= tiles && b >= tiles) return true;
    if (w[CtaWords::kAbort] != 0) return false;
    const uint64_t now = dev::globalTimerNs();
    if (start == 0) start = now;
    if (now - start > timeoutNs) {
      dev::recordError(p.comm, /*mkcclInternalError*/ 3, -1, kSiteFusedTile, a < b ? a : b, tiles);
      return false;
    }
    __nanosleep(backoff);
    if (backoff < 512) backoff <<= 1;
  }
}

// dst[0, nvec) = src[0, nvec) (16-byte vectors), every thread of the team; kUnroll loads in flight
// per thread (6: a one-warp team moves a 64 KiB tile in ~22 load latencies; 8 spills at the producer
// warpgroup's 72 registers).
template <int kUnroll = 6>
__device__ __forceinline__ void teamCopy(const Team& t, uint4* dst, const uint4* src, int64_t nvec) {
  int64_t i = t.tid;
  for (; i + (kUnroll - 1) * int64_t(t.n) < nvec; i += kUnroll * int64_t(t.n)) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) r[u] = __ldcg(src + i + u * t.n);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * t.n] = r[u];
  }
  for (; i < nvec; i += t.n) dst[i] = __ldcg(src + i);
}

// A rows x (vpr vectors) block: src row pitch sp, destinations d0 (pitch p0) and, if not null,
// d1 (pitch p1); pitches in 16-byte vectors. vpr <= kMaxVpr (a power of two).
template <int kMaxVpr, int kUnroll = 4>
__device__ __forceinline__ void teamCopy2d(const Team& t, uint4* d0, int64_t p0, uint4* d1, int64_t p1,
                                           const uint4* src, int64_t sp, int rows, int vpr) {
  static_assert((kMaxVpr & (kMaxVpr - 1)) == 0, "power of two");
  const int64_t total = int64_t(rows) * kMaxVpr;
  for (int64_t e0 = t.tid; e0 < total; e0 += kUnroll * int64_t(t.n)) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t e = e0 + int64_t(u) * t.n;
      const int64_t row = e / kMaxVpr;
      const int col = int(e % kMaxVpr);
      if (e < total && col < vpr) r[u] = __ldcg(src + row * sp + col);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t e = e0 + int64_t(u) * t.n;
      const int64_t row = e / kMaxVpr;
      const int col = int(e % kMaxVpr);
      if (e < total && col < vpr) {
        d0[row * p0 + col] = r[u];
        if (d1 != nullptr) d1[row * p1 + col] = r[u];
      }
    }
  }
}

// Thread 0 decided; every thread of the team gets the verdict (the word is rewritten only after
// the team's next sync, so reading it between the two syncs of an iteration is safe).
__device__ __forceinline__ bool teamVerdict(const Team& t, uint32_t words, uint32_t slot, bool mine) {
  volatile uint32_t* w = reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(words));
  if (t.tid == 0) w[slot] = mine ? 1u : 0u;
  t.sync();
  return w[slot] != 0;
}

__device__ __forceinline__ bool draining(uint32_t words) {
  return reinterpret_cast<const volatile uint32_t*>(__cvta_shared_to_generic(words))[CtaWords::kDrain] != 0;
}
__device__ __forceinline__ void setDrain(uint32_t words) {
  reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(words))[CtaWords::kDrain] = 1;
}

template <int kBN>
__device__ void pushTeam(const RingParams& p, const Team& t, uint32_t words, int cluster, int numClusters,
                         int ctaRank, uint64_t timeoutNs) {
  const Layout& L = p.L;
  const uint64_t want = dev::flagValue(p.comm.seq);
  Schedule sched(L, p.rank, cluster, numClusters, ctaRank);
  Tile tile;
  uint32_t index = 0;
  bool ready = false;
  while (sched.next(tile)) {
    ++index;
    const bool send = tile.step < L.ws - 1, incoming = tile.step > 0;
    bool ok = false;
    if (t.tid == 0) {
      ok = !draining(words);
      if (ok && incoming) {
        ok = dev::waitGeq(p.comm, p.flags + L.rxSlot(tile.step - 1, tile.u), want, p.srcLocal, kSiteFusedTile);
        if (ok) {
          prefetchL2(p.scratch + L.rxOffset(tile.step - 1, tile.u), uint32_t(L.tileBytes()));
          // The consumers then skip their own (system-scope) poll: this acquire, passed on at CTA scope.
          stReleaseCtaShared(words + 4 * CtaWords::kInReady, index);
        }
      }
      if (ok && send) ok = waitConsumers(p, words, index, timeoutNs);
      if (ok && send && !ready)
        ok = ready = dev::waitGeq(p.comm, p.entryWait, want, p.dstLocal, kSiteFusedTile);
      if (!ok) setDrain(words);
    }
    const bool go = teamVerdict(t, words, CtaWords::kPushOk, ok) && send;
    if (go) {
      teamCopy(t, reinterpret_cast<uint4*>(p.scratchDst + L.rxOffset(tile.step, tile.u)),
               reinterpret_cast<const uint4*>(p.scratch + L.stagingOffset(tile.step, tile.u)), L.tileBytes() / 16);
      dev::fenceSys();  // our stores to rank r-1 before the flag (cumulative through the sync)
    }
    t.sync();
    if (go && t.tid == 0) dev::storeRelease(p.flagsDst + L.rxSlot(tile.step, tile.u), want);
  }
}

// AR: the finished tiles travel the ring (see the file comment).
template <int kBN>
__device__ void agTeam(const RingParams& p, const Team& t, uint32_t words, int cluster, int numClusters, int ctaRank,
                       uint64_t timeoutNs) {
  constexpr int kVpr = kBN / 8;  // 16-byte vectors per tile row
  const Layout& L = p.L;
  const uint64_t want = dev::flagValue(p.comm.seq);
  const int64_t ldc = L.N / 8;  // C's row pitch in vectors (N is a multiple of 8)
  Schedule sched(L, p.rank, cluster, numClusters, ctaRank);
  Tile tile;
  uint32_t index = 0;
  bool ready = false;
  while (sched.next(tile)) {
    ++index;
    if (tile.step != L.ws - 1) continue;
    const int64_t col0 = int64_t(tile.nb) * kBN;
    const int vpr = int(min64(kBN, L.N - col0) / 8);
    // Rows of tile u in chunk c that lie in C (AR chunks are whole tiles: only M clips).
    auto rowsOf = [&](int c, int64_t* r0) {
      *r0 = L.chunkBegin(c) + int64_t(tile.mb) * kTileRows;
      return int(max64(0, min64(kTileRows, L.chunkEnd(c) - *r0)));
    };
    // Our own finished tile, from C to rank r-1.
    bool ok = false;
    if (t.tid == 0) {
      ok = !draining(words) && waitConsumers(p, words, index, timeoutNs);
      if (ok && !ready) ok = ready = dev::waitGeq(p.comm, p.entryWait, want, p.dstLocal, kSiteFusedTile);
      if (!ok) setDrain(words);
    }
    bool go = teamVerdict(t, words, CtaWords::kAgOk, ok);
    int64_t r0 = 0;
    int rows = rowsOf(p.rank, &r0);
    if (go) {
      teamCopy2d<kVpr>(t, reinterpret_cast<uint4*>(p.scratchDst + L.agOffset(p.rank, tile.u)), kVpr, nullptr, 0,
                       reinterpret_cast<const uint4*>(p.C + (r0 * L.N + col0) * 2), ldc, rows, vpr);
      dev::fenceSys();
    }
    t.sync();
    if (go && t.tid == 0) dev::storeRelease(p.flagsDst + L.agSlot(p.rank, tile.u), want);
    // The other chunks' tile u: from rank r+1 (its own first, then what it forwards).
    for (int k = 1; k < L.ws; ++k) {
      const int c = (p.rank + k) % L.ws;
      const bool forward = k < L.ws - 1;
      if (t.tid == 0) {
        ok = !draining(words) &&
             dev::waitGeq(p.comm, p.flags + L.agSlot(c, tile.u), want, p.srcLocal, kSiteFusedTile);
        if (!ok) setDrain(words);
      }
      go = teamVerdict(t, words, CtaWords::kAgOk, ok);
      rows = rowsOf(c, &r0);
      if (go) {
        teamCopy2d<kVpr>(t, reinterpret_cast<uint4*>(p.C + (r0 * L.N + col0) * 2), ldc,
                         forward ? reinterpret_cast<uint4*>(p.scratchDst + L.agOffset(c, tile.u)) : nullptr, kVpr,
                         reinterpret_cast<const uint4*>(p.scratch + L.agOffset(c, tile.u)), kVpr, rows, vpr);
        if (forward) dev::fenceSys();
      }
      t.sync();
      if (go && forward && t.tid == 0) dev::storeRelease(p.flagsDst + L.agSlot(c, tile.u), want);
    }
  }
}

}  // namespace rs
}  // namespace mkccl
