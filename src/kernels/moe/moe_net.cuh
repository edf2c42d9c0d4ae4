// Device side of MoE dispatch/combine across nodes: the ready signals, the dispatch's counts
// exchange, the per-piece puts and the waits for pieces (layout: moe_net_layout.h; protocol:
// docs/MOE.md, "Across nodes"). Ranks of this node are reached over NVLink as in one node; only
// the ranks of other nodes (Args::lidx < 0) go through the network window.
//
// Rules kept here: a rank writes into a remote rank's window only after that rank's ready signal
// of this call (kNetReadyFlag: its earlier kernels, which read its window, are done); every entry
// staged in the window is visible at system scope before the put that carries it (fence, then
// the piece's counter; the thread that completes it fences again and puts); every put leaves the
// window before the kernel ends (Tickets: the block's last ticket, waited for by one thread at the
// end), so the next call or op may reuse it. Every wait is bounded (dev::waitGeq: the communicator's timeout).
#pragma once
#include <stdint.h>
#include "kernels/device/net.cuh"
#include "kernels/moe/moe_common.cuh"

namespace mkccl {
namespace moe {

// The FIFO tickets a block pushed, in shared memory (nothing kept in the threads' registers,
// which the combine's reduce needs): the largest is enough (the FIFO completes in order).
struct Tickets {
  unsigned long long last;
  int put;
  // One thread, before a __syncthreads that precedes any took().
  __device__ __forceinline__ void init() {
    last = 0;
    put = 0;
  }
  __device__ __forceinline__ void took(uint64_t t) {
    atomicMax(&last, (unsigned long long)t);
    put = 1;
  }
  // After a __syncthreads that follows every took() of the block: one thread waits until the
  // block's puts have left the window (bounded; gives up on the communicator's error).
  __device__ __forceinline__ void drain(const DevComm& c) {
    if (threadIdx.x == 0 && put) dev::netWaitSent(c, last);
  }
};

__device__ __forceinline__ bool isRemote(const Args& a, int q) { return a.lidx[q] < 0; }
__device__ __forceinline__ char* regionOf(const Args& a, int q) { return a.region[a.lidx[q]]; }
__device__ __forceinline__ char* netWindow(const DevComm& c) { return c.net->window; }

// A bounded wait for flag (src, flag) of the network, at a MoE site (so the message says which op).
__device__ __forceinline__ bool netWaitFor(const DevComm& c, int src, uint32_t flag, uint64_t value, int site) {
  return dev::waitGeq(c, dev::netFlag(c, src, flag), value, -1, site);
}

// CTA 0, at the start of a call: tells every rank of the other nodes that this rank's window is
// free for this call (every earlier reader of it is an earlier kernel of this rank's stream).
__device__ __forceinline__ void netPostReady(const Args& a, const DevComm& c, Tickets& tk) {
  const int q = threadIdx.x;
  if (!a.net || q >= a.dims.ranks || !isRemote(a, q)) return;
  uint64_t t = 0;
  if (dev::netPut(c, q, 0, 0, 0, kNetReadyFlag, dev::netFlagValue(c.seq, kNetStepReady), &t)) tk.took(t);
}

// The counts table's pairs between every two ranks (key E + d of row s), and the nodes: the
// network layout of this call (every rank reads the same table). Block-wide; ends synced.
__device__ __forceinline__ void loadNetPairs(const Args& a, const int32_t* counts, NetPairs* t) {
  const Dims& D = a.dims;
  const int n = D.ranks, K = D.keys(), E = D.experts;
  for (int i = threadIdx.x; i < n * n; i += blockDim.x) {
    const int s = i / n, d = i % n;
    t->P[s][d] = s == d ? 0 : __ldcg(counts + (size_t)s * K + E + d);
  }
  if ((int)threadIdx.x < n) t->node[threadIdx.x] = a.node[threadIdx.x];
  if (threadIdx.x == 0) t->n = n;
  __syncthreads();
}

// Dispatch step 2 across nodes (CTA 0, every thread; totals[K] in shared memory): this rank's key
// totals go to every rank of the other nodes (staged once in countsOut, one put each after its
// ready), and the totals of every remote source are copied from countsIn into this rank's counts
// table, then count flag [s] is raised here, so that step 3 reads one table as in one node.
// Block-uniform result; false once a wait failed (the error is recorded).
__device__ __forceinline__ bool netExchangeCounts(const Args& a, const DevComm& c, const int32_t* totals, Tickets& tk) {
  const Dims& D = a.dims;
  const int n = D.ranks, K = D.keys(), me = c.rank, q = threadIdx.x;
  char* W = netWindow(c);
  int32_t* out = reinterpret_cast<int32_t*>(W);
  for (int key = threadIdx.x; key < K; key += blockDim.x) out[key] = totals[key];
  dev::fenceSys();  // every thread's window stores, at system scope, before the puts (the proxy reads them)
  __syncthreads();
  bool ok = true;
  const uint64_t ready = dev::netFlagValue(c.seq, kNetStepReady), v = dev::netFlagValue(c.seq, kNetStepCounts);
  if (q < n && isRemote(a, q)) {
    uint64_t t = 0;
    ok = netWaitFor(c, q, kNetReadyFlag, ready, kSiteMoeDispatch) &&
         dev::netPut(c, q, 0, netCountsIn(D, me), (uint64_t)K * 4, kNetCountsFlag, v, &t);
    if (ok) tk.took(t);
    ok = ok && netWaitFor(c, q, kNetCountsFlag, v, kSiteMoeDispatch);
  }
  if (!__syncthreads_and(ok)) return false;
  int32_t* table = reinterpret_cast<int32_t*>(a.region[c.localRank] + a.reg.counts);
  for (int i = threadIdx.x; i < n * K; i += blockDim.x) {
    const int s = i / K, key = i % K;
    if (isRemote(a, s)) table[i] = __ldcg(reinterpret_cast<const int32_t*>(W + netCountsIn(D, s)) + key);
  }
  __syncthreads();
  if (q < n && isRemote(a, q)) {
    dev::fenceSys();
    dev::storeRelease(moeFlags(a.region[c.localRank]) + kCountFlag + q, dev::flagValue(c.seq, 1));
  }
  return true;
}

// One entry of the flow to remote rank q (index i) is staged in the window, and visible at system
// scope (the caller's warp: stores, __syncwarp, fenceSys). Counts it; the caller whose count
// completes the piece (`perEntry` counts per entry) puts the piece to q once q is ready, raising
// flag kNetPieceFlag + piece there to netFlagValue(seq, step). One thread. False: a wait or a push
// failed (the error is recorded).
// Out of line: rare (once per entry), and inlined it costs the combine's reduce registers.
__device__ __forceinline__ bool netEntryStaged(const Args& a, const DevComm& c, const NetView& v, int q, long long i,
                                               uint32_t perEntry, uint32_t step, int site, Tickets& tk) {
  const int per = v.perOut[q];
  const int p = (int)i / per;
  const int cnt = (int)netPieceCount(v.cntOut[q], per, p);
  const uint32_t seen = atomicAdd(a.local.netCount + q * kNetMaxPieces + p, 1u);
  if (seen + 1 != (uint32_t)cnt * perEntry) return true;
  dev::fenceSys();  // every counted entry of the piece before the put
  const uint64_t off = (uint64_t)p * (uint64_t)per * v.stride;
  uint64_t t = 0;
  const bool ok = netWaitFor(c, q, kNetReadyFlag, dev::netFlagValue(c.seq, kNetStepReady), site) &&
                  dev::netPut(c, q, v.out[q] + off, v.dst[q] + off, (uint64_t)cnt * v.stride, kNetPieceFlag + p,
                              dev::netFlagValue(c.seq, step), &t);
  if (ok) tk.took(t);
  return ok;
}

// The device copy (LocalBufs::netSeen) of the arrival flag of piece p of remote rank q's flow to me.
__device__ __forceinline__ uint64_t* netSeenOf(const Args& a, int q, int p) {
  return a.local.netSeen + q * kNetMaxPieces + p;
}

// One warp of the grid, while the others work: copies the arrival flag of every piece the remote
// ranks send me in this op (step) into netSeen as it arrives, and returns once all have (false: a
// wait failed or timed out; the error is recorded). The flags are host memory, written by the
// proxy; the kernels' many waiters poll their device copies instead, so that one warp, not
// hundreds, reads host memory. Hundreds of warps polling it kept the PCIe link so busy that the
// same kernels' stores into the (host) window crawled: across two emulated nodes the combine put
// its first piece ~5-10 ms after it started, the dispatch staged ~1 GB/s (docs/MOE.md).
__device__ __forceinline__ bool netWatch(const Args& a, const DevComm& c, const NetView& v, uint32_t step, int site) {
  const uint64_t want = dev::netFlagValue(c.seq, step);
  const int lane = laneId(), n = a.dims.ranks;
  dev::WaitClock clock;
  for (unsigned round = 1;; ++round) {
    int pending = 0, q0 = -1;
    uint64_t seen0 = 0;
    for (int q = 0; q < n; ++q) {
      if (!isRemote(a, q) || v.cntIn[q] == 0) continue;
      const int pieces = netPieces(v.cntIn[q], v.perIn[q]);
      for (int p = lane; p < pieces; p += 32) {
        uint64_t* copy = netSeenOf(a, q, p);
        if (*reinterpret_cast<volatile uint64_t*>(copy) >= want) continue;  // this warp's own store
        const uint64_t f = dev::loadAcquire(dev::netFlag(c, q, kNetPieceFlag + (uint32_t)p));
        if (f >= want) {
          dev::storeRelease(copy, f);  // the acquire above, passed on to the copy's readers
        } else if (pending++ == 0) {
          q0 = q, seen0 = f;
        }
      }
    }
    if (!__any_sync(0xffffffffu, pending != 0)) return true;
    if ((round & 63) == 0) {  // lane 0's clock decides for the warp (the loop stays converged)
      const int r = __shfl_sync(0xffffffffu, lane == 0 ? clock.check(c) : 0, 0);
      if (r == 2 && pending) dev::recordError(c, /*mkcclTimeout*/ 8, q0, site, seen0, want);
      if (r != 0) return false;
    }
    __nanosleep(500);  // a piece is hundreds of KB: its wire time dwarfs this
  }
}

// Waits (one thread, bounded) for the piece of remote rank q's flow to me that holds entry i:
// its device copy, kept by netWatch.
__device__ __forceinline__ bool netWaitEntry(const Args& a, const DevComm& c, const NetView& v, int q, long long i,
                                             uint32_t step, int site) {
  const int p = (int)i / v.perIn[q];
  return dev::waitGeq(c, netSeenOf(a, q, p), dev::netFlagValue(c.seq, step), -1, site);
}

}  // namespace moe
}  // namespace mkccl
