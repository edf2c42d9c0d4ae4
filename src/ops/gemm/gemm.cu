// mkccl::gemmOp: the GEMM engine behind mkcclGemm (arguments already checked by the API; the
// checks here guard what the kernels themselves rely on).
#include <cuda_runtime.h>
#include "kernels/device/wgmma.cuh"
#include "ops/gemm/gemm_plain.cuh"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_plan.h"
#include "ops/tuner/tuning.h"
#include "base/check.h"
#include "runtime/cudriver.h"
#include "base/log.h"
#include "runtime/ops.h"

namespace mkccl {

static size_t gemmTypeBytes(mkcclDataType_t t) {
  return t == mkcclFloat32 ? 4 : (t == mkcclBfloat16 || t == mkcclFloat16) ? 2 : 0;
}

mkcclResult_t gemmRun(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                      mkcclDataType_t outType, GemmVariant v, cudaStream_t stream, int splitK, int packK,
                      int streamK, bool pdl, int clusterN) {
  return gemmRunEx(A, W, C, M, N, K, inType, outType, GemmExtras{}, v, stream, splitK, packK, streamK, pdl,
                   clusterN);
}

mkcclResult_t gemmRunEx(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                        mkcclDataType_t outType, const GemmExtras& x, GemmVariant v, cudaStream_t stream,
                        int splitK, int packK, int streamK, bool pdl, int clusterN) {
  ARG_CHECK(inType == mkcclBfloat16 || inType == mkcclFloat16, "mkcclGemm: input type %d is not bf16 or fp16",
            static_cast<int>(inType));
  ARG_CHECK(gemmTypeBytes(outType) != 0, "mkcclGemm: output type %d is not bf16, fp16 or fp32",
            static_cast<int>(outType));
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "mkcclGemm: empty shape %zux%zux%zu", M, N, K);
  ARG_CHECK(A != nullptr && W != nullptr && C != nullptr, "mkcclGemm: null operand");
  const size_t lda = x.lda ? x.lda : K, ldw = x.ldw ? x.ldw : K, ldc = x.ldc ? x.ldc : N;
  ARG_CHECK(lda >= K && ldw >= K && ldc >= N, "mkcclGemm: row pitches %zu, %zu, %zu below K = %zu / N = %zu", lda,
            ldw, ldc, K, N);
  ARG_CHECK((lda * 2) % 16 == 0 && (ldw * 2) % 16 == 0,
            "mkcclGemm: rows of A and W (%zu, %zu elements) must be multiples of 16 bytes", lda, ldw);
  ARG_CHECK((ldc * gemmTypeBytes(outType)) % 16 == 0 && (N * gemmTypeBytes(outType)) % 16 == 0,
            "mkcclGemm: rows of C (N = %zu, pitch %zu elements) must be multiples of 16 bytes (TMA)", N, ldc);

  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  GemmDeviceInfo info;
  MKCCL_CHECK(gemmDeviceInfo(dev, &info));
  if (info.ccMajor != 9)
    return setError(mkcclInvalidUsage, "mkcclGemm: needs a Hopper (sm_90) GPU; device %d is sm_%d%d", dev,
                    info.ccMajor, info.ccMinor);
  MKCCL_CHECK(cuDriverLoad());
  MKCCL_CHECK(gemmCheckFault());

  GemmProblem p{A, W, C, static_cast<int64_t>(M), static_cast<int64_t>(N), static_cast<int64_t>(K),
                inType, outType, splitK, packK};
  p.streamK = streamK;
  p.pdl = pdl;
  p.clusterN = clusterN;
  p.lda = static_cast<int64_t>(lda);
  p.ldw = static_cast<int64_t>(ldw);
  p.ldc = static_cast<int64_t>(ldc);
  p.bias = x.bias;
  p.biasType = x.biasType;
  if (inType == mkcclBfloat16) return plainGemm<dev::Bf16>(p, v, dev, info, stream);
  return plainGemm<dev::F16>(p, v, dev, info, stream);
}

mkcclResult_t gemmOp(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                     mkcclDataType_t outType, cudaStream_t stream) {
  Tuning t;
  MKCCL_CHECK(processTuning(&t));
  return gemmRun(A, W, C, M, N, K, inType, outType, t.gemm.variant, stream, t.gemm.splitK, t.gemm.packK,
                 t.gemm.streamK, t.gemm.pdl == 0, t.gemm.clusterN);
}

}  // namespace mkccl
