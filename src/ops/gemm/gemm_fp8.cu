// mkccl::gemmFp8Op: the fp8 GEMM behind mkcclGemmFp8 (arguments checked by the API; the checks
// here guard what the kernels rely on). The kernels are the engine's (kernels/gemm/fp8_op.cuh).
#include <string.h>
#include <cuda_runtime.h>
#include "base/check.h"
#include "base/log.h"
#include "ops/gemm/gemm_fp8.h"
#include "ops/gemm/gemm_fp8_plan.h"
#include "ops/tuner/tuning.h"
#include "runtime/cudriver.h"
#include "runtime/ops_fp8.h"

namespace mkccl {

GemmPlan gemmFp8Plan(const Fp8Problem& p, GemmVariant v, int smCount, int maxClusters2) {
  return gemmFp8PlanModel(p.kind, p.M, p.N, p.K, v, smCount, maxClusters2);
}

mkcclResult_t gemmFp8Prepare(const Fp8Problem& p, const GemmPlan& plan, GemmArgs* g, CUtensorMap* mapA,
                             CUtensorMap* mapB, CUtensorMap* mapC) {
  memset(g, 0, sizeof(*g));
  gemmArgsFor(plan, p.M, p.N, p.K / 2, g);  // kBlocks = ceil(K / 128): one fp8 k-block = 64 16-bit columns
  g->outType = p.outType;
  g->C = p.C;
  g->ldc = p.N;
  g->waitTimeoutNs = kGemmWaitTimeoutNs;
  MKCCL_CHECK(gemmFaultWord(&g->fault));
  // e4m3 rows moved as 16-bit elements: TMA copies bytes, the 128-byte box is 128 fp8 columns.
  MKCCL_CHECK(encodeTileMap(mapA, p.A, mkcclBfloat16, p.M, p.K / 2, p.K / 2, 128));
  MKCCL_CHECK(encodeTileMap(mapB, p.W, mkcclBfloat16, p.N, p.K / 2, p.K / 2,
                            static_cast<uint32_t>(plan.bn / plan.clusterSize)));
  MKCCL_CHECK(encodeTileMap(mapC, p.C, p.outType, p.M, p.N, p.N, 64));
  return mkcclSuccess;
}

mkcclResult_t gemmFp8Run(const Fp8Problem& p, GemmVariant v, int dev, cudaStream_t stream) {
  MKCCL_CHECK(cuDriverLoad());  // the tensor maps' encoder
  MKCCL_CHECK(gemmCheckFault());
  GemmDeviceInfo info;
  MKCCL_CHECK(gemmDeviceInfo(dev, &info));
  if (p.kind == mkcclFp8ScaleBlock) return gemmFp8BlockLaunch(p, v, dev, info, stream);
  return gemmFp8TensorLaunch(p, v, dev, info, stream);
}

mkcclResult_t gemmFp8Op(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                        mkcclFp8ScaleKind_t kind, const float* scaleA, const float* scaleW, mkcclDataType_t outType,
                        cudaStream_t stream) {
  ARG_CHECK(K % 16 == 0, "mkcclGemmFp8: K = %zu must be a multiple of 16", K);
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  GemmDeviceInfo info;
  MKCCL_CHECK(gemmDeviceInfo(dev, &info));
  if (info.ccMajor != 9)
    return setError(mkcclInvalidUsage, "mkcclGemmFp8: needs a Hopper (sm_90) GPU; device %d is sm_%d%d", dev,
                    info.ccMajor, info.ccMinor);
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());
  Tuning t;
  MKCCL_CHECK(processTuning(&t));
  const Fp8Problem p{A, W, C, static_cast<int64_t>(M), static_cast<int64_t>(N), static_cast<int64_t>(K),
                     kind, scaleA, scaleW, outType};
  if (kind == mkcclFp8ScaleBlock) return gemmFp8BlockLaunch(p, t.gemm.variant, dev, info, stream);
  return gemmFp8TensorLaunch(p, t.gemm.variant, dev, info, stream);
}

}  // namespace mkccl
