// Checks of mkcclAllGatherGemmFp8's arguments (ag_fp8_args.h).
#include "runtime/ag_fp8_args.h"
#include <stdint.h>
#include "base/check.h"

namespace mkccl {
namespace {

constexpr size_t kMaxDim = (1ull << 31) - 1;  // TMA dimensions are 32-bit

size_t outBytes(mkcclDataType_t t) {
  return t == mkcclFloat32 ? 4 : (t == mkcclBfloat16 || t == mkcclFloat16) ? 2 : 0;
}

bool overlaps(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = static_cast<const char*>(pa);
  const char* b = static_cast<const char*>(pb);
  return a && b && na && nb && a < b + nb && b < a + na;
}

bool aligned(const void* p, uintptr_t to) { return (reinterpret_cast<uintptr_t>(p) & (to - 1)) == 0; }

}  // namespace

mkcclResult_t agGemmFp8ArgsCheck(const char* op, int nranks, int rank, const void* A, const void* W, const void* C,
                                 const void* gatheredA, size_t M, size_t N, size_t K, const mkcclFp8Scales_t* scales,
                                 mkcclDataType_t outType) {
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxDim && N <= kMaxDim && K <= kMaxDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31", op, M,
            N, K);
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
  ARG_CHECK(aligned(A, 16) && aligned(W, 16) && aligned(C, 16) && aligned(gatheredA, 16),
            "%s: A=%p W=%p C=%p gatheredA=%p must be 16-byte aligned (TMA)", op, A, W, C, gatheredA);
  ARG_CHECK(scales != nullptr, "%s: scales must not be NULL", op);
  ARG_CHECK(scales->size >= sizeof(mkcclFp8Scales_t),
            "%s: scales->size=%zu: set it to sizeof(mkcclFp8Scales_t) (%zu) or use MKCCL_FP8_SCALES_INIT", op,
            scales->size, sizeof(mkcclFp8Scales_t));
  ARG_CHECK(scales->kind == mkcclFp8ScaleTensor || scales->kind == mkcclFp8ScaleBlock,
            "%s: scales->kind=%d must be mkcclFp8ScaleTensor or mkcclFp8ScaleBlock", op,
            static_cast<int>(scales->kind));
  if (scales->kind == mkcclFp8ScaleBlock)
    return setError(mkcclInvalidUsage,
                    "%s: block scales (mkcclFp8ScaleBlock) are not implemented for AllGather+GEMM yet: use "
                    "mkcclFp8ScaleTensor, or mkcclAllGather of A and its scales then mkcclGemmFp8",
                    op);
  ARG_CHECK(scales->scaleA && scales->scaleW, "%s: scales->scaleA and scales->scaleW must not be NULL", op);
  ARG_CHECK(aligned(scales->scaleA, 4) && aligned(scales->scaleW, 4), "%s: the scales must be 4-byte aligned floats",
            op);
  const size_t m = M / static_cast<size_t>(nranks);
  const size_t cBytes = M * N * oes, aBytes = m * K, wBytes = N * K, gBytes = gatheredA ? M * K : 0;
  ARG_CHECK(!overlaps(C, cBytes, A, aBytes) && !overlaps(C, cBytes, W, wBytes) && !overlaps(C, cBytes, gatheredA, gBytes),
            "%s: C overlaps A, W or gatheredA", op);
  ARG_CHECK(!overlaps(C, cBytes, scales->scaleA, 4) && !overlaps(C, cBytes, scales->scaleW, 4),
            "%s: C overlaps a scale", op);
  ARG_CHECK(!overlaps(gatheredA, gBytes, W, wBytes) && !overlaps(gatheredA, gBytes, scales->scaleA, 4) &&
                !overlaps(gatheredA, gBytes, scales->scaleW, 4),
            "%s: gatheredA overlaps W or a scale", op);
  // In place: A is this rank's block of gatheredA.
  const bool inPlace = gatheredA && static_cast<const char*>(A) ==
                                        static_cast<const char*>(gatheredA) + static_cast<size_t>(rank) * aBytes;
  ARG_CHECK(inPlace || !overlaps(gatheredA, gBytes, A, aBytes),
            "%s: gatheredA overlaps A without A being this rank's block of it", op);
  return mkcclSuccess;
}

}  // namespace mkccl
