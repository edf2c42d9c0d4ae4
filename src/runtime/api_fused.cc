// Public entry points of the GEMM engine and the fused ops: argument checks, then the op.
#include "mkccl.h"
#include "base/check.h"
#include "runtime/ops.h"

using namespace mkccl;

namespace {

constexpr size_t kMaxDim = (1ull << 31) - 1;  // TMA dimensions are 32-bit

bool isGemmInType(mkcclDataType_t t) { return t == mkcclBfloat16 || t == mkcclFloat16; }
bool isGemmOutType(mkcclDataType_t t) { return t == mkcclBfloat16 || t == mkcclFloat16 || t == mkcclFloat32; }

bool overlaps(const void* pa, size_t na, const void* pb, size_t nb) {
  const char* a = (const char*)pa;
  const char* b = (const char*)pb;
  return na && nb && a < b + nb && b < a + na;
}

mkcclResult_t checkDims(const char* op, size_t M, size_t N, size_t K) {
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxDim && N <= kMaxDim && K <= kMaxDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31", op, M,
            N, K);
  return mkcclSuccess;
}

// TMA's rules: row pitches and base addresses are multiples of 16 bytes.
mkcclResult_t checkPitch(const char* op, const char* what, size_t elems, size_t esize) {
  ARG_CHECK((elems * esize) % 16 == 0,
            "%s: the row pitch of %s is %zu elements (%zu bytes): it must be a multiple of 16 bytes (TMA)", op, what,
            elems, elems * esize);
  return mkcclSuccess;
}

mkcclResult_t checkAligned(const char* op, const char* what, const void* p) {
  ARG_CHECK(((uintptr_t)p & 15) == 0, "%s: %s=%p must be 16-byte aligned (TMA)", op, what, p);
  return mkcclSuccess;
}

mkcclResult_t checkMatrix(const char* op, const char* what, const void* p, size_t rows, size_t cols, size_t esize,
                          int dev) {
  MKCCL_CHECK(checkAligned(op, what, p));
  return checkDevicePtr(p, rows * cols * esize, dev, op, what);
}

mkcclResult_t checkHopper(int dev, const char* op) {
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9) return setError(mkcclInvalidUsage, "%s: device %d is not a Hopper GPU (sm_90 is required)", op, dev);
  return mkcclSuccess;
}

// The shared checks of the three fused ops. aRows x K is A's local shape, cRows x N is C's.
mkcclResult_t checkFused(const char* op, mkcclComm_t comm, cudaStream_t stream, const void* A, size_t aRows,
                         const void* W, void* C, size_t cRows, size_t M, size_t N, size_t K, mkcclDataType_t t,
                         bool rowsSplit = true) {
  MKCCL_CHECK(checkDims(op, M, N, K));
  ARG_CHECK(isGemmInType(t), "%s: datatype must be mkcclBfloat16 or mkcclFloat16", op);
  ARG_CHECK(!rowsSplit || M % (size_t)comm->nranks == 0, "%s: M=%zu must be divisible by the number of ranks (%d)", op, M,
            comm->nranks);
  MKCCL_CHECK(checkPitch(op, "A and W (K)", K, 2));
  MKCCL_CHECK(checkPitch(op, "C (N)", N, 2));
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, op));
  MKCCL_CHECK(checkMatrix(op, "A", A, aRows, K, 2, comm->cudaDev));
  MKCCL_CHECK(checkMatrix(op, "W", W, N, K, 2, comm->cudaDev));
  MKCCL_CHECK(checkMatrix(op, "C", C, cRows, N, 2, comm->cudaDev));
  ARG_CHECK(!overlaps(C, cRows * N * 2, A, aRows * K * 2) && !overlaps(C, cRows * N * 2, W, N * K * 2),
            "%s: C overlaps an input", op);
  return mkcclSuccess;
}

}  // namespace

mkcclResult_t mkcclGemm(const void* A, const void* W, void* C, size_t M, size_t N, size_t K, mkcclDataType_t inType,
                        mkcclDataType_t outType, cudaStream_t stream) {
  const char* op = "mkcclGemm";
  MKCCL_CHECK(checkDims(op, M, N, K));
  ARG_CHECK(isGemmInType(inType), "%s: inType must be mkcclBfloat16 or mkcclFloat16", op);
  ARG_CHECK(isGemmOutType(outType), "%s: outType must be mkcclBfloat16, mkcclFloat16 or mkcclFloat32", op);
  const size_t oes = typeSize(outType);
  MKCCL_CHECK(checkPitch(op, "A and W (K)", K, 2));
  MKCCL_CHECK(checkPitch(op, "C (N)", N, oes));
  ARG_CHECK(A && W && C, "%s: A, W and C must not be NULL", op);
  MKCCL_CHECK(checkAligned(op, "A", A));
  MKCCL_CHECK(checkAligned(op, "W", W));
  MKCCL_CHECK(checkAligned(op, "C", C));
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  MKCCL_CHECK(checkHopper(dev, op));
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkMatrix(op, "A", A, M, K, 2, dev));
  MKCCL_CHECK(checkMatrix(op, "W", W, N, K, 2, dev));
  MKCCL_CHECK(checkMatrix(op, "C", C, M, N, oes, dev));
  ARG_CHECK(!overlaps(C, M * N * oes, A, M * K * 2) && !overlaps(C, M * N * oes, W, N * K * 2),
            "%s: C overlaps an input", op);
  cudaGetLastError();
  MKCCL_CHECK(gemmOp(A, W, C, M, N, K, inType, outType, stream));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return setError(mkcclUnhandledCudaError, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
  return mkcclSuccess;
}

mkcclResult_t mkcclGroupedGemm(const void* A, const void* W, void* C, const int* rowOffsets, int groups,
                               size_t maxRows, size_t N, size_t K, mkcclDataType_t inType, mkcclDataType_t outType,
                               cudaStream_t stream) {
  const char* op = "mkcclGroupedGemm";
  ARG_CHECK(groups >= 1, "%s: groups=%d: expected >= 1", op, groups);
  ARG_CHECK(maxRows <= (size_t(1) << 31) - 128, "%s: maxRows=%zu: at most 2^31 - 128 rows", op, maxRows);
  ARG_CHECK(size_t(groups) * N < (size_t(1) << 31), "%s: groups x N = %zu: W has at most 2^31 rows", op,
            size_t(groups) * N);
  MKCCL_CHECK(checkDims(op, maxRows, N, K));
  ARG_CHECK(isGemmInType(inType), "%s: inType must be mkcclBfloat16 or mkcclFloat16", op);
  ARG_CHECK(isGemmOutType(outType), "%s: outType must be mkcclBfloat16, mkcclFloat16 or mkcclFloat32", op);
  const size_t oes = typeSize(outType);
  MKCCL_CHECK(checkPitch(op, "A and W (K)", K, 2));
  MKCCL_CHECK(checkPitch(op, "C (N)", N, oes));
  ARG_CHECK(A && W && C && rowOffsets, "%s: A, W, C and rowOffsets must not be NULL", op);
  MKCCL_CHECK(checkAligned(op, "A", A));
  MKCCL_CHECK(checkAligned(op, "W", W));
  MKCCL_CHECK(checkAligned(op, "C", C));
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  MKCCL_CHECK(checkHopper(dev, op));
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkMatrix(op, "A", A, maxRows, K, 2, dev));
  MKCCL_CHECK(checkMatrix(op, "W", W, size_t(groups) * N, K, 2, dev));
  MKCCL_CHECK(checkMatrix(op, "C", C, maxRows, N, oes, dev));
  MKCCL_CHECK(checkDevicePtr(rowOffsets, (size_t(groups) + 1) * sizeof(int), dev, op, "rowOffsets"));
  ARG_CHECK(!overlaps(C, maxRows * N * oes, A, maxRows * K * 2) &&
                !overlaps(C, maxRows * N * oes, W, size_t(groups) * N * K * 2) &&
                !overlaps(C, maxRows * N * oes, rowOffsets, (size_t(groups) + 1) * sizeof(int)),
            "%s: C overlaps an input", op);
  cudaGetLastError();
  MKCCL_CHECK(groupedGemmOp(A, W, C, rowOffsets, groups, maxRows, N, K, inType, outType, stream));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return setError(mkcclUnhandledCudaError, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
  return mkcclSuccess;
}

mkcclResult_t mkcclAllGatherGemm(const void* A, const void* W, void* C, void* gatheredA, size_t M, size_t N, size_t K,
                                 mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream) {
  const char* op = "mkcclAllGatherGemm";
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkFused(op, comm, stream, A, M / comm->nranks, W, C, M, M, N, K, datatype));
  if (gatheredA) {
    MKCCL_CHECK(checkMatrix(op, "gatheredA", gatheredA, M, K, 2, comm->cudaDev));
    ARG_CHECK(!overlaps(gatheredA, M * K * 2, C, M * N * 2) && !overlaps(gatheredA, M * K * 2, W, N * K * 2),
              "%s: gatheredA overlaps C or W", op);
    const bool inPlace = (const char*)A == (const char*)gatheredA + (size_t)comm->rank * (M / comm->nranks) * K * 2;
    ARG_CHECK(inPlace || !overlaps(gatheredA, M * K * 2, A, M / comm->nranks * K * 2),
              "%s: gatheredA overlaps A without A being this rank's block of it", op);
  }
  return opEnqueue(comm, stream, op,
                   [&](OpCtx& ctx) { return allGatherGemmOp(ctx, A, W, C, gatheredA, M, N, K, datatype); });
}

mkcclResult_t mkcclGemmReduceScatter(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                     mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream) {
  const char* op = "mkcclGemmReduceScatter";
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkFused(op, comm, stream, A, M, W, C, M / comm->nranks, M, N, K, datatype));
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) { return gemmReduceScatterOp(ctx, A, W, C, M, N, K, datatype); });
}

mkcclResult_t mkcclGemmAllReduce(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                 mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream) {
  const char* op = "mkcclGemmAllReduce";
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  MKCCL_CHECK(checkFused(op, comm, stream, A, M, W, C, M, M, N, K, datatype, /*rowsSplit=*/false));
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) { return gemmAllReduceOp(ctx, A, W, C, M, N, K, datatype); });
}
