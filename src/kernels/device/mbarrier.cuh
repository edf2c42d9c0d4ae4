// Shared-memory mbarriers (sm_90): the hand-off between a TMA producer and its consumers.
//
// Phases: a barrier starts in phase 0. `waitParity(bar, p)` returns once the phase with parity p
// has completed, i.e. while the barrier's current phase parity differs from p. A fresh barrier
// therefore passes a wait on parity 1 at once: a producer that waits on "empty" barriers with
// (phase ^ 1) does not block on its first pass through the stages.
//
// Every wait is bounded (team rule): the slow path reads %globaltimer and gives up after
// `timeoutNs`, or as soon as *abortFlag (a shared-memory word of the CTA) is non-zero, so a role
// whose partner left can leave too. Callers turn `false` into an error.
#pragma once
#include <stdint.h>
#include "kernels/device/signal.cuh"

namespace mkccl {
namespace dev {

__device__ __forceinline__ uint32_t smemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises; then fenceBarrierInit() and a CTA (or cluster) barrier before use.
__device__ __forceinline__ void mbarInit(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialisation visible to the async proxy (TMA) and to the other CTAs of the cluster.
__device__ __forceinline__ void fenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Producer: one arrival and `bytes` more expected from async (TMA) transactions in this phase.
__device__ __forceinline__ void mbarArriveExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrival on the barrier at the same shared-memory offset in CTA `cta` of this cluster (may be
// this CTA), with the default (CTA-scope) semantics, as CUTLASS's ClusterBarrier does.
// Not .release.cluster: ptxas turns that into MEMBAR.ALL.CTA + MEMBAR.ALL.GPU + ERRBAR +
// CGAERRBAR before the arrive, a wait for every outstanding memory operation of the warp; issued
// by every consumer warp at every k-block it made the 2-CTA kernels ~2x slower (H100,
// 2026-11-22). Nothing needs it: the arrival tells a producer that a stage may be overwritten,
// and the reads it protects are wgmma reads that wgmma.wait_group has already completed; the
// overwrite is a TMA (async-proxy) write, not a generic load that could need acquire ordering.
__device__ __forceinline__ void mbarArriveCluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(bar),
      "r"(cta)
      : "memory");
}

__device__ __forceinline__ bool mbarTryWait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Acquire at cluster scope, for a waiter that then reads, with generic loads, data another CTA
// of the cluster wrote before a release.cluster arrival. It costs an L1 invalidation (CCTL.IVALL)
// per successful wait; a producer that only issues TMA after the wait does not need it (mbarWait
// with kClusterScope = false), even when peers arrive remotely.
__device__ __forceinline__ bool mbarTryWaitCluster(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Bounded wait. The fast path is a single try_wait (which itself suspends the thread for a
// hardware-chosen time); the clock is only read once that failed.
template <bool kClusterScope = false>
__device__ __forceinline__ bool mbarWait(uint32_t bar, uint32_t parity, uint64_t timeoutNs,
                                         const volatile int* abortFlag) {
  if (kClusterScope ? mbarTryWaitCluster(bar, parity) : mbarTryWait(bar, parity)) return true;
  const uint64_t start = globalTimerNs();
  while (true) {
    if (kClusterScope ? mbarTryWaitCluster(bar, parity) : mbarTryWait(bar, parity)) return true;
    if (*abortFlag != 0 || globalTimerNs() - start > timeoutNs) return false;
  }
}

// Stage index and phase parity of a ring of kStages barrier pairs, advanced in lock step by the
// producer and every consumer.
template <int kStages>
struct PipeState {
  uint32_t stage = 0, phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

}  // namespace dev
}  // namespace mkccl
