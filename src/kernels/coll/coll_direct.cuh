// The collectives over registered buffers (mkcclCommRegister), with no staging through the
// symmetric workspace: every local peer's registered buffer is mapped here, so a rank reads or
// writes it in place over NVLink.
//   AllGather      (receive buffer registered): each rank stores its block straight into every
//                  peer's receive buffer.
//   ReduceScatter  (send buffer registered): each rank pulls its block from every peer's send
//                  buffer, reduces in registers in rank order and writes its own output.
//   AllReduce      (send and receive registered): each rank pulls its slice from every peer's send
//                  buffer, reduces it, and stores the result into every rank's receive buffer.
//   AllToAll(v)    (send buffer registered): each rank pulls the block every peer holds for it.
//
// ---- Protocol of call s (number from the device's counter, dev::beginCall) -----------------
//   1. entry: block 0 writes, into my own workspace data region (its first bytes, kDirectInfo),
//      three words for each peer q: where the bytes q reads from me lie in my registration, how
//      many there are, and where q writes into my registration (regWord: registration index + 1,
//      offset); then posts the entry flag flagValue(s, kDirectEntry) (a release: the words are
//      visible first) into q's barrier slot for me. Every CTA waits until each peer's entry is
//      >= flagValue(s, 0) (the peer's stream reached this call: its send buffer holds this call's
//      data, and it no longer uses its receive buffer for earlier work), then requires it to be
//      exactly flagValue(s, kDirectEntry): a staged collective posts flagValue(s, 0), so a peer
//      that did not take the in-place path in this call (it passed unregistered buffers, or sizes
//      under the cut) is told apart. It reads the peer's words from the peer's data region: they
//      must name the registration mine names and the lengths must agree; else mkcclInvalidUsage
//      is recorded (kSiteDirectMismatch) and the kernel leaves without touching any peer's
//      buffer. Peers may use different offsets in the registration: each says where its bytes are.
//   2. every CTA moves its share (pulls, reductions, stores).
//   3. each CTA fences (system scope) and arrives on a local counter; the last to arrive resets it,
//      posts "done" flagValue(s, 1) into every peer's done slot for me, and waits until every peer
//      has posted its own done here: nobody reads my send buffer or writes my receive buffer after
//      the kernel ends, so the caller may reuse both. A CTA whose entry failed still arrives; after
//      a recorded error no done is posted (a staged peer could take it for one of its own flags).
// Why the words are where they are: my own data region is written by peers only in a staged call
// that I have entered (the rings and the LL area), never while I run this one, and no flag protocol
// reads it (flags elsewhere only grow; a word here could pass for any flag value). A peer reads my
// words of call s after my entry of s and before its done of s; I write the words of call s+1 only
// after my kernel of call s ended, which waited for every done of call s.
#pragma once
#include <stdint.h>
#include "kernels/abi/devcomm.h"
#include "kernels/abi/direct_site.h"
#include "kernels/coll/direct_rule.h"
#include "kernels/device/reduce.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/device/vec.cuh"

namespace mkccl {
namespace coll {

constexpr int kDirectThreads = 512;
constexpr int kDirectMaxCtas = 32;
// Local arrival counter: the last grid-sync pair (pair 13: slots 58, 59), these kernels' only.
constexpr int kDirectArriveSlot = kGridSyncSlot + 26;
// Done flags: slot kDirectDoneSlot + q of my flags holds local rank q's "done with my buffers".
constexpr int kDirectDoneSlot = kOpFlagSlot;
// (kDirectInfoWords, kDirectEntry: direct_rule.h, shared with the fused ops' in-place paths.)

enum DirectKind : int {
  kDirectAllGather = 0,
  kDirectReduce = 1,  // ReduceScatter, AllReduce (pushOut)
  kDirectAllToAll = 2,
};


struct DirectArgs {
  DevComm dev;
  int kind;      // DirectKind
  int site;      // DevSite of the waits
  int pushOut;   // reduce: also store the result into every peer's receive registration (AllReduce)
  int avgDiv;    // reduce: > 0 divides the result (mkcclAvg)
  // Posted to local peer q before my entry flag (words [0..2] of the protocol):
  uint64_t pubSrc[kMaxLocalRanks];  // regWord of the bytes q reads from me (pulls), 0: none
  uint64_t pubLen[kMaxLocalRanks];  // how many bytes q reads from me, or I store into q
  uint64_t pubDst[kMaxLocalRanks];  // regWord of where q stores into my receive registration
  // What each peer's words must name: my registration indices + 1 (0: that word is not used).
  int srcReg, dstReg;
  // Each local peer's registration base, mapped here ([me]: mine).
  char* srcBase[kMaxLocalRanks];
  char* dstBase[kMaxLocalRanks];
  // Local side: what I move.
  const char* send;                 // AllGather: my block
  char* recv;                       // my output: reduce: my result; AllToAll: base of recv
  uint64_t bytes;                   // AllGather: my block; reduce: bytes of the block I reduce
  uint64_t inLen[kMaxLocalRanks];   // AllToAll: bytes I pull from q (checked against q's pubLen)
  uint64_t inOff[kMaxLocalRanks];   // AllToAll: where they go in recv
  int elemSize;                     // reduce: sizeof(T)
  int8_t localOfRank[kMaxLocalRanks];  // reduce: rank order (bit-identical results on every rank)
};

// ---- entry and exit ------------------------------------------------------------------------

struct DirectShared {
  uint64_t src[kMaxLocalRanks];  // byte offsets in each peer's registration (from its words)
  uint64_t dst[kMaxLocalRanks];
  int fail;
};

__device__ __forceinline__ bool directMismatch(const DirectArgs& a, int q, uint64_t seen, uint64_t want) {
  dev::recordError(a.dev, /*mkcclInvalidUsage*/ 5, q, kSiteDirectMismatch, seen, want);
  return false;
}

// Every thread. True when every peer entered this call on the in-place path with matching words.
__device__ __forceinline__ bool directEnter(const DirectArgs& a, uint64_t seq, DirectShared& sh) {
  const DevComm& c = a.dev;
  const int n = c.localRanks, me = c.localRank, t = threadIdx.x;
  if (t == 0) sh.fail = 0;
  if (blockIdx.x == 0 && t < n && t != me) {
    uint64_t* w = reinterpret_cast<uint64_t*>(dev::dataOf(c, me)) + kDirectInfoWords * t;
    dev::storeRelaxed(w + 0, a.pubSrc[t]);
    dev::storeRelaxed(w + 1, a.pubLen[t]);
    dev::storeRelaxed(w + 2, a.pubDst[t]);
    dev::storeRelease(dev::flagsOf(c, t) + kBarrierSlot + me, dev::flagValue(seq, kDirectEntry));
  }
  __syncthreads();
  if (t < n) {
    bool ok = true;
    uint64_t src = regWordOffset(a.pubSrc[me]), dst = regWordOffset(a.pubDst[me]);
    if (t != me) {
      const uint64_t* entry = dev::flagsOf(c, me) + kBarrierSlot + t;
      const uint64_t want = dev::flagValue(seq, kDirectEntry);
      ok = dev::waitGeq(c, entry, dev::flagValue(seq, 0), t, a.site);
      if (ok) {
        const uint64_t v = dev::loadAcquire(entry);
        if (v != want) ok = directMismatch(a, t, v, want);
      }
      if (ok) {
        const uint64_t* w = reinterpret_cast<const uint64_t*>(dev::dataOf(c, t)) + kDirectInfoWords * me;
        const uint64_t ws = dev::loadRelaxed(w + 0), wl = dev::loadRelaxed(w + 1), wd = dev::loadRelaxed(w + 2);
        // Lengths: what q says it holds for me (pulls) or stores into me must be what I expect:
        // AllToAllv my recvcount from q; the others my block, which counts differing across
        // ranks would change.
        const uint64_t expect = a.kind == kDirectAllToAll ? a.inLen[t] : a.bytes;
        if (wl != expect) ok = directMismatch(a, t, wl, expect);
        else if (a.srcReg && regWordIndex(ws) + 1 != a.srcReg) ok = directMismatch(a, t, ws >> 48, a.srcReg);
        else if (a.dstReg && regWordIndex(wd) + 1 != a.dstReg) ok = directMismatch(a, t, wd >> 48, a.dstReg);
        src = regWordOffset(ws);
        dst = regWordOffset(wd);
      }
    }
    sh.src[t] = src;
    sh.dst[t] = dst;
    if (!ok) sh.fail = 1;
  }
  __syncthreads();
  return sh.fail == 0;
}

// Every thread, last thing in the kernel.
__device__ __forceinline__ void directExit(const DirectArgs& a, uint64_t seq) {
  const DevComm& c = a.dev;
  const int n = c.localRanks, me = c.localRank;
  __syncthreads();
  if (threadIdx.x != 0) return;
  dev::fenceSys();
  uint64_t* ctr = dev::flagsOf(c, me) + kDirectArriveSlot;
  if (atomicAdd(reinterpret_cast<unsigned long long*>(ctr), 1ull) != (unsigned long long)gridDim.x - 1) return;
  atomicExch(reinterpret_cast<unsigned long long*>(ctr), 0ull);
  if (dev::deviceFailed(c)) return;
  dev::fenceSys();
  for (int q = 0; q < n; ++q)
    if (q != me) dev::storeRelease(dev::flagsOf(c, q) + kDirectDoneSlot + me, dev::flagValue(seq, 1));
  for (int q = 0; q < n; ++q)
    if (q != me && !dev::waitGeq(c, dev::flagsOf(c, me) + kDirectDoneSlot + q, dev::flagValue(seq, 1), q, a.site))
      break;
}

// This CTA's part [lo, hi) of `units` units spread over the grid.
__device__ __forceinline__ void ctaRange(uint64_t units, uint64_t& lo, uint64_t& hi) {
  const uint64_t per = (units + gridDim.x - 1) / gridDim.x;
  lo = per * blockIdx.x;
  hi = lo + per < units ? lo + per : units;
  if (lo > hi) lo = hi;
}

// ---- ReduceScatter / AllReduce: pull, reduce in rank order, write (and push) -----------------

template <typename T, typename Op>
__global__ void __launch_bounds__(kDirectThreads, 1) directReduceKernel(const __grid_constant__ DirectArgs a) {
  const uint64_t seq = dev::beginCall(a.dev);
  __shared__ DirectShared sh;
  __shared__ const char* s_in[kMaxLocalRanks];
  __shared__ char* s_out[kMaxLocalRanks + 1];
  const int n = a.dev.localRanks, me = a.dev.localRank, t = threadIdx.x;
  if (directEnter(a, seq, sh)) {
    // 16-byte vectors per CTA part, so that aligned blocks stay aligned in every part.
    constexpr uint64_t V = 16 / sizeof(T);
    const uint64_t nelem = a.bytes / sizeof(T);
    uint64_t lo, hi;
    ctaRange((nelem + V - 1) / V, lo, hi);
    lo *= V;
    hi = hi * V < nelem ? hi * V : nelem;
    if (hi > lo) {
      const uint64_t off = lo * sizeof(T);
      if (t < n) {
        const int q = a.localOfRank[t];
        s_in[t] = a.srcBase[q] + sh.src[q] + off;
      }
      int nout = 1;
      if (t == 0) s_out[0] = a.recv + off;
      if (a.pushOut) {
        // Into every peer's receive buffer; mine is recv itself (the host passes it so).
        if (t < n - 1) {
          const int q = (me + 1 + t) % n;
          s_out[1 + t] = a.dstBase[q] + sh.dst[q] + off;
        }
        nout = n;
      }
      __syncthreads();
      dev::blockReduce<T, Op>(s_in, n, s_out, nout, hi - lo, a.avgDiv);
    }
  }
  directExit(a, seq);
}

}  // namespace coll
}  // namespace mkccl
