// mkcclGroupedGemmSwiglu: the grouped GEMM (kernels/gemm/grouped.cuh) with the SwiGLU epilogue
// (kernels/gemm/grouped_swiglu.cuh). Argument checks, tensor maps, launch.
#include <string.h>
#include "kernels/device/wgmma.cuh"
#include "kernels/gemm/grouped_swiglu.cuh"
#include "mkccl.h"
#include "ops/gemm/gemm_launch.cuh"
#include "ops/gemm/gemm_plan.h"
#include "base/check.h"
#include "base/log.h"
#include "runtime/cudriver.h"
#include "runtime/enqueue.h"
#include "runtime/ops.h"

namespace mkccl {
namespace {

template <class In, class Op = GroupedSwigluOp>
using SwigluLauncher = GemmLauncher<GemmCfg<In, 256, EpilogueTmaStore>, Op>;

// Rows of one group's W1: 2 Ip in the blocked interleave, 2 I gate then up.
int64_t w1Rows(int64_t I, mkcclSwigluLayout_t layout) {
  return layout == mkcclSwigluGateUp ? 2 * I : 2 * ((I + 127) / 128 * 128);
}

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

template <class In, class Op>
mkcclResult_t launchSwiglu(const void* A, const void* W1, void* C, const int* rowOffsets, int groups, int64_t maxRows,
                           int64_t I, int64_t K, mkcclDataType_t inType, mkcclDataType_t outType,
                           mkcclSwigluLayout_t layout, int dev, int smCount, cudaStream_t stream) {
  int unused = 0;
  MKCCL_CHECK((SwigluLauncher<In, Op>::prepare(dev, smCount, 1, &unused)));
  const int64_t Np = w1Rows(I, layout);
  GemmArgs g;
  MKCCL_CHECK(groupedGemmArgs(maxRows, I, K, outType, C, kGemmWaitTimeoutNs, &g));

  GroupedSwigluOp::Params p;
  p.grouped.rowOffsets = rowOffsets;
  p.grouped.groups = groups;
  p.grouped.bn = 256;
  p.grouped.nBlocks = static_cast<int>(roundUp(I, 128) / 128);
  p.grouped.band = 8;
  p.grouped.N = Np;
  p.grouped.maxRows = roundUp(maxRows, 128);

  alignas(64) CUtensorMap mapA, mapB, mapC;
  MKCCL_CHECK(encodeTileMap(&mapA, A, inType, maxRows, K, K, 128));
  // Gate-up: two 128-row boxes per stage (GateUpLoads).
  MKCCL_CHECK(encodeTileMap(&mapB, W1, inType, uint64_t(groups) * Np, K, K, layout == mkcclSwigluGateUp ? 128 : 256));
  MKCCL_CHECK(encodeTileMap(&mapC, C, outType, maxRows, I, I, 64));
  MKCCL_TRACE("mkcclGroupedGemmSwiglu %d groups, up to %lld rows, I %lld, K %lld, W1 %s: %d CTAs", groups,
              (long long)maxRows, (long long)I, (long long)K, layout == mkcclSwigluGateUp ? "gate-up" : "blocked",
              smCount);
  return SwigluLauncher<In, Op>::launch(mapA, mapB, mapC, g, p, smCount, stream);
}

bool overlaps(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = static_cast<const char*>(pa);
  const char* b = static_cast<const char*>(pb);
  return na && nb && a < b + nb && b < a + na;
}

}  // namespace

// Loads the SwiGLU kernels on `dev` (preload.cu, at communicator init).
mkcclResult_t groupedSwigluPreload(int dev, int smCount) {
  int unused = 0;
  MKCCL_CHECK(SwigluLauncher<dev::Bf16>::prepare(dev, smCount, 1, &unused));
  MKCCL_CHECK(SwigluLauncher<dev::F16>::prepare(dev, smCount, 1, &unused));
  MKCCL_CHECK((SwigluLauncher<dev::Bf16, GroupedSwigluGateUpOp>::prepare(dev, smCount, 1, &unused)));
  return SwigluLauncher<dev::F16, GroupedSwigluGateUpOp>::prepare(dev, smCount, 1, &unused);
}

}  // namespace mkccl

using namespace mkccl;

mkcclResult_t mkcclGroupedGemmSwiglu(const void* A, const void* W1, void* C, const int* rowOffsets, int groups,
                                     size_t maxRows, size_t I, size_t K, mkcclDataType_t inType,
                                     mkcclDataType_t outType, cudaStream_t stream) {
  return mkcclGroupedGemmSwigluEx(A, W1, mkcclSwigluBlocked, C, rowOffsets, groups, maxRows, I, K, inType, outType,
                                  stream);
}

mkcclResult_t mkcclGroupedGemmSwigluEx(const void* A, const void* W1, mkcclSwigluLayout_t w1Layout, void* C,
                                       const int* rowOffsets, int groups, size_t maxRows, size_t I, size_t K,
                                       mkcclDataType_t inType, mkcclDataType_t outType, cudaStream_t stream) {
  const char* op = "mkcclGroupedGemmSwiglu";
  ARG_CHECK(w1Layout == mkcclSwigluBlocked || w1Layout == mkcclSwigluGateUp,
            "%s: w1Layout=%d: expected mkcclSwigluBlocked or mkcclSwigluGateUp", op, (int)w1Layout);
  ARG_CHECK(groups >= 1, "%s: groups=%d: expected >= 1", op, groups);
  ARG_CHECK(maxRows >= 1 && maxRows <= (size_t(1) << 31) - 128, "%s: maxRows=%zu: expected 1 .. 2^31 - 128", op,
            maxRows);
  ARG_CHECK(I >= 1 && K >= 1 && I <= (size_t(1) << 24) && K <= (size_t(1) << 24),
            "%s: I=%zu, K=%zu: expected 1 .. 2^24", op, I, K);
  ARG_CHECK(I % 8 == 0 && K % 8 == 0, "%s: I=%zu and K=%zu must be multiples of 8 (16-byte row pitches)", op, I, K);
  const size_t Np = (size_t)w1Rows((int64_t)I, w1Layout);
  ARG_CHECK(size_t(groups) * Np < (size_t(1) << 31), "%s: groups x %zu = %zu: W1 has at most 2^31 rows", op, Np,
            size_t(groups) * Np);
  ARG_CHECK(inType == mkcclBfloat16 || inType == mkcclFloat16, "%s: inType must be mkcclBfloat16 or mkcclFloat16",
            op);
  ARG_CHECK(outType == mkcclBfloat16 || outType == mkcclFloat16,
            "%s: outType must be mkcclBfloat16 or mkcclFloat16", op);
  ARG_CHECK(A && W1 && C && rowOffsets, "%s: A, W1, C and rowOffsets must not be NULL", op);
  ARG_CHECK(((uintptr_t)A | (uintptr_t)W1 | (uintptr_t)C) % 16 == 0, "%s: A, W1 and C must be 16-byte aligned", op);
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  int major = 0, smCount = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&smCount, cudaDevAttrMultiProcessorCount, dev));
  if (major != 9) return setError(mkcclInvalidUsage, "%s: device %d is not a Hopper GPU (sm_90 is required)", op, dev);
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkDevicePtr(A, maxRows * K * 2, dev, op, "A"));
  MKCCL_CHECK(checkDevicePtr(W1, size_t(groups) * Np * K * 2, dev, op, "W1"));
  MKCCL_CHECK(checkDevicePtr(C, maxRows * I * 2, dev, op, "C"));
  MKCCL_CHECK(checkDevicePtr(rowOffsets, (size_t(groups) + 1) * sizeof(int), dev, op, "rowOffsets"));
  ARG_CHECK(!overlaps(C, maxRows * I * 2, A, maxRows * K * 2) && !overlaps(C, maxRows * I * 2, W1, size_t(groups) * Np * K * 2) &&
                !overlaps(C, maxRows * I * 2, rowOffsets, (size_t(groups) + 1) * sizeof(int)),
            "%s: C overlaps an input", op);
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  cudaGetLastError();
  const bool gateUp = w1Layout == mkcclSwigluGateUp;
  const int64_t M = int64_t(maxRows), In = int64_t(I), Kk = int64_t(K);
  mkcclResult_t r;
  if (inType == mkcclBfloat16)
    r = gateUp ? launchSwiglu<dev::Bf16, GroupedSwigluGateUpOp>(A, W1, C, rowOffsets, groups, M, In, Kk, inType,
                                                                outType, w1Layout, dev, smCount, stream)
               : launchSwiglu<dev::Bf16, GroupedSwigluOp>(A, W1, C, rowOffsets, groups, M, In, Kk, inType, outType,
                                                          w1Layout, dev, smCount, stream);
  else
    r = gateUp ? launchSwiglu<dev::F16, GroupedSwigluGateUpOp>(A, W1, C, rowOffsets, groups, M, In, Kk, inType,
                                                               outType, w1Layout, dev, smCount, stream)
               : launchSwiglu<dev::F16, GroupedSwigluOp>(A, W1, C, rowOffsets, groups, M, In, Kk, inType, outType,
                                                         w1Layout, dev, smCount, stream);
  MKCCL_CHECK(r);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return setError(mkcclUnhandledCudaError, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
  return mkcclSuccess;
}
