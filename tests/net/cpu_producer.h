// A CPU thread standing in for the GPU on the FIFO: the same memory layout and the same orderings
// as dev::fifoPush (src/kernels/device/fifo.cuh), with host atomics.
#pragma once
#include <sched.h>
#include <stdint.h>
#include <chrono>
#include <memory>
#include "mkccl.h"
#include "kernels/abi/fifo.h"

namespace mkccl {
namespace test {

struct CpuFifo {
  explicit CpuFifo(uint64_t n) : size(n), slots(new FifoCmd[n]()), ctl(new FifoCtl()) {}
  uint64_t size;
  std::unique_ptr<FifoCmd[]> slots;
  std::unique_ptr<FifoCtl> ctl;
  uint64_t head = 0, tailCache = 0;
  FifoDev dev() { return FifoDev{slots.get(), ctl.get(), &head, &tailCache, size}; }
};

// mkcclSuccess, mkcclTimeout when no room came within timeoutMs, or the proxy's error.
inline mkcclResult_t cpuFifoPush(const FifoDev& f, uint64_t hdr, uint64_t srcOff, uint64_t dstOff, uint64_t bytes,
                                 int timeoutMs, uint64_t* ticket = nullptr) {
  const uint64_t t = __atomic_fetch_add(f.head, 1ull, __ATOMIC_RELAXED);
  if (ticket) *ticket = t;
  if (t >= __atomic_load_n(f.tailCache, __ATOMIC_ACQUIRE) + f.size) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    uint64_t tail;
    while ((tail = __atomic_load_n(&f.ctl->tail, __ATOMIC_ACQUIRE)) + f.size <= t) {
      const uint64_t err = __atomic_load_n(&f.ctl->error, __ATOMIC_ACQUIRE);
      if (err) return (mkcclResult_t)err;
      if (std::chrono::steady_clock::now() > end) return mkcclTimeout;
      sched_yield();
    }
    uint64_t c = __atomic_load_n(f.tailCache, __ATOMIC_RELAXED);
    while (c < tail && !__atomic_compare_exchange_n(f.tailCache, &c, tail, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
  }
  FifoCmd* s = f.slots + (t & (f.size - 1));
  __atomic_store_n(&s->srcOff, srcOff, __ATOMIC_RELAXED);
  __atomic_store_n(&s->dstOff, dstOff, __ATOMIC_RELAXED);
  __atomic_store_n(&s->bytes, bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&s->hdr, hdr, __ATOMIC_RELEASE);
  return mkcclSuccess;
}

// Waits until done > ticket, the proxy's error, or the timeout.
inline mkcclResult_t cpuFifoWaitDone(const FifoDev& f, uint64_t ticket, int timeoutMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (__atomic_load_n(&f.ctl->done, __ATOMIC_ACQUIRE) <= ticket) {
    const uint64_t err = __atomic_load_n(&f.ctl->error, __ATOMIC_ACQUIRE);
    if (err) return (mkcclResult_t)err;
    if (std::chrono::steady_clock::now() > end) return mkcclTimeout;
    sched_yield();
  }
  return mkcclSuccess;
}

// Waits until *flag >= want (the device's waitGeq), bounded.
inline bool cpuWaitGeq(const uint64_t* flag, uint64_t want, int timeoutMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want) {
    if (std::chrono::steady_clock::now() > end) return false;
    sched_yield();
  }
  return true;
}

}  // namespace test
}  // namespace mkccl
