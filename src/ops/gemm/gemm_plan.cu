// Host planning of the GEMM engine: configuration per shape, tensor maps, the fault word.
#include "ops/gemm/gemm_plan.h"

#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <mutex>
#include "ops/gemm/gemm_plan_model.h"
#include "ops/gemm/split_k_model.h"
#include "base/check.h"
#include "runtime/cudriver.h"
#include "runtime/fault_word.h"
#include "base/log.h"

namespace mkccl {

const char* gemmVariantName(GemmVariant v) {
  switch (v) {
    case GemmVariant::Auto: return "auto";
    case GemmVariant::Simple: return "simple";
    case GemmVariant::F256C2: return "256x2";
    case GemmVariant::F256C1: return "256x1";
    case GemmVariant::F128C1: return "128x1";
    case GemmVariant::F128C2: return "128x2";
    case GemmVariant::F192C1: return "192x1";
    case GemmVariant::F192C2: return "192x2";
    case GemmVariant::Skinny: return "skinny";
    default: break;
  }
  static const char* const kNarrowNames[] = {"64x1",  "64x2",  "80x1",  "80x2",  "96x1",  "96x2",  "112x1",
                                             "112x2", "144x1", "144x2", "160x1", "160x2", "176x1", "176x2",
                                             "208x1", "208x2", "224x1", "224x2", "240x1", "240x2"};
  static_assert(sizeof(kNarrowNames) / sizeof(kNarrowNames[0]) == 2 * kGemmNarrowCount, "a name per variant");
  const int i = static_cast<int>(v) - static_cast<int>(GemmVariant::kNarrow);
  if (i >= 0 && i < 2 * kGemmNarrowCount) return kNarrowNames[i];
  return "?";
}

mkcclResult_t gemmDeviceInfo(int dev, GemmDeviceInfo* info) {
  static std::mutex mu;
  static GemmDeviceInfo cache[64];
  if (dev < 0 || dev >= 64) return setError(mkcclInternalError, "gemm: device %d out of range", dev);
  std::lock_guard<std::mutex> lock(mu);
  if (cache[dev].smCount == 0) {
    GemmDeviceInfo d;
    CUDA_CHECK(cudaDeviceGetAttribute(&d.smCount, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&d.ccMajor, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&d.ccMinor, cudaDevAttrComputeCapabilityMinor, dev));
    d.hbmPeakBytesPerUs = gemmHbmPeakBytesPerUs(dev);
    MKCCL_INFO("device %d: %d SMs, sm_%d%d, HBM peak %.2f TB/s (split-K model: %s rates)", dev, d.smCount, d.ccMajor,
               d.ccMinor, d.hbmPeakBytesPerUs / 1e6,
               &splitKRatesFor(d.hbmPeakBytesPerUs) == &kSplitKRatesH200 ? "H200" : "H100");
    cache[dev] = d;
  }
  *info = cache[dev];
  return mkcclSuccess;
}

GemmPlan gemmPlanFor(int64_t M, int64_t N, int64_t K, GemmVariant v, int ctaBudget, int maxClusters2,
                     const GemmTileRates* rates, bool withTile192) {
  return gemmPlanModel(M, N, K, v, ctaBudget, maxClusters2, rates ? *rates : kGemmTilesH200, withTile192);
}

mkcclResult_t groupedGemmArgs(int64_t maxRows, int64_t N, int64_t K, mkcclDataType_t outType, void* C,
                              uint64_t waitTimeoutNs, GemmArgs* g) {
  memset(g, 0, sizeof(*g));
  g->M = maxRows;
  g->N = N;
  g->K = K;
  g->kBlocks = static_cast<int>(ceilDiv(K, 64));
  g->clusterSize = 1;
  g->outType = outType;
  g->C = C;
  g->ldc = N;
  g->waitTimeoutNs = waitTimeoutNs;
  return gemmFaultWord(&g->fault);
}

static CUtensorMapDataType mapType(mkcclDataType_t t) {
  switch (t) {
    case mkcclBfloat16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case mkcclFloat16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    default: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
}

mkcclResult_t encodeTileMap(CUtensorMap* map, const void* base, mkcclDataType_t t, uint64_t rows, uint64_t cols,
                            uint64_t ld, uint32_t boxRows) {
  const uint64_t elt = t == mkcclFloat32 ? 4 : 2;
  if (t != mkcclFloat32 && t != mkcclBfloat16 && t != mkcclFloat16)
    return setError(mkcclInternalError, "encodeTileMap: unsupported type %d", static_cast<int>(t));
  if ((reinterpret_cast<uintptr_t>(base) & 15u) != 0)
    return setError(mkcclInvalidArgument, "GEMM operand %p is not 16-byte aligned (TMA needs it)", base);
  if ((ld * elt) % 16 != 0 || ld < cols)
    return setError(mkcclInvalidArgument, "GEMM row pitch of %llu elements is not a multiple of 16 bytes",
                    static_cast<unsigned long long>(ld));
  if (rows > (1ull << 31) || cols > (1ull << 31))
    return setError(mkcclInvalidArgument, "GEMM dimension %llu x %llu too large (2^31 at most)",
                    static_cast<unsigned long long>(rows), static_cast<unsigned long long>(cols));
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {ld * elt};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / elt), boxRows};
  const cuuint32_t estrides[2] = {1, 1};
  // A row pitch off a multiple of 128 bytes puts each 128-byte box row across two lines; with
  // 256-byte promotion the L2 then fetches up to twice the bytes it needs: 8192 x 8192 x 4104
  // unpacked took 1124 us with 256-byte promotion, 935 with 128 and 959 with none (one H200,
  // perf/results/20261127-s7-1xH100-H200/2-oddk-load/); aligned rows keep 256.
  const CUtensorMapL2promotion promotion =
      (ld * elt) % 128 == 0 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  CU_CHECK(cu().tensorMapEncodeTiled(map, mapType(t), 2, const_cast<void*>(base), dims, strides, box, estrides,
                                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return mkcclSuccess;
}

namespace {
FaultWord gFault;  // every GEMM-engine kernel's (plain, grouped, fused)
}  // namespace

mkcclResult_t gemmFaultWord(int** deviceWord) { return gFault.device(deviceWord); }

mkcclResult_t gemmCheckFault() {
  const int code = gFault.take();
  if (code == 0) return mkcclSuccess;
  if ((code & 0xff) == kGemmFaultGroupOffsets)
    return setError(mkcclInvalidArgument,
                    "mkcclGroupedGemm: an earlier call's row offsets (read on the device) were not non-decreasing "
                    "multiples of 128: that call computed only the groups before the first bad offset");
  return setError(mkcclInternalError,
                  "mkcclGemm: an earlier GEMM kernel gave up waiting on its %s pipeline barrier (block %d) after "
                  "%llu s: a bug in the GEMM engine; that result was wrong",
                  (code & 0xff) == kGemmFaultProducer ? "producer (empty)" : "consumer (full)", (code >> 8) - 1,
                  static_cast<unsigned long long>(kGemmWaitTimeoutNs / 1000000000ull));
}

}  // namespace mkccl
