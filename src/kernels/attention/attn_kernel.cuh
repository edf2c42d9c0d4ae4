// The persistent, warp-specialised attention kernel (forward).
//
// One launch, at most one CTA per SM:
//   blocks [0, nComm)   Ring Attention only: forward key/value chunks to the next rank (attn_ring.cuh)
//   every other block   warpgroup 0: producer (thread 0 issues all TMA loads; the warpgroup gives
//                       its registers to the consumers); warpgroups 1, 2: consumers, 64 query rows
//                       each (attn_mainloop.cuh), then the epilogue (attn_epilogue.cuh)
// Tiles come from AttnSched (attn_sched.cuh); every role walks the same sequence.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/attention/attn_config.cuh"
#include "kernels/attention/attn_epilogue.cuh"
#include "kernels/attention/attn_mainloop.cuh"
#include "kernels/attention/attn_params.h"
#include "kernels/attention/attn_ring.cuh"
#include "kernels/attention/attn_sched.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"

namespace mkccl {
namespace attn {

template <class Cfg, bool kRing, int kVariant>
__device__ __forceinline__ void consumerRole(const AttnMaps& maps, const AttnParams& p, const AttnSmem<Cfg>& sm,
                                             AttnSched& sched, int consumer) {
  const uint32_t tid = threadIdx.x % 128u;
  constexpr bool kTurns = kVariant == kVariantFast;
  dev::PipeState<Cfg::kStages> pipe;
  uint32_t qPhase = 0;
  float o[Cfg::kAccO];
  float lse[2];
  // The first GEMM turn is consumer 0's.
  if (kTurns && consumer == 1)
    asm volatile("bar.arrive %0, %1;" ::"r"(kBarTurn0), "r"(256) : "memory");
  TileWork w;
  while (sched.next(w)) {
    if (w.total == 0) {
      if constexpr (!kRing) {
        // Rows without any key (causal with more queries than keys): O = 0, LSE = -inf.
#pragma unroll
        for (int i = 0; i < Cfg::kAccO; ++i) o[i] = 0.0f;
        lse[0] = lse[1] = -INFINITY;
        storeTile<Cfg>(o, lse, w, maps, p, sm, consumer, tid);
      }
      continue;
    }
    // After a failed wait every wait of the CTA gives up at once: the tiles run on garbage, the
    // kernel ends and the ring's counters complete.
    consumeTile<Cfg, kVariant>(o, lse, w, p, sm, pipe, qPhase, consumer, tid);
    if constexpr (kRing) {
      ringMerge<Cfg>(o, lse, w, p, consumer, tid);
      dev::namedBarrierSync(kBarConsumer0 + static_cast<uint32_t>(consumer), 128);
      if (tid == 0) ringTileDone(p, w.step);
    } else {
      storeTile<Cfg>(o, lse, w, maps, p, sm, consumer, tid);
    }
  }
  // Consume the turn handed over after consumer 1's last GEMMs (nobody else takes it).
  if (kTurns && consumer == 0) dev::namedBarrierSync(kBarTurn0, 256);
  if (tid == 0) dev::bulkWait<0>();  // the last TMA store has read shared memory
}

template <class Cfg, bool kRing, int kVariant>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attnKernel(const __grid_constant__ AttnMaps maps, const __grid_constant__ AttnParams p) {
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  int nComm = 0;
  if constexpr (kRing) {
    nComm = p.ring.nComm;
    if (static_cast<int>(blockIdx.x) < nComm) {
      ringCommRole<Cfg>(p, smemRaw);
      return;
    }
  }
  const uint32_t raw = dev::smemAddr(smemRaw);
  const AttnSmem<Cfg> sm{(raw + 1023u) & ~1023u};
  if (threadIdx.x == 0) {
    dev::mbarInit(sm.qFull(), 1);
    dev::mbarInit(sm.qEmpty(), 4 * Cfg::kConsumers);
    for (int s = 0; s < Cfg::kStages; ++s) {
      dev::mbarInit(sm.kFull(s), 1);
      dev::mbarInit(sm.kEmpty(s), 4 * Cfg::kConsumers);
      dev::mbarInit(sm.vFull(s), 1);
      dev::mbarInit(sm.vEmpty(s), 4 * Cfg::kConsumers);
    }
    smemFlags(sm.flags())[0] = 0;
    smemFlags(sm.flags())[1] = 0;
    dev::fenceBarrierInit();
  }
  __syncthreads();
  AttnSched sched(p.shape, static_cast<int>(blockIdx.x) - nComm, static_cast<int>(gridDim.x) - nComm);
  const int wg = static_cast<int>(threadIdx.x / 128u);
  if (wg == 0) {
    dev::warpgroupRegDealloc<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) {
      dev::tmaPrefetchMap(&maps.q);
      attnProducer<Cfg, kRing>(maps, p, sm, sched);
    }
  } else {
    dev::warpgroupRegAlloc<Cfg::kConsumerRegs>();
    consumerRole<Cfg, kRing, kVariant>(maps, p, sm, sched, wg - 1);
  }
}

}  // namespace attn
}  // namespace mkccl
