// The extension points of the persistent GEMM kernel (see README.md in this directory): a fused op
// derives from GemmOpDefaults and shadows what it needs. Every hook is a static member, resolved
// at compile time; a hook left at its default compiles to nothing.
#pragma once
#include <stdint.h>
#include "kernels/device/tile_scheduler.cuh"
#include "kernels/gemm/gemm_args.h"

namespace mkccl {

struct GemmOpDefaults {
  // The op's own kernel parameters (flags, peer pointers, DevComm, ...), passed by value.
  struct Params {};

  // Blocks [0, args.nCommCtas) run commRole with every one of their threads instead of computing
  // (whole clusters: nCommCtas is a multiple of clusterSize). `smem` is the block's dynamic shared
  // memory (Cfg::kSmemBytes). They must not wait on compute CTAs of the same launch unless every
  // CTA is co-resident (the launcher sizes the grid so it is).
  static constexpr bool kCommRole = false;
  __device__ static void commRole(const GemmArgs&, const Params&, int commCta, uint8_t* smem) {}

  // Called by the producer thread before it loads the A tile of (mBlock, kBlock) for output tile
  // (mBlock, nBlock), e.g. to wait for that chunk of A to arrive:
  //   return dev::waitGeq(comm, flag, want, peer, site) && (dev::fenceProxyAsync(), true);
  // (the proxy fence orders the flag read before the TMA read of the data). Returning false puts
  // the CTA in drain mode: later hooks are skipped, the schedule runs to its end on whatever is in
  // memory, and tileStored is told (the op's error is already recorded by the failed wait).
  static constexpr bool kLoadHook = false;
  __device__ static bool beforeLoadA(const GemmArgs&, const Params&, int mBlock, int nBlock, int kBlock) {
    return true;
  }

  // Called once per consumer warpgroup (64 rows: `half` 0 or 1 of the 128-row tile) by one thread,
  // after that half tile's stores are complete and visible at system scope (TMA stores waited
  // for, register stores fenced). Publish a per-tile flag here (dev::storeRelease). `drain` is
  // true when a load hook failed: the tile is garbage; do not publish it.
  static constexpr bool kTileHook = false;
  __device__ static void tileStored(const GemmArgs&, const Params&, int mBlock, int nBlock, int half, bool drain) {}

  // Which tiles, in what order (tile_scheduler.cuh). An op may supply its own class with the same
  // constructor and next() (e.g. a dynamic, arrival-ordered queue).
  using Scheduler = dev::GroupedTileScheduler;
};

// The plain GEMM: no hooks.
struct PlainGemmOp : GemmOpDefaults {};

}  // namespace mkccl
