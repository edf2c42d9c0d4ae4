// Producer and consumer halves of the GEMM mainloop: a ring of kStages shared-memory stages, each
// with a "full" barrier (TMA bytes landed: 1 producer arrival + kStageBytes of transactions) and an
// "empty" barrier (one arrival from every consumer warp of every CTA of the cluster: with
// multicast, our producer also writes the peers' copies of its part of the W (or A) tile, so it
// must wait for the peers' consumers too).
#pragma once
#include <cuda.h>
#include <stdint.h>
#include <type_traits>
#include "kernels/device/cluster.cuh"
#include "kernels/device/mbarrier.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"
#include "kernels/gemm/gemm_op.cuh"

namespace mkccl {

// A role gave up on a wait (a bug, or a partner role that left): make every wait of this CTA (and
// of the peer CTA) give up too, and tell the host.
template <class Cfg>
__device__ __forceinline__ void gemmFault(const GemmArgs& g, const SmemLayout<Cfg>& sm, uint32_t ctaRank, int site) {
  volatile int* flags = reinterpret_cast<volatile int*>(__cvta_shared_to_generic(sm.flags()));
  flags[0] = 1;
  for (int r = 0; r < g.clusterSize; ++r)
    if (static_cast<uint32_t>(r) != ctaRank) dev::storeSharedCluster(sm.flags(), static_cast<uint32_t>(r), 1u);
  if (g.fault != nullptr) {
    *reinterpret_cast<volatile int*>(g.fault) = static_cast<int>((blockIdx.x + 1) << 8) | site;
    __threadfence_system();
  }
}

// Schedulers that hand out 2-D cluster tiles (Sched::kClustersAlongN: the plain GEMM's raster);
// for every other op the A-multicast code compiles away (the producer keeps its few registers).
template <class Sched, class = void>
struct SchedClustersAlongN : std::false_type {};
template <class Sched>
struct SchedClustersAlongN<Sched, std::void_t<decltype(Sched::kClustersAlongN)>>
    : std::integral_constant<bool, Sched::kClustersAlongN> {};

// The producer: one thread issues every TMA load of the CTA's tiles, stage by stage. The op's
// Loads says where a tile's A rows come from (a(t)) and its first row of W (bRow; with LoadsSplitB
// the first row of each half, bRowHalf), may wait before a k-block's loads (wait: false puts the
// CTA in drain mode) and hears of each k-block issued (issued) and of the end (done). Returns
// false if it gave up on a pipeline wait (fault recorded).
template <class Cfg, class Loads, class Sched>
__device__ __forceinline__ bool producerLoop(const GemmArgs& g, Loads& loads, const CUtensorMap* mapB,
                                             const SmemLayout<Cfg>& sm, Sched sched, uint32_t ctaRank) {
  volatile int* flags = reinterpret_cast<volatile int*>(__cvta_shared_to_generic(sm.flags()));
  dev::PipeState<Cfg::kStages> pipe;
  // A cluster of cm x cn CTAs (rank rm + cm * rn; tile_scheduler.cuh): the cm CTAs of one N-block
  // each load 1/cm of the W tile's rows and multicast it to one another; the cn CTAs of one M-block
  // likewise 1/cn of the A tile's (a full A box only: the host keeps cn = 1 for short ones).
  const int cn = SchedClustersAlongN<Sched>::value && g.clusterN > 1 ? g.clusterN : 1;
  const int cm = g.clusterSize / cn;
  const uint32_t rm = ctaRank % static_cast<uint32_t>(cm), rn = ctaRank / static_cast<uint32_t>(cm);
  const int bRows = Cfg::BN / cm;
  const uint32_t bOffset = rm * static_cast<uint32_t>(bRows) * (Cfg::BK * 2);
  const uint16_t bMask = static_cast<uint16_t>(((1u << cm) - 1u) << (cm * rn));
  const int aRows = Cfg::BM / cn;
  const uint32_t aOffset = rn * static_cast<uint32_t>(aRows) * (Cfg::BK * 2);
  uint16_t aMask = 0;
  for (int j = 0; j < cn; ++j) aMask |= static_cast<uint16_t>(1u << (rm + cm * j));
  bool drain = false;
  // TMA counts the bytes of the box it writes (zero fill included): a short A box counts less.
  const uint32_t stageBytes =
      g.aBoxRows > 0 ? Cfg::kStageBytesB + static_cast<uint32_t>(g.aBoxRows) * (Cfg::BK * 2) : Cfg::kStageBytes;
  typename Sched::Tile t;
  while (sched.next(t)) {
    const TileA a = loads.a(t);
    const int32_t rowB = loads.bRow(t) + static_cast<int32_t>(rm) * bRows;
    const KRange kr = tileKRange(g, t);
    for (int kb = kr.begin; kb < kr.end; ++kb) {
      const uint32_t s = pipe.stage;
      // CTA-scope wait even with remote arrivals: only TMA follows (mbarrier.cuh).
      if (!dev::mbarWait(sm.empty(s), pipe.phase ^ 1u, g.waitTimeoutNs, flags)) {
        gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultProducer);
        loads.done();
        return false;
      }
      if (!drain && !loads.wait(t, kb)) {
        drain = true;
        flags[1] = 1;
      }
      // Full stage bytes even for boxes that reach past the matrix: TMA counts the zero fill.
      dev::mbarArriveExpectTx(sm.full(s), stageBytes);
      const int32_t k0 = kb * Cfg::BK;
      if (cn == 1)
        dev::tmaLoad2d(sm.a(s), a.map, sm.full(s), k0, a.row);
      else
        dev::tmaLoad2dMulticast(sm.a(s) + aOffset, a.map, sm.full(s), k0,
                                a.row + static_cast<int32_t>(rn) * aRows, aMask);
      if constexpr (LoadsSplitB<Loads>::value) {
        dev::tmaLoad2d(sm.b(s), mapB, sm.full(s), k0, loads.bRowHalf(t, 0));
        dev::tmaLoad2d(sm.b(s) + (Cfg::BN / 2) * (Cfg::BK * 2), mapB, sm.full(s), k0, loads.bRowHalf(t, 1));
      } else if (cm == 1)
        dev::tmaLoad2d(sm.b(s), mapB, sm.full(s), k0, rowB);
      else
        dev::tmaLoad2dMulticast(sm.b(s) + bOffset, mapB, sm.full(s), k0, rowB, bMask);
      pipe.advance();
      loads.issued();
    }
  }
  loads.done();
  return true;
}

// Frees stage `s` for the producers of the cluster: lane c of each consumer warp arrives on the
// empty barrier of CTA c (every warp, so the release cannot overtake a warp still reading; one
// arrive instruction per warp, without a fence: see mbarArriveCluster).
__device__ __forceinline__ void consumerRelease(uint32_t emptyBar, int clusterSize, uint32_t lane) {
  if (clusterSize == 1) {
    if (lane == 0) dev::mbarArrive(emptyBar);
  } else if (lane < static_cast<uint32_t>(clusterSize)) {
    dev::mbarArriveCluster(emptyBar, lane);
  }
}

// No work beside the k-blocks (consumerMainloop's default hook).
struct NoKBlockHook {
  __device__ __forceinline__ void operator()(int) const {}
};

// One consumer warpgroup: acc (64 x BN of the tile, rows 64*consumer..) = A . W^T over all of K.
// Keeps one wgmma group in flight: the stage of k-block kb-1 is released once k-block kb is
// issued and kb-1 retired. hook(kb) runs once k-block kb's wgmma group is issued (work that should
// overlap the tensor cores, e.g. publishing the previous tile's stores). Returns false if it gave
// up (fault recorded). kBlocks: the tile's k-blocks (its KRange's length; -1: all of K).
template <class Cfg, class Hook = NoKBlockHook>
__device__ __forceinline__ bool consumerMainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>& pipe,
                                                 const GemmArgs& g, const SmemLayout<Cfg>& sm, int consumer,
                                                 uint32_t lane, uint32_t ctaRank, Hook hook = Hook(),
                                                 int kBlocks = -1) {
  using Mma = dev::Wgmma<Cfg::BN, typename Cfg::In>;
  const volatile int* abortFlag = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(sm.flags()));
  const uint32_t aOffset = static_cast<uint32_t>(consumer) * 64u * (Cfg::BK * 2);
  uint32_t prev = 0;
  const int nk = kBlocks < 0 ? g.kBlocks : kBlocks;
  dev::fenceAccumulators(acc);
  for (int kb = 0; kb < nk; ++kb) {
    const uint32_t s = pipe.stage;
    if (!dev::mbarWait(sm.full(s), pipe.phase, g.waitTimeoutNs, abortFlag)) {
      dev::wgmmaWait<0>();  // leave no wgmma in flight on the way out
      gemmFault<Cfg>(g, sm, ctaRank, kGemmFaultConsumer);
      return false;
    }
    const uint64_t descA = dev::smemDescSw128(sm.a(s) + aOffset);
    const uint64_t descB = dev::smemDescSw128(sm.b(s));
    dev::wgmmaFence();
#pragma unroll
    for (int k = 0; k < Cfg::BK / 16; ++k)
      Mma::mma(acc, descA + k * dev::kDescK16Step, descB + k * dev::kDescK16Step, (kb | k) != 0 ? 1u : 0u);
    dev::wgmmaCommit();
    hook(kb);
    dev::wgmmaWait<1>();  // k-block kb-1 retired (at kb = 0 nothing older is pending)
    if (kb > 0) consumerRelease(sm.empty(prev), g.clusterSize, lane);
    prev = s;
    pipe.advance();
  }
  dev::wgmmaWait<0>();
  dev::fenceAccumulators(acc);
  consumerRelease(sm.empty(prev), g.clusterSize, lane);
  return true;
}

}  // namespace mkccl
