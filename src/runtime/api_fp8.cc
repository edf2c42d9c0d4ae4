// Public entry point of the fp8 (e4m3) GEMM: argument checks, then the op (src/ops/gemm/gemm_fp8.cu).
// Every check that needs no GPU comes first, so a caller's mistake is reported on any machine.
#include <stdint.h>
#include "mkccl.h"
#include "base/check.h"
#include "runtime/arg_checks.h"
#include "runtime/enqueue.h"
#include "runtime/ops_fp8.h"

using namespace mkccl;

namespace {

size_t outSize(mkcclDataType_t t) {
  return t == mkcclFloat32 ? 4 : (t == mkcclBfloat16 || t == mkcclFloat16) ? 2 : 0;
}

}  // namespace

mkcclResult_t mkcclGemmFp8(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                           const mkcclFp8Scales_t* scales, mkcclDataType_t outType, cudaStream_t stream) {
  const char* op = "mkcclGemmFp8";
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxTmaDim && N <= kMaxTmaDim && K <= kMaxTmaDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31",
            op, M, N, K);
  const size_t oes = outSize(outType);
  ARG_CHECK(oes != 0, "%s: outType %d must be mkcclBfloat16, mkcclFloat16 or mkcclFloat32", op,
            static_cast<int>(outType));
  ARG_CHECK(K % 16 == 0, "%s: K=%zu: the rows of A and W (K bytes of e4m3) must be multiples of 16 bytes (TMA)", op,
            K);
  ARG_CHECK((N * oes) % 16 == 0, "%s: N=%zu: the rows of C (%zu bytes) must be multiples of 16 bytes (TMA)", op, N,
            N * oes);
  ARG_CHECK(A && W && C, "%s: A, W and C must not be NULL", op);
  ARG_CHECK(((uintptr_t)A & 15) == 0 && ((uintptr_t)W & 15) == 0 && ((uintptr_t)C & 15) == 0,
            "%s: A=%p W=%p C=%p must be 16-byte aligned (TMA)", op, A, W, C);
  MKCCL_CHECK(fp8ScalesCheck(op, scales));
  const mkcclFp8ScaleKind_t kind = scales->kind;
  const size_t scaleABytes = fp8ScaleABytes(kind, M, K), scaleWBytes = fp8ScaleWBytes(kind, N, K);
  ARG_CHECK(!rangesOverlap(C, M * N * oes, A, M * K) && !rangesOverlap(C, M * N * oes, W, N * K) &&
                !rangesOverlap(C, M * N * oes, scales->scaleA, scaleABytes) &&
                !rangesOverlap(C, M * N * oes, scales->scaleW, scaleWBytes),
            "%s: C overlaps an input or a scale", op);
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9) return setError(mkcclInvalidUsage, "%s: device %d is not a Hopper GPU (sm_90 is required)", op, dev);
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkDevicePtr(A, M * K, dev, op, "A"));
  MKCCL_CHECK(checkDevicePtr(W, N * K, dev, op, "W"));
  MKCCL_CHECK(checkDevicePtr(C, M * N * oes, dev, op, "C"));
  MKCCL_CHECK(checkDevicePtr(scales->scaleA, scaleABytes, dev, op, "scales->scaleA"));
  MKCCL_CHECK(checkDevicePtr(scales->scaleW, scaleWBytes, dev, op, "scales->scaleW"));
  cudaGetLastError();
  MKCCL_CHECK(gemmFp8Op(A, W, C, M, N, K, kind, scales->scaleA, scales->scaleW, outType, stream));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return setError(mkcclUnhandledCudaError, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
  return mkcclSuccess;
}
