// The persistent, warp-specialised GEMM kernel: C[M, N] = A[M, K] . W[N, K]^T, fp32 accumulation,
// and every fused op of the GEMM family as an Op of hooks over this one body (gemm_op.cuh).
//
// One launch, one CTA per SM (or fewer: a budget), clusters of 1 or 2 CTAs along M:
//   blocks [0, nCommCtas)   Op::commCta (a fused op's communication), whole clusters
//   every other block       warpgroup 0: thread 0 is the producer (all TMA loads, Op::Loads),
//                           threads 32..127 run Op::sideWarps (or idle); warpgroups 1..2: the
//                           consumers (wgmma mainloop, then Op::Epilogue; then Op::consumerTail)
// Tiles come from Op::Scheduler; both CTAs of a cluster walk the same N-blocks in step.
// README.md says more: the pipeline, the extension points, the failure behaviour.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include "kernels/device/cluster.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/pdl.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/warpgroup.cuh"
#include "kernels/gemm/epilogue.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"
#include "kernels/gemm/mainloop.cuh"

namespace mkccl {

// One consumer warpgroup: for each of the CTA's tiles, the mainloop into registers, then the op's
// epilogue (which may also work between k-blocks: afterKBlock).
template <class Cfg, class Op>
__device__ __forceinline__ void consumerRole(const GemmArgs& g, const typename Op::Params& op,
                                             const CUtensorMap* mapC, const SmemLayout<Cfg>& sm,
                                             typename Op::Scheduler sched, int consumer, uint32_t ctaRank) {
  typename Op::template Epilogue<Cfg, Op> epi(g, op, mapC, sm, consumer);
  const uint32_t lane = threadIdx.x & 31u;
  float acc[Cfg::kAcc];
  dev::PipeState<Cfg::kStages> pipe;
  typename Op::Scheduler::Tile t;
  while (sched.next(t)) {
    epi.begin(t);
    bool ok;
    if constexpr (Op::kMainloop)  // the op's own accumulation (e.g. fp8 block-scale promotion)
      ok = Op::template mainloop<Cfg>(acc, pipe, g, op, sm, consumer, lane, ctaRank, t,
                                      [&](int kb) { epi.afterKBlock(kb); });
    else {
      const KRange kr = tileKRange(g, t);
      ok = consumerMainloop<Cfg>(acc, pipe, g, sm, consumer, lane, ctaRank, [&](int kb) { epi.afterKBlock(kb); },
                                 kr.end - kr.begin);
    }
    if (!ok) break;
    epi.store(acc, t);
  }
  epi.finish();
}

template <class Cfg, class Op>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    persistentGemmKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                         const __grid_constant__ CUtensorMap mapC, const __grid_constant__ GemmArgs g,
                         const __grid_constant__ typename Op::Params op) {
  static_assert(SmemLayout<Cfg>::kOffFlags + 4 * Op::kSharedWords <= Cfg::kOffBar + Cfg::kBarrierBytes,
                "the op's shared words must fit the barrier area");
  static_assert(Op::kSharedWords >= 2, "words 0 and 1 are the engine's (abort, drain)");
  extern __shared__ __align__(1024) uint8_t smemRaw[];
  // The 128-byte swizzle needs 1024-aligned tiles; static shared memory (from a hook's helpers)
  // may precede the dynamic area, so align by hand (the launch reserves the slack).
  const uint32_t base = (dev::smemAddr(smemRaw) + 1023u) & ~1023u;
  if constexpr (Op::kCommCtas) {
    if (static_cast<int>(blockIdx.x) < g.nCommCtas) {
      Op::commCta(g, op, blockIdx.x, base, Cfg::kSmemBytes - Cfg::kAlignSlack);
      return;
    }
  }
  const SmemLayout<Cfg> sm{base};
  const int cs = g.clusterSize;
  const uint32_t ctaRank = cs > 1 ? dev::clusterCtaRank() : 0u;
  const int computeCta = static_cast<int>(blockIdx.x) - g.nCommCtas;
  const int numClusters = (static_cast<int>(gridDim.x) - g.nCommCtas) / cs;
  const typename Op::Scheduler sched(g, op, computeCta / cs, numClusters, static_cast<int>(ctaRank));

  if constexpr (Op::kPdl) {
    // Launched behind the previous kernel (PDL): wait for it before any access to memory it may
    // write. (An L2 prefetch of the first stages before the wait cost 1-5 us per call wherever
    // nothing overlapped: perf/results/20261127-s7-1xH100-H200/9-pdl-parts/.)
    dev::gridDepWait();
    if (threadIdx.x == 0) dev::gridDepLaunchDependents();
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      dev::mbarInit(sm.full(s), 1);
      dev::mbarInit(sm.empty(s), Cfg::kConsumerWarps * cs);
    }
    volatile uint32_t* words = reinterpret_cast<volatile uint32_t*>(__cvta_shared_to_generic(sm.flags()));
    for (uint32_t i = 0; i < Op::kSharedWords; ++i) words[i] = 0;
    dev::fenceBarrierInit();
    if constexpr (Op::kStart) Op::start(g, op, sm.flags());
  }
  // Barriers initialised in both CTAs before any remote arrival or multicast reaches them.
  if (cs > 1) dev::clusterSync(); else __syncthreads();

  // The register split when the consumers hold 128 x 256 accumulators: the op's, else 40 / 232
  // (56 / 224 when the producer calls out of line for a load hook).
  constexpr uint32_t kProducerRegs = Op::kProducerRegs   ? Op::kProducerRegs
                                     : Op::kLoadHook     ? Cfg::kHookProducerRegs
                                                         : Cfg::kProducerRegs;
  constexpr uint32_t kConsumerRegs = Op::kConsumerRegs   ? Op::kConsumerRegs
                                     : Op::kLoadHook     ? Cfg::kHookConsumerRegs
                                                         : Cfg::kConsumerRegs;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 168 * 384, "register budget of a 384-thread CTA");
  // Read through a shuffle so that the compiler knows it is warp-uniform: the consumers' shared
  // memory descriptors (which depend on it) then live in uniform registers, computed once, instead
  // of being rebuilt in ordinary registers and moved over (R2UR) before every wgmma.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128u), 0);
  if (wg == 0) {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegDealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      typename Op::template Loads<Cfg, Op> loads(g, op, &mapA, sm.flags());
      loads.prefetch();
      dev::tmaPrefetchMap(&mapB);
      producerLoop<Cfg>(g, loads, &mapB, sm, sched, ctaRank);
    } else if constexpr (Op::kSideWarps) {
      if (threadIdx.x >= 32) Op::template sideWarps<Cfg>(g, op, sm, sched, threadIdx.x - 32u, computeCta);
    }
  } else {
    if constexpr (Cfg::kRegRealloc) dev::warpgroupRegAlloc<kConsumerRegs>();
    consumerRole<Cfg, Op>(g, op, &mapC, sm, sched, wg - 1, ctaRank);
    if constexpr (Op::kConsumerTail) Op::template consumerTail<Cfg>(g, op, sm, sched, threadIdx.x - 128u);
  }
  // No CTA of a cluster may exit while its peer can still arrive on its barriers or multicast
  // into its shared memory.
  if (cs > 1) dev::clusterSync(); else __syncthreads();
  if constexpr (Op::kEnd) {
    if (threadIdx.x == 0) Op::end(g, op);
  }
}

}  // namespace mkccl
