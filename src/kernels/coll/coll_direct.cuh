// AllGather into registered receive buffers (mkcclCommRegister): each rank stores its block
// straight into every peer's receive buffer over NVLink, with no staging through the symmetric
// workspace and no copy-out at the receiver.
//
// Protocol of call s (number from the device's counter, dev::beginCall):
//   1. block 0 posts entry flagValue(s, 0) into every peer's barrier slot (as every collective);
//      every CTA waits until each peer has entered the call: the peer's stream reached this call,
//      so the peer no longer uses its receive buffer for earlier work.
//   2. every CTA copies its share of my block into every peer's buffer (16-byte stores).
//   3. each CTA fences (system scope) and arrives on a local counter; the last to arrive resets it,
//      posts "done" flagValue(s, 1) into every peer's done slot for me, and waits until every peer
//      has posted its own done here: my buffer is complete, and nobody writes into it after the
//      kernel ends. A CTA whose entry wait failed still arrives (the counter stays consistent).
#pragma once
#include <stdint.h>
#include "kernels/abi/devcomm.h"
#include "kernels/device/signal.cuh"

namespace mkccl {
namespace coll {

constexpr int kDirectThreads = 512;
constexpr int kDirectMaxCtas = 32;
// Local arrival counter: the last grid-sync pair (pair 13: slots 58, 59), this kernel's only.
constexpr int kDirectArriveSlot = kGridSyncSlot + 26;
// Done flags: slot kDirectDoneSlot + q of my flags holds local rank q's "my block has landed".
constexpr int kDirectDoneSlot = kOpFlagSlot;

struct DirectArgs {
  DevComm dev;
  const char* send;
  char* dst[kMaxLocalRanks];  // where my block goes in local rank q's receive buffer (dst[me]: mine)
  uint64_t bytes;             // my block, a multiple of 16, as are send and dst
  int skipSelf;               // in place: my block already lies in my receive buffer
};

__global__ void __launch_bounds__(kDirectThreads, 1) directAllGatherKernel(const __grid_constant__ DirectArgs a) {
  const uint64_t seq = dev::beginCall(a.dev);
  const DevComm& c = a.dev;
  const int n = c.localRanks, me = c.localRank, t = threadIdx.x;
  __shared__ int s_fail;
  if (t == 0) s_fail = 0;
  if (blockIdx.x == 0 && t < n && t != me) dev::storeRelease(dev::flagsOf(c, t) + kBarrierSlot + me, dev::flagValue(seq, 0));
  __syncthreads();
  if (t < n && t != me && !dev::waitGeq(c, dev::flagsOf(c, me) + kBarrierSlot + t, dev::flagValue(seq, 0), t, kSiteAllGather))
    s_fail = 1;
  __syncthreads();
  if (!s_fail) {
    const uint64_t units = a.bytes / 16;
    const uint4* src = reinterpret_cast<const uint4*>(a.send);
    const uint64_t stride = (uint64_t)gridDim.x * kDirectThreads;
    for (uint64_t i = (uint64_t)blockIdx.x * kDirectThreads + t; i < units; i += stride) {
      const uint4 v = src[i];
#pragma unroll 1
      for (int j = 0; j < n; ++j) {
        const int q = (me + j) % n;  // peers in a rotated order: the ranks spread their stores
        if (q == me && a.skipSelf) continue;
        reinterpret_cast<uint4*>(a.dst[q])[i] = v;
      }
    }
  }
  __syncthreads();
  if (t == 0) {
    dev::fenceSys();
    uint64_t* ctr = dev::flagsOf(c, me) + kDirectArriveSlot;
    if (atomicAdd(reinterpret_cast<unsigned long long*>(ctr), 1ull) == (unsigned long long)gridDim.x - 1) {
      atomicExch(reinterpret_cast<unsigned long long*>(ctr), 0ull);
      dev::fenceSys();
      for (int q = 0; q < n; ++q)
        if (q != me) dev::storeRelease(dev::flagsOf(c, q) + kDirectDoneSlot + me, dev::flagValue(seq, 1));
      for (int q = 0; q < n; ++q)
        if (q != me && !dev::waitGeq(c, dev::flagsOf(c, me) + kDirectDoneSlot + q, dev::flagValue(seq, 1), q,
                                     kSiteAllGather))
          break;
    }
  }
}

}  // namespace coll
}  // namespace mkccl
