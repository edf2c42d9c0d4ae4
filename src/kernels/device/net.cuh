// Inter-node primitives for kernels: put a range of this rank's network window into a peer's,
// raise an arrival flag there, wait for arrivals. Everything goes through this rank's FIFO to its
// proxy thread (src/runtime/proxy.cc), which drives the NIC (docs/INTERNODE.md).
//
// Flags: the receiver holds flags[sender][flagsPerPeer]. A put's flag is raised to `value` only
// after its data is visible in the receiver's window. Values of one (sender, flag) must increase
// and at most one put may be in flight per (sender, flag); build them with netFlagValue so that
// they also stay comparable across calls (sequence numbers, never resets). Flag 0 belongs to
// netBarrier; ops use flags [1, flagsPerPeer).
#pragma once
#include <stdint.h>
#include "kernels/device/fifo.cuh"
#include "kernels/device/signal.cuh"
#include "kernels/abi/net_dev.h"

namespace mkccl {
namespace dev {

constexpr uint32_t kNetBarrierFlag = 0;

// Value of step `step` (< 256) of call `seq` on an arrival flag.
__device__ __forceinline__ uint64_t netFlagValue(uint64_t seq, uint32_t step = 0) { return (seq << 8) | step; }

__device__ __forceinline__ uint64_t* netFlag(const DevComm& c, int src, uint32_t flag) {
  return c.net->flags + (size_t)src * c.net->flagsPerPeer + flag;
}

// Rank r is in this node (reached over NVLink, not the network).
__device__ __forceinline__ bool netIsLocal(const DevComm& c, int r) { return c.net->rankNode[r] == c.node; }

// Moves bytes [srcOff, srcOff+bytes) of my window to [dstOff, ...) of rank `peer`'s window (a rank
// of another node), then raises flag (me, flag) there to value. One thread; the data must be
// written before (the caller syncs its block first). *ticket (optional) is for netWaitSent.
__device__ __forceinline__ bool netPut(const DevComm& c, int peer, uint64_t srcOff, uint64_t dstOff, uint64_t bytes,
                                       uint32_t flag, uint64_t value, uint64_t* ticket = nullptr) {
  fenceSys();
  return fifoPush(c, c.net->fifo, fifoHeader(kFifoPut, (uint32_t)peer, flag, value), srcOff, dstOff, bytes, ticket);
}

// A put of no data: only the flag (a signal, e.g. "my buffer is free again").
__device__ __forceinline__ bool netSignal(const DevComm& c, int peer, uint32_t flag, uint64_t value) {
  return netPut(c, peer, 0, 0, 0, flag, value);
}

// Waits (one thread, bounded) until flag (src, flag) reaches value: the data of that put is here.
// A TMA read of the data after it needs fenceProxyAsync().
__device__ __forceinline__ bool netWaitArrival(const DevComm& c, int src, uint32_t flag, uint64_t value) {
  return waitGeq(c, netFlag(c, src, flag), value, -1, kSiteNet);
}

// Waits until every put of mine up to `ticket` has left my window (the source may be overwritten).
__device__ __forceinline__ bool netWaitSent(const DevComm& c, uint64_t ticket) {
  return fifoWaitDone(c, c.net->fifo, ticket);
}

// Waits until every put this rank has pushed so far has left its window (one thread): the puts of
// earlier kernels of the stream, whose tickets this kernel does not have.
__device__ __forceinline__ bool netWaitAllSent(const DevComm& c) {
  const uint64_t pushed = *(volatile uint64_t*)c.net->fifo.head;
  return pushed == 0 || fifoWaitDone(c, c.net->fifo, pushed - 1);
}

// Barrier among all ranks of the communicator, run by one block (every thread calls it; needs
// blockDim.x >= localRanks). Node barrier, then every rank signals every rank of the other nodes
// and waits for their signals. `phase` < 256 distinguishes barriers of one call.
__device__ __forceinline__ bool netBarrier(const DevComm& c, uint32_t phase) {
  if (!barrierLocal(c, phase)) return false;
  __shared__ int ok;
  if (threadIdx.x == 0) ok = 1;
  __syncthreads();
  const uint64_t v = netFlagValue(c.seq, phase);
  for (int r = threadIdx.x; r < c.nranks; r += blockDim.x)
    if (!netIsLocal(c, r) && !netSignal(c, r, kNetBarrierFlag, v)) ok = 0;
  for (int r = threadIdx.x; r < c.nranks; r += blockDim.x)
    if (!netIsLocal(c, r) && !netWaitArrival(c, r, kNetBarrierFlag, v)) ok = 0;
  __syncthreads();
  const bool r = ok;
  __syncthreads();
  return r;
}

}  // namespace dev
}  // namespace mkccl
