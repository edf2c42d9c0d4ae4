// Host side of the GEMM engine that fused ops share: tile configuration choice, tensor-map
// encoding, the fault word. (Compiled by nvcc only: includes device headers for GemmArgs.)
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels/abi/hd.h"
#include "kernels/gemm/gemm_args.h"
#include "mkccl.h"

namespace mkccl {

// Forced configurations (the tuner's gemm.variant: auto | simple | 256x2 | 256x1 | 128x1 | 128x2 |
// 192x1 | 192x2 | skinny, then <width>x1 | <width>x2 for the plain GEMM's other widths), for
// debugging and tests; Auto chooses per shape. Skinny: the decode kernel for M <= 32
// (kernels/gemm/skinny.cuh; the plain GEMM only, auto above 32 rows). Tiles of widths other than 128 and 256 exist for the plain GEMM
// only (they fill the waves of tiles where 128 and 256 leave the last one part empty:
// docs/PERFORMANCE.md).
enum class GemmVariant : int {
  Auto, Simple, F256C2, F256C1, F128C1, F128C2, F192C1, F192C2, Skinny,
  // 128 x kGemmNarrowWidths[i] tiles in clusters of c CTAs: kNarrow + 2 i + c - 1 (gemmNarrowVariant).
  kNarrow = 16
};
// The plain GEMM's widths besides 128, 192 and 256: multiples of 16 (gemm_config.cuh).
constexpr int kGemmNarrowWidths[] = {64, 80, 96, 112, 144, 160, 176, 208, 224, 240};
constexpr int kGemmNarrowCount = static_cast<int>(sizeof(kGemmNarrowWidths) / sizeof(kGemmNarrowWidths[0]));
inline GemmVariant gemmNarrowVariant(int i, int clusterSize) {
  return static_cast<GemmVariant>(static_cast<int>(GemmVariant::kNarrow) + 2 * i + clusterSize - 1);
}
// Whether v forces one of those widths, and which (width, cluster size).
inline bool gemmVariantNarrow(GemmVariant v, int* bn, int* clusterSize) {
  const int i = static_cast<int>(v) - static_cast<int>(GemmVariant::kNarrow);
  if (i < 0 || i >= 2 * kGemmNarrowCount) return false;
  *bn = kGemmNarrowWidths[i / 2];
  *clusterSize = 1 + i % 2;
  return true;
}
const char* gemmVariantName(GemmVariant v);
// The variant for kernels built with 128- and 256-wide tiles only (the fused ops, fp8 with
// per-tensor scales): 192x1 / 192x2 force the wide tile there, as 256x1 / 256x2 do; the other
// widths the 128-wide tile with the same cluster; skinny is auto there.
inline GemmVariant gemmVariantWide(GemmVariant v) {
  if (v == GemmVariant::Skinny) return GemmVariant::Auto;
  int bn = 0, cs = 1;
  if (gemmVariantNarrow(v, &bn, &cs)) return cs == 2 ? GemmVariant::F128C2 : GemmVariant::F128C1;
  return v == GemmVariant::F192C1 ? GemmVariant::F256C1 : v == GemmVariant::F192C2 ? GemmVariant::F256C2 : v;
}

struct GemmPlan {
  int bn = 256;         // output tile 128 x bn (128, 192, 256 or, plain GEMM only, kGemmNarrowWidths)
  int clusterSize = 2;  // CTAs per cluster along M, sharing the W tile by multicast
  int clusterN = 1;     // CTAs per cluster along N, sharing the A tile (the plain GEMM's whole tiles:
                        // gemmWithClusterN); a cluster is clusterSize x clusterN CTAs
  bool simple = false;  // debug variant: 128 x 128, no cluster, register epilogue
  int ctas = 0;         // compute CTAs (a multiple of clusterSize)
  int groupM = 16;      // raster band height in M-blocks
  int splits = 1;       // K split into this many parts (plain GEMM only: split_k_model.h); 0: stream-K
  int dpTiles = 0, skTiles = 0;  // stream-K: whole tiles, then tiles cut into ranges (stream_k_model.h)
};

struct GemmDeviceInfo {
  int smCount = 0, ccMajor = 0, ccMinor = 0;
  double hbmPeakBytesPerUs = 0;  // 2 x memory clock x bus width (0: not reported)
};
mkcclResult_t gemmDeviceInfo(int dev, GemmDeviceInfo* info);
// Peak HBM rate of device `dev` in bytes/us: 2 x memory clock x bus width; 0 where the driver does
// not report them.
inline double gemmHbmPeakBytesPerUs(int dev) {
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return 2.0 * khz * 1e3 * (bits / 8.0) / 1e6;
}

// The configuration for C[M, N] = A[M, K] . W[N, K]^T on at most ctaBudget CTAs.
// maxClusters2: how many 2-CTA clusters of the 128 x 256 kernel fit on the GPU at once (0: none).
// The model and the configurations' relative efficiencies: gemm_plan_model.h. rates: the plain
// GEMM's table for its GPU and rows (gemmTileRatesFor); null: the H200's aligned table, which the
// fused ops' planners were measured with. withTile192: auto may pick 128 x 192 tiles (the plain
// GEMM's kernels only).
struct GemmTileRates;
GemmPlan gemmPlanFor(int64_t M, int64_t N, int64_t K, GemmVariant v, int ctaBudget, int maxClusters2,
                     const GemmTileRates* rates = nullptr, bool withTile192 = false);

// Shape, k-blocks, schedule and cluster size of `args` for the plan (other fields untouched).
// Inline: tests that launch their own instantiation of the kernel set their arguments with it.
inline void gemmArgsFor(const GemmPlan& plan, int64_t M, int64_t N, int64_t K, GemmArgs* a) {
  a->M = M;
  a->N = N;
  a->K = K;
  a->kBlocks = static_cast<int>(ceilDiv(K, 64));
  a->clusterSize = plan.clusterSize * plan.clusterN;
  a->clusterN = plan.clusterN;
  a->nCommCtas = 0;
  a->sched.mBlocks = static_cast<int>(ceilDiv(M, 128));
  a->sched.nBlocks = static_cast<int>(ceilDiv(N, plan.bn));
  a->sched.clusterM = plan.clusterSize;
  a->sched.group = plan.groupM / plan.clusterSize > 1 ? plan.groupM / plan.clusterSize : 1;
  a->sched.rowRotate = 0;
  a->sched.clusterN = plan.clusterN;
}

// 2-D tensor map of a row-major [rows, cols] matrix of type t with a row pitch of ld elements:
// boxes of boxRows x (128 bytes of columns), 128-byte swizzle, zero fill out of bounds.
// The base must be 16-byte aligned and ld * element size a multiple of 16 (checked).
mkcclResult_t encodeTileMap(CUtensorMap* map, const void* base, mkcclDataType_t t, uint64_t rows, uint64_t cols,
                            uint64_t ld, uint32_t boxRows);

// The host-mapped word GEMM kernels write when an internal wait times out (a bug), and its check:
// mkcclInternalError (once) if a kernel since the last check reported one.
mkcclResult_t gemmFaultWord(int** deviceWord);
// The arguments of a grouped GEMM's launch (one-CTA clusters; groups and their schedule live in the
// op's Params): maxRows x N x K, C of outType with a pitch of N, the fault word, every other field 0.
mkcclResult_t groupedGemmArgs(int64_t maxRows, int64_t N, int64_t K, mkcclDataType_t outType, void* C,
                              uint64_t waitTimeoutNs, GemmArgs* g);
mkcclResult_t gemmCheckFault();

// Bound on the GEMM kernels' intra-CTA waits when no fused op sets one.
constexpr uint64_t kGemmWaitTimeoutNs = 30ull * 1000 * 1000 * 1000;

}  // namespace mkccl
