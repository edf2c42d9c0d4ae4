// Device signalling primitives, written once and used by every kernel.
//
// Protocol (DESIGN.md section 5): a flag means "ready for call s" when it holds a value >= a
// target derived from s (flags are never reset, so stale values are always smaller). Publish:
// data stores, then a system-scope release store of the flag. Wait: system-scope acquire loads,
// bounded by the communicator's timeout; a timeout or an abort records an error in host-mapped
// memory and the wait returns false: the caller leaves the kernel (no trap).
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels/abi/devcomm.h"

namespace mkccl {
namespace dev {

// Values published by call `seq` for its phase/step `sub` (sub < 2^20): monotonic across calls.
__host__ __device__ __forceinline__ uint64_t flagValue(uint64_t seq, uint64_t sub = 0) { return (seq << 20) | sub; }

__device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void storeRelaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t loadRelaxed(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Raises *p to at least v (never lowers it): for flags whose writes may arrive late (devcomm.h).
__device__ __forceinline__ void storeMaxRelease(uint64_t* p, uint64_t v) {
  asm volatile("red.release.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Adds v with release semantics (e.g. "one more chunk of mine has landed at your place").
__device__ __forceinline__ void addRelease(uint64_t* p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fenceSys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void fenceGpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
// Between a flag read with generic loads and a TMA (async proxy) read of the data it guards.
__device__ __forceinline__ void fenceProxyAsync() { asm volatile("fence.proxy.async;" ::: "memory"); }

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t* errorWord(const DevComm& c) {
  return reinterpret_cast<uint64_t*>(c.peers[c.localRank]) + kErrorSlot;
}

// This communicator has a device error; the host asked every wait to give up (host memory: read
// rarely, see WaitClock).
__device__ __forceinline__ bool deviceFailed(const DevComm& c) { return *(volatile uint64_t*)errorWord(c) != 0; }
__device__ __forceinline__ bool hostAborted(const DevComm& c) { return *(volatile int*)&c.err->abort != 0; }

// The host's abort word is host memory: every read of it crosses PCIe. Read by every waiting
// thread every ~20 us, those reads stalled the GPU's copy engines (4xH200, AllGather+GEMM's ce
// plan at 8192x2048x8192: while 132 producers waited, the copies to the peers ran at ~4 GB/s per
// stream instead of ~80 and a call took 10.2 ms; with the host word read at most every ~250 us
// per thread, 0.69 ms). So a wait checks the device error word and its clock every 64 polls and
// the host word at most every kHostPollNs: mkcclCommAbort reaches a waiting kernel within ~1 ms.
constexpr uint64_t kHostPollNs = 1000000;

// The bookkeeping of one bounded wait; check() every 64 polls: 0 go on, 1 give up (an error
// recorded elsewhere or an abort), 2 timed out (the caller records it).
struct WaitClock {
  uint64_t start, polled;
  __device__ __forceinline__ WaitClock() : start(globalTimerNs()), polled(start) {}
  __device__ __forceinline__ int check(const DevComm& c) {
    if (deviceFailed(c)) return 1;
    const uint64_t now = globalTimerNs();
    if (now - polled >= kHostPollNs) {
      polled = now;
      if (hostAborted(c)) return 1;
    }
    return now - start > c.timeoutNs ? 2 : 0;
  }
};

// Records the first device error of the communicator (later ones are dropped).
__device__ __forceinline__ void recordError(const DevComm& c, int code, int peer, int site, uint64_t seen,
                                            uint64_t want) {
  // Atomics on host memory are not atomic across the PCIe link: arbitrate in device memory.
  if (atomicCAS((unsigned long long*)errorWord(c), 0ull, (unsigned long long)code) == 0ull) {
    volatile DevError* e = c.err;
    e->rank = c.rank;
    e->peer = peer;
    e->site = site;
    e->seq = c.seq;
    e->seen = seen;
    e->want = want;
    __threadfence_system();
    e->code = code;
    __threadfence_system();
  }
}

// The body of a bounded wait (one thread) until *flag >= want; kMaxBackoff ns between polls at
// most. False on timeout (records mkcclTimeout = 8) or when the communicator has an error / was
// aborted (another wait failed, or mkcclCommAbort).
template <unsigned kMaxBackoff>
__device__ __forceinline__ bool waitGeqBody(const DevComm& c, const uint64_t* flag, uint64_t want, int peer, int site) {
  uint64_t v = loadAcquire(flag);
  if (v >= want) return true;
  WaitClock clock;
  unsigned backoff = 32, spins = 0;
  while (true) {
    v = loadAcquire(flag);
    if (v >= want) return true;
    if ((++spins & 63) == 0) {
      const int r = clock.check(c);
      if (r == 2) recordError(c, /*mkcclTimeout*/ 8, peer, site, v, want);
      if (r != 0) return false;
    }
    __nanosleep(backoff);
    if (backoff < kMaxBackoff) backoff <<= 1;
  }
}

// The wait most kernels use: out of line (a wait is rare and its loop is long), short backoff
// (small calls are latency-bound).
static __device__ __noinline__ bool waitGeq(const DevComm& c, const uint64_t* flag, uint64_t want, int peer,
                                            int site) {
  return waitGeqBody<256>(c, flag, want, peer, site);
}

// The same wait inlined, for kernels where a call is costly: in the GEMM family a call from the
// consumers saves their 128 live accumulators around it, and with calls from both register
// regions of a setmaxnreg split ptxas can fail to allocate the kernel (C7600, nvcc 13.0).
__device__ __forceinline__ bool waitGeqInline(const DevComm& c, const uint64_t* flag, uint64_t want, int peer,
                                              int site) {
  return waitGeqBody<1024>(c, flag, want, peer, site);
}

// Block-uniform result of a wait done by thread 0. Every thread of the block must call it.
__device__ __forceinline__ bool blockWaitGeq(const DevComm& c, const uint64_t* flag, uint64_t want, int peer,
                                             int site) {
  __shared__ int ok;
  if (threadIdx.x == 0) ok = waitGeq(c, flag, want, peer, site);
  __syncthreads();
  bool r = ok;
  __syncthreads();
  return r;
}

__device__ __forceinline__ uint64_t* flagsOf(const DevComm& c, int localPeer) {
  return reinterpret_cast<uint64_t*>(c.peers[localPeer]);
}
__device__ __forceinline__ char* dataOf(const DevComm& c, int localPeer) { return c.peers[localPeer] + c.flagsBytes; }

// Barrier among the ranks of the node, run by one block (every thread calls it). Phase numbers
// let one call use several barriers (phase < 2^20, increasing within a call). Data written
// before it by this block (or by the whole grid, after a gridSync) is visible to peers after it.
__device__ __forceinline__ bool barrierLocal(const DevComm& c, uint64_t phase) {
  const uint64_t want = flagValue(c.seq, phase);
  __shared__ int ok;
  __syncthreads();
  if (threadIdx.x == 0) ok = 1;
  __syncthreads();
  const int q = threadIdx.x;
  if (q < c.localRanks) {
    fenceSys();
    storeRelease(flagsOf(c, q) + kBarrierSlot + c.localRank, want);
    if (!waitGeq(c, flagsOf(c, c.localRank) + kBarrierSlot + q, want, q, kSiteBarrier)) ok = 0;
  }
  __syncthreads();
  bool r = ok;
  __syncthreads();
  return r;
}

// Grid-wide barrier of one persistent kernel (all CTAs co-resident). `slot` in [0, 13) picks a
// counter pair; `phase` increases within a call. The last CTA to arrive resets the counter and
// releases the others through a monotonic generation word, so nothing needs zeroing by the host.
__device__ __forceinline__ bool gridSync(const DevComm& c, int slot, uint64_t phase) {
  uint64_t* ctr = flagsOf(c, c.localRank) + kGridSyncSlot + 2 * slot;
  uint64_t* gen = ctr + 1;
  const uint64_t want = flagValue(c.seq, phase);
  __shared__ int ok;
  __syncthreads();
  if (threadIdx.x == 0) {
    ok = 1;
    const unsigned nblocks = gridDim.x * gridDim.y * gridDim.z;
    // System scope: the block's stores may have gone to peers' memory, and whoever publishes after
    // this sync (a node barrier) relies on them being visible there.
    fenceSys();
    if (atomicAdd((unsigned long long*)ctr, 1ull) == nblocks - 1) {
      *(volatile uint64_t*)ctr = 0;
      __threadfence();
      storeRelease(gen, want);
    } else if (!waitGeq(c, gen, want, -1, kSiteGridSync)) {
      ok = 0;
    }
  }
  __syncthreads();
  bool r = ok;
  __syncthreads();
  return r;
}

// ---- the call's sequence number, from device memory ---------------------------------------
//
// A kernel launched with a sequence number in its parameters cannot be replayed from a CUDA graph:
// every replay would reuse the number its capture froze, and pass on the flags of the replay
// before. So a kernel with a flag protocol takes its number from this rank's counter in device
// memory (kSeqSlot), which eager calls and replays advance alike. The counter holds
// flagValue(s, a): s = the last call's number, a = CTAs of the running kernel that took it so far.
// Every CTA takes a ticket (one atomic add) at its very start: s + 1 (or the host's number, if
// larger: a launch that failed, or a call without a ticket kernel, still advances the count) is
// the call's number, and the last CTA to arrive stores flagValue(that number, 0). All CTAs have
// read the old s by then; the next kernel on the stream starts after this one ends. So each CTA of
// every kernel of the rank takes exactly one ticket, and every rank (making the same calls, eager
// or replayed) reaches the same numbers. A kernel that shares its call's number with an earlier
// kernel of the call peeks (peekCallSeq) instead.

__device__ __forceinline__ uint64_t* seqCounter(const DevComm& c) { return flagsOf(c, c.localRank) + kSeqSlot; }

// One thread per CTA, first thing in the kernel (before any CTA may return).
__device__ __forceinline__ uint64_t takeCallSeq(const DevComm& c) {
  uint64_t* ctr = seqCounter(c);
  const uint64_t nblocks = (uint64_t)gridDim.x * gridDim.y * gridDim.z;
  const uint64_t old = atomicAdd(reinterpret_cast<unsigned long long*>(ctr), 1ull);
  const uint64_t next = (old >> 20) + 1;
  const uint64_t s = next > c.seq ? next : c.seq;
  if ((old & ((1ull << 20) - 1)) == nblocks - 1) atomicExch(reinterpret_cast<unsigned long long*>(ctr), flagValue(s, 0));
  return s;
}

// The number of the call whose earlier kernel (or bump, seqBumpKernel) took the ticket: stable
// while this kernel runs, so any thread may read it.
__device__ __forceinline__ uint64_t peekCallSeq(const DevComm& c) {
  const uint64_t s = *reinterpret_cast<volatile const uint64_t*>(seqCounter(c)) >> 20;
  return s > c.seq ? s : c.seq;
}

// The same through a pointer to the counter the host computed (kernels short of registers): after
// a bump (seqBumpKernel) the counter's number is never below the host's.
__device__ __forceinline__ uint64_t peekCallSeqAt(const uint64_t* ctr) {
  return *reinterpret_cast<volatile const uint64_t*>(ctr) >> 20;
}

// Block-wide (every thread calls it, first thing): takes the CTA's ticket and hands the number to
// every thread.
__device__ __forceinline__ uint64_t beginCall(const DevComm& c) {
  __shared__ uint64_t s_seq;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) s_seq = takeCallSeq(c);
  __syncthreads();
  return s_seq;
}

}  // namespace dev
}  // namespace mkccl
