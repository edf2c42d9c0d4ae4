// Arguments of the persistent GEMM kernel, shared by the host (planning, launch) and the device.
// Passed by value as a kernel parameter next to the three tensor maps and the op's own Params.
#pragma once
#include <stdint.h>
#include "kernels/device/tile_scheduler.cuh"
#include "mkccl.h"

namespace mkccl {

struct GemmArgs {
  int64_t M, N, K;
  int kBlocks;                   // ceil(K / BK)
  int clusterSize;               // CTAs per cluster: clusterSize / clusterN along M (sharing the W
                                 // tile by multicast) times clusterN along N
  int clusterN;                  // CTAs per cluster along N, sharing the A tile (0 or 1: none; the
                                 // plain GEMM's scheduler only, which reads sched.clusterN)
  int nCommCtas;                 // blocks [0, nCommCtas) run Op::commCta; a multiple of clusterSize
  dev::TileSchedParams sched;    // tiles and their order
  int outType;                   // mkcclDataType_t of C (bf16, fp16, fp32)
  void* C;                       // register epilogues: destination (local or a peer's mapping) ...
  int64_t ldc;                   // ... and its row pitch in elements (even)
  uint64_t waitTimeoutNs;        // bound on every intra-CTA mbarrier wait (longer than any hook wait)
  int* fault;                    // host-mapped word; an intra-CTA wait that timed out writes its code
  int aBoxRows;                  // rows of mapA's box when fewer than BM (M < BM: no zero fill of
                                 // rows past M; the rest of the A tile is stale, and only feeds
                                 // output rows the store clips); 0: BM
  const void* bias;              // [N] added in fp32 before the output conversion by the store
                                 // epilogues (StoreEpilogue); null: none (every launch zeroes it)
  int biasType;                  // mkcclDataType_t of bias (bf16, fp16, fp32)
};

// Fault word codes: (block + 1) << 8 | site.
// kGemmFaultGroupOffsets: a grouped GEMM's row offsets (device memory) were not usable.
enum GemmFaultSite : int { kGemmFaultProducer = 1, kGemmFaultConsumer = 2, kGemmFaultGroupOffsets = 3 };

}  // namespace mkccl
