// The persistent, warp-specialised GEMM kernel: C[M, N] = A[M, K] . W[N, K]^T, fp32 accumulation.
//
// One launch, one CTA per SM (or fewer: a budget), clusters of 1 or 2 CTAs along M:
//   blocks [0, nCommCtas)       Op::commRole (fused ops' communication), whole clusters
//   every other block           warpgroup 0: producer (thread 0 issues all TMA loads; it gives
//                               its registers to the consumers); warpgroups 1..2: consumers
//                               (wgmma mainloop, then the epilogue of Cfg::Epilogue)
// Tiles come from Op::Scheduler; both CTAs of a cluster walk the same N-blocks in step.
// See README.md for the extension points and the failure behaviour.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/device/cluster.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/gemm/epilogue.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "kernels/gemm/mainloop.cuh"

namespace mkccl {

template <class Cfg, class Op>
__device__ __forceinline__ void consumerRole(const GemmArgs& g, const typename Op::Params& op,
                                             const CUtensorMap* mapC, const SmemLayout<Cfg>& sm,
                                             typename Op::Scheduler& sched, int consumer, uint32_t ctaRank) {
  using Epi = typename Cfg::Epilogue;
  const uint32_t tid = threadIdx.x % 128u;
  EpiCtx ec;
  ec.mapC = mapC;
  ec.smem = sm.epi(consumer);
  ec.barrierId = 1u + static_cast<uint32_t>(consumer);
  ec.tid = tid;
  ec.chunks = 0;
  ec.outType = g.outType;
  ec.M = g.M;
  ec.N = g.N;
  ec.C = g.C;
  ec.ldc = g.ldc;
  float acc[Cfg::kAcc];
  dev::PipeState<Cfg::kStages> pipe;
  dev::TileCoord t;
  while (sched.next(t)) {
    if (!consumerMainloop<Cfg>(acc, pipe, g, sm, consumer, tid & 31u, ctaRank)) break;
    ec.row0 = static_cast<int64_t>(t.m) * Cfg::BM + consumer * 64;
    ec.col0 = static_cast<int64_t>(t.n) * Cfg::BN;
    Epi::template store<Cfg>(acc, ec);
    if constexpr (Op::kTileHook) {
      Epi::complete(ec);
      if (tid == 0) {
        const volatile int* flags = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(sm.flags()));
        Op::tileStored(g, op, t.m, t.n, consumer, flags[1] != 0);
      }
    }
  }
  Epi::finish(ec);
}

template <class Cfg, class Op>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    persistentGemmKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                         const __grid_constant__ CUtensorMap mapC, const __grid_constant__ GemmArgs g,
                         const __grid_constant__ typename Op::Params op) {
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  if constexpr (Op::kCommRole) {
    if (static_cast<int>(blockIdx.x) < g.nCommCtas) {
      Op::commRole(g, op, blockIdx.x, smemRaw);
      return;
    }
  }
  // The 128-byte swizzle needs 1024-aligned tiles; static shared memory (from a hook's helpers)
  // may precede the dynamic area, so align by hand (the launch reserves the slack).
  const uint32_t raw = dev::smemAddr(smemRaw);
  const SmemLayout<Cfg> sm{(raw + 1023u) & ~1023u};
  const int cs = g.clusterSize;
  const uint32_t ctaRank = cs > 1 ? dev::clusterCtaRank() : 0u;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      dev::mbarInit(sm.full(s), 1);
      dev::mbarInit(sm.empty(s), Cfg::kConsumerWarps * cs);
    }
    volatile int* flags = reinterpret_cast<volatile int*>(__cvta_shared_to_generic(sm.flags()));
    flags[0] = 0;
    flags[1] = 0;
    dev::fenceBarrierInit();
  }
  // Barriers initialised in both CTAs before any remote arrival or multicast reaches them.
  if (cs > 1) dev::clusterSync(); else __syncthreads();

  const int computeCta = static_cast<int>(blockIdx.x) - g.nCommCtas;
  const int numClusters = (static_cast<int>(gridDim.x) - g.nCommCtas) / cs;
  typename Op::Scheduler sched(g.sched, computeCta / cs, numClusters, static_cast<int>(ctaRank));

  constexpr uint32_t kProducerRegs = Op::kLoadHook ? Cfg::kHookProducerRegs : Cfg::kProducerRegs;
  constexpr uint32_t kConsumerRegs = Op::kLoadHook ? Cfg::kHookConsumerRegs : Cfg::kConsumerRegs;
  const int wg = static_cast<int>(threadIdx.x / 128u);
  if (wg == 0) {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegDealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      dev::tmaPrefetchMap(&mapA);
      dev::tmaPrefetchMap(&mapB);
      producerLoop<Cfg, Op>(g, op, &mapA, &mapB, sm, sched, ctaRank);
    }
  } else {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegAlloc<kConsumerRegs>();
    consumerRole<Cfg, Op>(g, op, &mapC, sm, sched, wg - 1, ctaRank);
  }
  // No CTA of a cluster may exit while its peer can still arrive on its barriers or multicast
  // into its shared memory.
  if (cs > 1) dev::clusterSync(); else __syncthreads();
}

}  // namespace mkccl
