// Checks of mkcclAllGatherGemmFp8's arguments (ag_fp8_args.h).
#include "runtime/ag_fp8_args.h"
#include <stdint.h>
#include "base/check.h"
#include "runtime/arg_checks.h"

namespace mkccl {
namespace {

size_t outBytes(mkcclDataType_t t) {
  return t == mkcclFloat32 ? 4 : (t == mkcclBfloat16 || t == mkcclFloat16) ? 2 : 0;
}

}  // namespace

mkcclResult_t agGemmFp8ArgsCheck(const char* op, int nranks, int rank, const void* A, const void* W, const void* C,
                                 const void* gatheredA, size_t M, size_t N, size_t K, const mkcclFp8Scales_t* scales,
                                 mkcclDataType_t outType) {
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxTmaDim && N <= kMaxTmaDim && K <= kMaxTmaDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31",
            op, M, N, K);
  ARG_CHECK(nranks >= 1 && M % static_cast<size_t>(nranks) == 0,
            "%s: M=%zu must be divisible by the number of ranks (%d)", op, M, nranks);
  const size_t oes = outBytes(outType);
  ARG_CHECK(oes != 0, "%s: outType %d must be mkcclBfloat16, mkcclFloat16 or mkcclFloat32", op,
            static_cast<int>(outType));
  ARG_CHECK(K % 16 == 0, "%s: K=%zu: the rows of A and W (K bytes of e4m3) must be multiples of 16 bytes (TMA)", op,
            K);
  ARG_CHECK((N * oes) % 16 == 0, "%s: N=%zu: the rows of C (%zu bytes) must be multiples of 16 bytes (TMA)", op, N,
            N * oes);
  ARG_CHECK(A && W && C, "%s: A, W and C must not be NULL", op);
  ARG_CHECK(isAligned(A, 16) && isAligned(W, 16) && isAligned(C, 16) && isAligned(gatheredA, 16),
            "%s: A=%p W=%p C=%p gatheredA=%p must be 16-byte aligned (TMA)", op, A, W, C, gatheredA);
  MKCCL_CHECK(fp8ScalesCheck(op, scales));
  const size_t m = M / static_cast<size_t>(nranks);
  const size_t cBytes = M * N * oes, aBytes = m * K, wBytes = N * K, gBytes = gatheredA ? M * K : 0;
  // Block scales: scaleA holds this rank's shard's rows.
  const size_t sABytes = fp8ScaleABytes(scales->kind, m, K), sWBytes = fp8ScaleWBytes(scales->kind, N, K);
  ARG_CHECK(!rangesOverlap(C, cBytes, A, aBytes) && !rangesOverlap(C, cBytes, W, wBytes) &&
                !rangesOverlap(C, cBytes, gatheredA, gBytes),
            "%s: C overlaps A, W or gatheredA", op);
  ARG_CHECK(!rangesOverlap(C, cBytes, scales->scaleA, sABytes) && !rangesOverlap(C, cBytes, scales->scaleW, sWBytes),
            "%s: C overlaps a scale", op);
  ARG_CHECK(!rangesOverlap(gatheredA, gBytes, W, wBytes) &&
                !rangesOverlap(gatheredA, gBytes, scales->scaleA, sABytes) &&
                !rangesOverlap(gatheredA, gBytes, scales->scaleW, sWBytes),
            "%s: gatheredA overlaps W or a scale", op);
  // In place: A is this rank's block of gatheredA.
  const bool inPlace = gatheredA && static_cast<const char*>(A) ==
                                        static_cast<const char*>(gatheredA) + static_cast<size_t>(rank) * aBytes;
  ARG_CHECK(inPlace || !rangesOverlap(gatheredA, gBytes, A, aBytes),
            "%s: gatheredA overlaps A without A being this rank's block of it", op);
  return mkcclSuccess;
}

}  // namespace mkccl
