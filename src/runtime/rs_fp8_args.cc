// Checks of mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8's arguments (rs_fp8_args.h).
#include "runtime/rs_fp8_args.h"
#include <stdint.h>
#include "base/check.h"

namespace mkccl {
namespace {

constexpr size_t kMaxDim = (1ull << 31) - 1;  // TMA dimensions are 32-bit

bool overlaps(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = static_cast<const char*>(pa);
  const char* b = static_cast<const char*>(pb);
  return a && b && na && nb && a < b + nb && b < a + na;
}

bool aligned(const void* p, uintptr_t to) { return (reinterpret_cast<uintptr_t>(p) & (to - 1)) == 0; }

}  // namespace

mkcclResult_t gemmReduceFp8ArgsCheck(const char* op, bool allReduce, int nranks, int nNodes, const void* A,
                                     const void* W, const void* C, size_t M, size_t N, size_t K,
                                     const mkcclFp8Scales_t* scales, mkcclDataType_t outType) {
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxDim && N <= kMaxDim && K <= kMaxDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31", op, M,
            N, K);
  ARG_CHECK(nranks >= 1 && (allReduce || M % static_cast<size_t>(nranks) == 0),
            "%s: M=%zu must be divisible by the number of ranks (%d)", op, M, nranks);
  ARG_CHECK(outType == mkcclBfloat16 || outType == mkcclFloat16,
            "%s: outType %d must be mkcclBfloat16 or mkcclFloat16 (the partial products travel in it)", op,
            static_cast<int>(outType));
  ARG_CHECK(K % 16 == 0, "%s: K=%zu: the rows of A and W (K bytes of e4m3) must be multiples of 16 bytes (TMA)", op,
            K);
  ARG_CHECK(N % 8 == 0, "%s: N=%zu must be a multiple of 8 (the partial sums travel in 16-byte vectors)", op, N);
  ARG_CHECK(A && W && C, "%s: A, W and C must not be NULL", op);
  ARG_CHECK(aligned(A, 16) && aligned(W, 16) && aligned(C, 16), "%s: A=%p W=%p C=%p must be 16-byte aligned (TMA)",
            op, A, W, C);
  ARG_CHECK(scales != nullptr, "%s: scales must not be NULL", op);
  ARG_CHECK(scales->size >= sizeof(mkcclFp8Scales_t),
            "%s: scales->size=%zu: set it to sizeof(mkcclFp8Scales_t) (%zu) or use MKCCL_FP8_SCALES_INIT", op,
            scales->size, sizeof(mkcclFp8Scales_t));
  ARG_CHECK(scales->kind == mkcclFp8ScaleTensor || scales->kind == mkcclFp8ScaleBlock,
            "%s: scales->kind=%d must be mkcclFp8ScaleTensor or mkcclFp8ScaleBlock", op,
            static_cast<int>(scales->kind));
  if (scales->kind == mkcclFp8ScaleBlock)
    return setError(mkcclInvalidUsage,
                    "%s: block scales (mkcclFp8ScaleBlock) are not implemented for %s yet: use mkcclFp8ScaleTensor, "
                    "or mkcclGemmFp8 then mkccl%s",
                    op, allReduce ? "GEMM+AllReduce" : "GEMM+ReduceScatter", allReduce ? "AllReduce" : "ReduceScatter");
  ARG_CHECK(scales->scaleA && scales->scaleW, "%s: scales->scaleA and scales->scaleW must not be NULL", op);
  ARG_CHECK(aligned(scales->scaleA, 4) && aligned(scales->scaleW, 4), "%s: the scales must be 4-byte aligned floats",
            op);
  const size_t rows = allReduce ? M : M / static_cast<size_t>(nranks);
  const size_t cBytes = rows * N * 2;
  ARG_CHECK(!overlaps(C, cBytes, A, M * K) && !overlaps(C, cBytes, W, N * K), "%s: C overlaps A or W", op);
  ARG_CHECK(!overlaps(C, cBytes, scales->scaleA, 4) && !overlaps(C, cBytes, scales->scaleW, 4),
            "%s: C overlaps a scale", op);
  if (nNodes > 1)
    return setError(mkcclInvalidUsage,
                    "%s: not implemented across nodes yet (this communicator spans %d nodes): use mkcclGemmFp8 then "
                    "mkccl%s",
                    op, nNodes, allReduce ? "AllReduce" : "ReduceScatter");
  return mkcclSuccess;
}

}  // namespace mkccl
