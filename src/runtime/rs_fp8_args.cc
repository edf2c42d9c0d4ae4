// Checks of mkcclGemmReduceScatterFp8 / mkcclGemmAllReduceFp8's arguments (rs_fp8_args.h).
#include "runtime/rs_fp8_args.h"
#include <stdint.h>
#include "base/check.h"
#include "runtime/arg_checks.h"

namespace mkccl {
mkcclResult_t gemmReduceFp8ArgsCheck(const char* op, bool allReduce, int nranks, const void* A,
                                     const void* W, const void* C, size_t M, size_t N, size_t K,
                                     const mkcclFp8Scales_t* scales, mkcclDataType_t outType) {
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxTmaDim && N <= kMaxTmaDim && K <= kMaxTmaDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31",
            op, M, N, K);
  ARG_CHECK(nranks >= 1 && (allReduce || M % static_cast<size_t>(nranks) == 0),
            "%s: M=%zu must be divisible by the number of ranks (%d)", op, M, nranks);
  ARG_CHECK(outType == mkcclBfloat16 || outType == mkcclFloat16,
            "%s: outType %d must be mkcclBfloat16 or mkcclFloat16 (the partial products travel in it)", op,
            static_cast<int>(outType));
  ARG_CHECK(K % 16 == 0, "%s: K=%zu: the rows of A and W (K bytes of e4m3) must be multiples of 16 bytes (TMA)", op,
            K);
  ARG_CHECK(N % 8 == 0, "%s: N=%zu must be a multiple of 8 (the partial sums travel in 16-byte vectors)", op, N);
  ARG_CHECK(A && W && C, "%s: A, W and C must not be NULL", op);
  ARG_CHECK(isAligned(A, 16) && isAligned(W, 16) && isAligned(C, 16),
            "%s: A=%p W=%p C=%p must be 16-byte aligned (TMA)", op, A, W, C);
  MKCCL_CHECK(fp8ScalesCheck(op, scales));
  const size_t rows = allReduce ? M : M / static_cast<size_t>(nranks);
  const size_t cBytes = rows * N * 2;
  ARG_CHECK(!rangesOverlap(C, cBytes, A, M * K) && !rangesOverlap(C, cBytes, W, N * K), "%s: C overlaps A or W", op);
  ARG_CHECK(!rangesOverlap(C, cBytes, scales->scaleA, fp8ScaleABytes(scales->kind, M, K)) &&
                !rangesOverlap(C, cBytes, scales->scaleW, fp8ScaleWBytes(scales->kind, N, K)),
            "%s: C overlaps a scale", op);
  return mkcclSuccess;
}

}  // namespace mkccl
