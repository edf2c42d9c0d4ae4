// The extension points of the persistent GEMM kernel (gemm_kernel.cuh; README.md in this
// directory): an op is a struct that derives from GemmOpDefaults and shadows what it needs. Every
// hook is resolved at compile time; a hook left at its default compiles to nothing.
//
//   Params                 the op's kernel parameter (flags, peer pointers, layouts), by value
//   Scheduler              which tiles a CTA computes, in what order (its Tile type; built from
//                          the kernel's GemmArgs and the op's Params)
//   Loads<Cfg, Op>         producer side: where a tile's A rows come from, what the producer
//                          waits for before a k-block's loads, what it posts as it issues them
//   Epilogue<Cfg, Op>      consumer side, one per consumer warpgroup: work after each k-block,
//                          what happens to a finished tile's accumulators, the end
//   kCommCtas / commCta    blocks [0, nCommCtas) of the launch run commCta instead of computing
//   kSideWarps / sideWarps the producer warpgroup's idle warps 1..3 (96 threads)
//   kConsumerTail          the consumer warpgroups' work after their last tile
//   start / end            thread 0 of each CTA before the first barrier / after the last one
//   kSharedWords           32-bit words in shared memory the CTA's roles share (the engine's
//                          first two: abort, drain)
//   kProducerRegs / kConsumerRegs  the setmaxnreg split for 128 x 256 tiles (0: the engine's)
//
// The plain GEMM is GemmOpDefaults itself (PlainGemmOp). A fused op that only waits before a load
// or publishes stored tiles uses the simple hooks (kLoadHook / beforeLoadA, kTileHook /
// tileStored) that the default Loads and Epilogue call.
#pragma once
#include <cuda.h>
#include <stdint.h>
#include <type_traits>
#include <utility>
#include "kernels/device/tile_scheduler.cuh"
#include "kernels/device/tma.cuh"
#include "kernels/gemm/epilogue.cuh"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_config.cuh"

namespace mkccl {

// Where the producer loads a tile's A rows from: a tensor map and the tile's first row in it.
struct TileA {
  const CUtensorMap* map;
  int32_t row;
};

// The k-blocks [begin, end) a tile covers: all of K, unless the scheduler's Tile carries its own
// range (kBegin, kEnd: split K, split_k.cuh).
struct KRange {
  int begin, end;
};
template <class Tile, class = void>
struct TileHasKRange : std::false_type {};
template <class Tile>
struct TileHasKRange<Tile, std::void_t<decltype(std::declval<Tile>().kBegin)>> : std::true_type {};
template <class Tile>
__device__ __forceinline__ KRange tileKRange(const GemmArgs& g, const Tile& t) {
  if constexpr (TileHasKRange<Tile>::value) return {t.kBegin, t.kEnd};
  return {0, g.kBlocks};
}

// A Loads whose W tile is two halves from independent rows (kSplitB: bRowHalf(t, h) is the first
// row of half h), e.g. a SwiGLU weight stored gate rows then up rows: the producer loads each half
// with its own box (the host encodes W's map with BN / 2 rows); clusters of one CTA only.
template <class Loads, class = void>
struct LoadsSplitB : std::false_type {};
template <class Loads>
struct LoadsSplitB<Loads, std::void_t<decltype(Loads::kSplitB)>> : std::integral_constant<bool, Loads::kSplitB> {};

// The default producer side: A from the kernel's mapA at the tile's M-block, and the op's
// beforeLoadA hook if it has one (kLoadHook).
template <class Cfg, class Op>
struct PlainLoads {
  const GemmArgs& g;
  const typename Op::Params& op;
  const CUtensorMap* mapA;

  __device__ __forceinline__ PlainLoads(const GemmArgs& g_, const typename Op::Params& op_, const CUtensorMap* mapA_,
                                        uint32_t /*words*/)
      : g(g_), op(op_), mapA(mapA_) {}
  __device__ __forceinline__ void prefetch() const { dev::tmaPrefetchMap(mapA); }
  template <class Tile>
  __device__ __forceinline__ TileA a(const Tile& t) const {
    return {mapA, t.m * Cfg::BM};
  }
  // The tile's first row of W (W is [N, K]: an output column block).
  template <class Tile>
  __device__ __forceinline__ int32_t bRow(const Tile& t) const {
    return t.n * Cfg::BN;
  }
  // Before the loads of k-block kb of tile t. False: the CTA drains (the op recorded the error).
  template <class Tile>
  __device__ __forceinline__ bool wait(const Tile& t, int kb) const {
    if constexpr (Op::kLoadHook) return Op::beforeLoadA(g, op, t.m, t.n, kb);
    return true;
  }
  __device__ __forceinline__ void issued() {}  // after each k-block's loads
  __device__ __forceinline__ void done() {}    // after the last (or after giving up)
};

// The default consumer side: the configuration's epilogue (Cfg::Epilogue: TMA store, register
// store or add) writes the tile, then the op's tileStored hook if it has one (kTileHook).
template <class Cfg, class Op>
struct StoreEpilogue {
  using Epi = typename Cfg::Epilogue;
  const GemmArgs& g;
  const typename Op::Params& op;
  uint32_t flagsAddr;
  int half;
  EpiCtx ec;

  __device__ __forceinline__ StoreEpilogue(const GemmArgs& g_, const typename Op::Params& op_,
                                           const CUtensorMap* mapC, const SmemLayout<Cfg>& sm, int half_)
      : g(g_), op(op_), flagsAddr(sm.flags()), half(half_) {
    ec.mapC = mapC;
    ec.smem = sm.epi(half);
    ec.barrierId = 1u + static_cast<uint32_t>(half);
    ec.tid = threadIdx.x % 128u;
    ec.chunks = 0;
    ec.outType = g.outType;
    ec.M = g.M;
    ec.N = g.N;
    ec.C = g.C;
    ec.ldc = g.ldc;
    ec.bias = g.bias;
    ec.biasType = g.biasType;
  }
  template <class Tile>
  __device__ __forceinline__ void begin(const Tile&) {}
  __device__ __forceinline__ void afterKBlock(int) {}
  // Tile: m, n are the tile's M-block and N-block of C.
  template <class Tile>
  __device__ __forceinline__ void store(const float (&acc)[Cfg::kAcc], const Tile& t) {
    ec.row0 = static_cast<int64_t>(t.m) * Cfg::BM + half * 64;
    ec.col0 = static_cast<int64_t>(t.n) * Cfg::BN;
    Epi::template store<Cfg>(acc, ec);
    if constexpr (Op::kTileHook) {
      static_assert(Cfg::BN % 64 == 0, "a tile hook publishes whole TMA-stored chunks (epilogue.cuh)");
      Epi::complete(ec);
      if (ec.tid == 0) {
        const volatile int* flags = reinterpret_cast<const volatile int*>(__cvta_shared_to_generic(flagsAddr));
        Op::tileStored(g, op, t.m, t.n, half, flags[1] != 0);
      }
    }
  }
  __device__ __forceinline__ void finish() { Epi::finish(ec); }
};

// The plain order: grouped rasterisation over the whole output (tile_scheduler.cuh). Every
// scheduler is built from the kernel's arguments and the op's parameters.
struct RasterScheduler : dev::GroupedTileScheduler {
  using Tile = dev::TileCoord;
  static constexpr bool kClustersAlongN = true;  // clusters of M x N CTAs (GemmArgs::clusterN)
  template <class Params>
  __device__ __forceinline__ RasterScheduler(const GemmArgs& g, const Params&, int cluster, int numClusters,
                                             int ctaRank)
      : dev::GroupedTileScheduler(g.sched, cluster, numClusters, ctaRank) {}
};

struct GemmOpDefaults {
  struct Params {};

  using Scheduler = RasterScheduler;
  template <class Cfg, class Op>
  using Loads = PlainLoads<Cfg, Op>;
  template <class Cfg, class Op>
  using Epilogue = StoreEpilogue<Cfg, Op>;

  // The simple hooks of the default Loads / Epilogue.
  // beforeLoadA: called by the producer thread before it loads k-block kBlock of tile (mBlock,
  // nBlock), e.g. to wait for that chunk of A:
  //   return dev::waitGeq(comm, flag, want, peer, site) && (dev::fenceProxyAsync(), true);
  // (the proxy fence orders the flag read before the TMA read of the data). False puts the CTA in
  // drain mode: later waits are skipped, the schedule runs to its end on whatever memory holds, and
  // tileStored is told (the op's error is already recorded by the failed wait).
  static constexpr bool kLoadHook = false;
  __device__ static bool beforeLoadA(const GemmArgs&, const Params&, int mBlock, int nBlock, int kBlock) {
    return true;
  }
  // tileStored: once per consumer warpgroup (64 rows: `half` 0 or 1 of the 128-row tile), by one
  // thread, after that half tile's stores are complete and visible at system scope. Publish a
  // per-tile flag here (dev::storeRelease). `drain`: a wait failed, the tile is garbage.
  static constexpr bool kTileHook = false;
  __device__ static void tileStored(const GemmArgs&, const Params&, int mBlock, int nBlock, int half, bool drain) {}

  // Comm CTAs: blocks [0, args.nCommCtas) (whole clusters) run commCta with every thread; `smem`
  // (shared window address, 1024-aligned) and `smemBytes` are the block's dynamic shared memory.
  // They must not wait on compute CTAs of the same launch unless every CTA is co-resident (the
  // launcher sizes the grid so it is).
  static constexpr bool kCommCtas = false;
  __device__ static void commCta(const GemmArgs&, const Params&, int commCta, uint32_t smem, uint32_t smemBytes) {}

  // Threads 32..127 of a compute CTA's producer warpgroup (tid 0..95), beside the TMA thread.
  // `sched` is the CTA's schedule, not yet walked. Named barrier 3 is theirs (1, 2: the consumers').
  static constexpr bool kSideWarps = false;
  template <class Cfg>
  __device__ static void sideWarps(const GemmArgs&, const Params&, const SmemLayout<Cfg>&, const Scheduler& sched,
                                   uint32_t tid, int computeCta) {}

  // The consumer warpgroups' threads (tid 0..255) once their epilogues are finished.
  static constexpr bool kConsumerTail = false;
  template <class Cfg>
  __device__ static void consumerTail(const GemmArgs&, const Params&, const SmemLayout<Cfg>&, const Scheduler& sched,
                                      uint32_t tid) {}

  // Thread 0 of every compute CTA, after the barriers are initialised and before the CTA's first
  // sync (`words`: the shared words, zeroed); and after the CTA's last sync.
  static constexpr bool kStart = false, kEnd = false;
  __device__ static void start(const GemmArgs&, const Params&, uint32_t words) {}
  __device__ static void end(const GemmArgs&, const Params&) {}

  static constexpr uint32_t kSharedWords = 2;
  static constexpr uint32_t kProducerRegs = 0, kConsumerRegs = 0;

  // Launched as a programmatic dependent of the kernel before it in the stream (PDL; the host
  // adds the launch attribute where the tuner's gemm.pdl allows): every thread waits for that
  // kernel's completion before anything else (griddepcontrol.wait), and the CTA lets the next PDL
  // launch start.
  static constexpr bool kPdl = false;

  // The consumer mainloop, when the op accumulates differently (kernels/gemm/fp8_op.cuh):
  //   template <class Cfg, class Tile, class Hook>
  //   static bool mainloop(float (&acc)[Cfg::kAcc], dev::PipeState<Cfg::kStages>&, const GemmArgs&,
  //                        const Params&, const SmemLayout<Cfg>&, int consumer, uint32_t lane,
  //                        uint32_t ctaRank, const Tile&, Hook afterKBlock);
  // with consumerMainloop's contract (mainloop.cuh): the same stages, barriers and releases.
  static constexpr bool kMainloop = false;

  // Timestamps inside an epilogue's steps, for probes (tests/kernels/gemm_probe_test.cu): the
  // split-K epilogue calls stamp(op, point) from consumer 0's thread 0 between its steps. Compiled
  // out unless the op sets kEpilogueStamps.
  static constexpr bool kEpilogueStamps = false;
  __device__ static void epilogueStamp(const Params&, int point) {}
};

// The plain GEMM: no hooks; launched behind the previous kernel (PDL) where the tuner allows.
struct PlainGemmOp : GemmOpDefaults {
  static constexpr bool kPdl = true;
};

}  // namespace mkccl
