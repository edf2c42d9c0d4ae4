// Public entry points of the GEMM engine and the fused ops: argument checks, then the op.
#include "mkccl.h"
#include "base/check.h"
#include "runtime/arg_checks.h"
#include "runtime/fused_args.h"
#include "runtime/ops.h"

using namespace mkccl;

namespace {

bool isGemmInType(mkcclDataType_t t) { return t == mkcclBfloat16 || t == mkcclFloat16; }
bool isGemmOutType(mkcclDataType_t t) { return t == mkcclBfloat16 || t == mkcclFloat16 || t == mkcclFloat32; }

mkcclResult_t checkDims(const char* op, size_t M, size_t N, size_t K) {
  ARG_CHECK(M >= 1 && N >= 1 && K >= 1, "%s: M=%zu N=%zu K=%zu: every dimension must be >= 1", op, M, N, K);
  ARG_CHECK(M <= kMaxTmaDim && N <= kMaxTmaDim && K <= kMaxTmaDim, "%s: M=%zu N=%zu K=%zu: dimensions must be < 2^31",
            op, M, N, K);
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
  ARG_CHECK(!rangesOverlap(C, M * N * oes, A, M * K * 2) && !rangesOverlap(C, M * N * oes, W, N * K * 2),
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
  ARG_CHECK(!rangesOverlap(C, maxRows * N * oes, A, maxRows * K * 2) &&
                !rangesOverlap(C, maxRows * N * oes, W, size_t(groups) * N * K * 2) &&
                !rangesOverlap(C, maxRows * N * oes, rowOffsets, (size_t(groups) + 1) * sizeof(int)),
            "%s: C overlaps an input", op);
  cudaGetLastError();
  MKCCL_CHECK(groupedGemmOp(A, W, C, rowOffsets, groups, maxRows, N, K, inType, outType, stream));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return setError(mkcclUnhandledCudaError, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
  return mkcclSuccess;
}

namespace {

// The device-side checks of resolved arguments (the pure ones are in fusedArgsResolve).
mkcclResult_t checkFusedDevice(const char* op, mkcclComm_t comm, cudaStream_t stream, const FusedArgs& a) {
  const int dev = comm->cudaDev;
  const size_t oes = typeSize(a.outType), bes = typeSize(a.biasType);
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkDevicePtr(a.A, matrixSpan(a.aRows, a.K, a.lda, 2), dev, op, "A"));
  for (int i = 0; i < a.numWeights; ++i) {
    const mkcclFusedWeight_t& w = a.w[i];
    MKCCL_CHECK(checkDevicePtr(w.W, matrixSpan(w.N, a.K, w.ldw, 2), dev, op, "W"));
    MKCCL_CHECK(checkDevicePtr(w.C, matrixSpan(a.cRows, w.N, w.ldc, oes), dev, op, "C"));
    if (w.bias) MKCCL_CHECK(checkDevicePtr(w.bias, w.N * bes, dev, op, "bias"));
  }
  if (a.gatheredA) MKCCL_CHECK(checkDevicePtr(a.gatheredA, a.M * a.K * 2, dev, op, "gatheredA"));
  return mkcclSuccess;
}

// Every fused call, short form or Ex: checks, then the op on the communicator's stream order.
mkcclResult_t fusedCall(const char* op, FusedKind kind, const mkcclFusedGemmArgs_t* args, mkcclComm_t comm,
                        cudaStream_t stream) {
  MKCCL_CHECK(commCheckUsable(comm, op));
  DeviceGuard guard(comm->cudaDev);
  FusedArgs a;
  MKCCL_CHECK(fusedArgsResolve(op, kind, comm->nranks, comm->rank, args, &a));
  MKCCL_CHECK(checkFusedDevice(op, comm, stream, a));
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) {
    switch (kind) {
      case FusedKind::AllGatherGemm: return allGatherGemmOp(ctx, a);
      case FusedKind::GemmReduceScatter: return gemmReduceScatterOp(ctx, a);
      default: return gemmAllReduceOp(ctx, a);
    }
  });
}

// The short forms' arguments: contiguous, no bias, output of the input type, one weight.
mkcclFusedGemmArgs_t shortArgs(const void* A, const void* W, void* C, void* gatheredA, size_t M, size_t N, size_t K,
                               mkcclDataType_t t) {
  mkcclFusedGemmArgs_t a = MKCCL_FUSED_GEMM_ARGS_INITIALIZER;
  a.A = A;
  a.M = M;
  a.K = K;
  a.inType = t;
  a.gatheredA = gatheredA;
  a.weights[0].W = W;
  a.weights[0].C = C;
  a.weights[0].N = N;
  return a;
}

}  // namespace

mkcclResult_t mkcclAllGatherGemm(const void* A, const void* W, void* C, void* gatheredA, size_t M, size_t N, size_t K,
                                 mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream) {
  const mkcclFusedGemmArgs_t a = shortArgs(A, W, C, gatheredA, M, N, K, datatype);
  return fusedCall("mkcclAllGatherGemm", FusedKind::AllGatherGemm, &a, comm, stream);
}

mkcclResult_t mkcclGemmReduceScatter(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                     mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream) {
  const mkcclFusedGemmArgs_t a = shortArgs(A, W, C, nullptr, M, N, K, datatype);
  return fusedCall("mkcclGemmReduceScatter", FusedKind::GemmReduceScatter, &a, comm, stream);
}

mkcclResult_t mkcclGemmAllReduce(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                 mkcclDataType_t datatype, mkcclComm_t comm, cudaStream_t stream) {
  const mkcclFusedGemmArgs_t a = shortArgs(A, W, C, nullptr, M, N, K, datatype);
  return fusedCall("mkcclGemmAllReduce", FusedKind::GemmAllReduce, &a, comm, stream);
}

mkcclResult_t mkcclAllGatherGemmEx(const mkcclFusedGemmArgs_t* args, mkcclComm_t comm, cudaStream_t stream) {
  return fusedCall("mkcclAllGatherGemmEx", FusedKind::AllGatherGemm, args, comm, stream);
}

mkcclResult_t mkcclGemmReduceScatterEx(const mkcclFusedGemmArgs_t* args, mkcclComm_t comm, cudaStream_t stream) {
  return fusedCall("mkcclGemmReduceScatterEx", FusedKind::GemmReduceScatter, args, comm, stream);
}

mkcclResult_t mkcclGemmAllReduceEx(const mkcclFusedGemmArgs_t* args, mkcclComm_t comm, cudaStream_t stream) {
  return fusedCall("mkcclGemmAllReduceEx", FusedKind::GemmAllReduce, args, comm, stream);
}
