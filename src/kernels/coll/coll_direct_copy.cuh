// The copy kinds of the collectives over registered buffers: AllGather (push into the peers'
// receive buffers) and AllToAll(v) (pull from the peers' send buffers). The protocol, the entry and
// exit, and the reductions: coll_direct.cuh. Non-template kernels: included by one .cu only.
#pragma once
#include "kernels/coll/coll_direct.cuh"

namespace mkccl {
namespace coll {

// ---- AllGather: push my block into every peer's receive buffer ------------------------------
// Any alignment: what decides the path (registration, size) must not depend on a rank's own
// pointers, or one rank could stage while its peers go in place.

__global__ void __launch_bounds__(kDirectThreads, 1) directAllGatherKernel(const __grid_constant__ DirectArgs a) {
  const uint64_t seq = dev::beginCall(a.dev);
  __shared__ DirectShared sh;
  __shared__ char* s_dst[kMaxLocalRanks];
  const int n = a.dev.localRanks, me = a.dev.localRank, t = threadIdx.x;
  if (directEnter(a, seq, sh)) {
    // Peers in a rotated order (the ranks spread their stores); my own copy last, skipped in place.
    __shared__ int s_nd;
    if (t == 0) {
      int nd = 0;
      for (int j = 1; j <= n; ++j) {
        const int q = (me + j) % n;
        char* d = a.dstBase[q] + sh.dst[q];
        if (q == me && d == a.send) continue;
        s_dst[nd++] = d;
      }
      s_nd = nd;
    }
    __syncthreads();
    // Parts of 16-byte units; one read for every destination when all are 16-byte aligned (the
    // usual case), else a copy per destination at whatever width the pointers allow (a peer's
    // offset, this rank's send buffer and the block size may be anything).
    uint64_t lo, hi;
    ctaRange((a.bytes + 15) / 16, lo, hi);
    lo *= 16;
    hi = hi * 16 < a.bytes ? hi * 16 : a.bytes;
    if (hi > lo) {
      __shared__ char* s_d[kMaxLocalRanks];
      if (t < s_nd) s_d[t] = s_dst[t] + lo;
      __syncthreads();
      uintptr_t phase = reinterpret_cast<uintptr_t>(a.send) | (uintptr_t)a.bytes;
      for (int j = 0; j < s_nd; ++j) phase |= reinterpret_cast<uintptr_t>(s_dst[j]);
      if ((phase & 15) == 0) {
        dev::blockCopyMulti16(s_d, s_nd, a.send + lo, hi - lo);
      } else {
        for (int j = 0; j < s_nd; ++j) dev::blockCopy(s_d[j], a.send + lo, hi - lo);
      }
    }
  }
  directExit(a, seq);
}

// ---- AllToAll(v): pull the block each peer holds for me --------------------------------------

__global__ void __launch_bounds__(kDirectThreads, 1) directAllToAllKernel(const __grid_constant__ DirectArgs a) {
  const uint64_t seq = dev::beginCall(a.dev);
  __shared__ DirectShared sh;
  const int n = a.dev.localRanks, me = a.dev.localRank;
  if (directEnter(a, seq, sh)) {
    for (int j = 1; j <= n; ++j) {  // rotated: the ranks spread their pulls; my own block last
      const int q = (me + j) % n;
      const uint64_t L = a.inLen[q];
      if (L == 0) continue;
      uint64_t lo, hi;
      ctaRange((L + 15) / 16, lo, hi);
      lo *= 16;
      hi = hi * 16 < L ? hi * 16 : L;
      if (hi > lo) dev::blockCopy(a.recv + a.inOff[q] + lo, a.srcBase[q] + sh.src[q] + lo, hi - lo);
    }
  }
  directExit(a, seq);
}

}  // namespace coll
}  // namespace mkccl
