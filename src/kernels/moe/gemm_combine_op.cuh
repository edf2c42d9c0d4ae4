// The second expert GEMM of the fused MoE GEMM2 + combine (mkcclMoeGemmCombine): the grouped GEMM
// (grouped.cuh), Y = act . W2^T per local expert, on a stream of its own beside the combine kernel
// (moe_combine.cu, Args::yDone), which returns each row of Y to its token's rank as soon as the
// row's 128-row block is complete instead of after the whole GEMM.
//
//   tileStored  once per stored 64-row half of a tile (its stores complete and visible at system
//               scope, the engine's kTileHook), a release add of 1 to the block's word
//               done[1 + mBlock]. A block is complete when its word reaches 2 x nBlocks (every
//               N-block, both halves); the words are zeroed on the stream before the call.
//
// The GEMM waits for nothing (act and the layout are written by earlier work on the stream), so
// only the combine's reads of Y wait, bounded by the communicator's timeout. On drain (an internal
// fault) the add still happens: the combine then reads garbage rather than waiting forever, and
// the fault is reported by the next GEMM-family call.
#pragma once
#include <stdint.h>
#include "kernels/device/signal.cuh"
#include "kernels/gemm/grouped.cuh"

namespace mkccl {

struct MoeGemmCombineOp : GroupedGemmOp {
  struct Params {
    GroupedParams grouped;
    uint64_t* done;  // this rank's Region::arrivals: [1 + b] block b's stored halves
  };
  static constexpr bool kTileHook = true;
  __device__ __forceinline__ static void tileStored(const GemmArgs&, const Params& p, int mBlock, int, int, bool) {
    dev::addRelease(p.done + 1 + mBlock, 1);
  }
};

}  // namespace mkccl
