// mkccl::groupedGemmOp (mkcclGroupedGemm): the engine over G stacked problems (kernels/gemm/
// grouped.cuh). Arguments were checked by the API (api_fused.cc); the row offsets are in device
// memory and only the kernel reads them.
#include <string.h>
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm/grouped.cuh"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm/gemm_plan.h"
#include "base/check.h"
#include "runtime/cudriver.h"
#include "base/log.h"

namespace mkccl {
namespace {

template <class In, int kBN>
using GroupedLauncher = GemmLauncher<GemmCfg<In, kBN, EpilogueTmaStore>, GroupedGemmOp>;

template <class In>
mkcclResult_t launchGrouped(const void* A, const void* W, void* C, const int* rowOffsets, int groups, int64_t maxRows,
                            int64_t N, int64_t K, mkcclDataType_t inType, mkcclDataType_t outType, int dev,
                            const GemmDeviceInfo& info, cudaStream_t stream) {
  // 128 x 256 tiles unless N is narrow (a group's last N-block would be mostly padding).
  const int bn = N > 128 ? 256 : 128;
  int unused = 0;
  if (bn == 256) MKCCL_CHECK((GroupedLauncher<In, 256>::prepare(dev, info.smCount, 1, &unused)));
  else MKCCL_CHECK((GroupedLauncher<In, 128>::prepare(dev, info.smCount, 1, &unused)));

  GemmArgs g;
  MKCCL_CHECK(groupedGemmArgs(maxRows, N, K, outType, C, kGemmWaitTimeoutNs, &g));

  GroupedGemmOp::Params p;
  p.grouped.rowOffsets = rowOffsets;
  p.grouped.groups = groups;
  p.grouped.bn = bn;
  p.grouped.nBlocks = static_cast<int>(ceilDiv(N, bn));
  p.grouped.band = 8;
  p.grouped.N = N;
  p.grouped.maxRows = ceilDiv(maxRows, 128) * 128;

  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, A, inType, maxRows, K, K, 128));
  MKCCL_CHECK(encodeTileMap(&mapB, W, inType, uint64_t(groups) * N, K, K, uint32_t(bn)));
  MKCCL_CHECK(encodeTileMap(&mapC, C, outType, maxRows, N, N, 64));
  // Every SM: how many tiles there are is known only on the device.
  const int ctas = info.smCount;
  MKCCL_TRACE("mkcclGroupedGemm %d groups, up to %lld rows, N %lld, K %lld: tile 128x%d, %d CTAs", groups,
              (long long)maxRows, (long long)N, (long long)K, bn, ctas);
  if (bn == 256) return GroupedLauncher<In, 256>::launch(mapA, mapB, mapC, g, p, ctas, stream);
  return GroupedLauncher<In, 128>::launch(mapA, mapB, mapC, g, p, ctas, stream);
}

}  // namespace

mkcclResult_t groupedGemmOp(const void* A, const void* W, void* C, const int* rowOffsets, int groups, size_t maxRows,
                            size_t N, size_t K, mkcclDataType_t inType, mkcclDataType_t outType, cudaStream_t stream) {
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  GemmDeviceInfo info;
  MKCCL_CHECK(gemmDeviceInfo(dev, &info));
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  if (inType == mkcclBfloat16)
    return launchGrouped<dev::Bf16>(A, W, C, rowOffsets, groups, int64_t(maxRows), int64_t(N), int64_t(K), inType,
                                    outType, dev, info, stream);
  return launchGrouped<dev::F16>(A, W, C, rowOffsets, groups, int64_t(maxRows), int64_t(N), int64_t(K), inType, outType,
                                 dev, info, stream);
}

// Loads the grouped GEMM's kernels on `dev` (preload.cu).
mkcclResult_t groupedGemmPreload(int dev, int smCount) {
  int unused = 0;
  MKCCL_CHECK((GroupedLauncher<dev::Bf16, 256>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GroupedLauncher<dev::Bf16, 128>::prepare(dev, smCount, 1, &unused)));
  MKCCL_CHECK((GroupedLauncher<dev::F16, 256>::prepare(dev, smCount, 1, &unused)));
  return GroupedLauncher<dev::F16, 128>::prepare(dev, smCount, 1, &unused);
}

}  // namespace mkccl
