// Device side of the device->host command FIFO (layout and protocol: src/kernels/abi/fifo.h).
#pragma once
#include <stdint.h>
#include "kernels/device/signal.cuh"
#include "kernels/abi/fifo.h"

namespace mkccl {
namespace dev {

// Claims a ticket and publishes one command; called by one thread. The caller's data must already
// be visible at system scope (fenceSys after the block's stores). Waits (bounded by the
// communicator's timeout) while the FIFO is full; false when that wait fails (error recorded) or
// the communicator is aborted (the proxy failed: it sets the abort flag and its own error).
static __device__ __noinline__ bool fifoPush(const DevComm& c, const FifoDev& f, uint64_t hdr, uint64_t srcOff,
                                      uint64_t dstOff, uint64_t bytes, uint64_t* ticket) {
  const uint64_t t = atomicAdd((unsigned long long*)f.head, 1ull);
  if (ticket) *ticket = t;
  if (t >= loadAcquire(f.tailCache) + f.size) {
    // Full from our point of view: ask the host. One PCIe read per poll, only in this case.
    if (!waitGeq(c, &f.ctl->tail, t - f.size + 1, -1, kSiteFifo)) return false;
    atomicMax((unsigned long long*)f.tailCache, (unsigned long long)loadAcquire(&f.ctl->tail));
  }
  FifoCmd* s = f.slots + (t & (f.size - 1));
  // The body may be plain stores: the release store of the header orders them before it.
  volatile uint64_t* body = &s->srcOff;
  body[0] = srcOff;
  body[1] = dstOff;
  body[2] = bytes;
  storeRelease(&s->hdr, hdr);
  return true;
}

// Waits until every command up to `ticket` has completed locally (its source may be reused).
__device__ __forceinline__ bool fifoWaitDone(const DevComm& c, const FifoDev& f, uint64_t ticket) {
  return waitGeq(c, &f.ctl->done, ticket + 1, -1, kSiteFifo);
}

}  // namespace dev
}  // namespace mkccl
