// Public entry points of GEMM+ReduceScatter / GEMM+AllReduce with e4m3 inputs: argument checks (the
// pure ones first, rs_fp8_args.cc), then the op (src/ops/gemm_rs/gemm_rs_fp8.cu) on the
// communicator's stream order.
#include "mkccl.h"
#include "base/check.h"
#include "runtime/arg_checks.h"
#include "runtime/comm.h"
#include "runtime/enqueue.h"
#include "runtime/ops_fp8.h"
#include "runtime/rs_fp8_args.h"

using namespace mkccl;

namespace {

mkcclResult_t reduceFp8Call(const char* op, bool allReduce, const void* A, const void* W, void* C, size_t M, size_t N,
                            size_t K, const mkcclFp8Scales_t* scales, mkcclDataType_t outType, mkcclComm_t comm,
                            cudaStream_t stream) {
  MKCCL_CHECK(commCheckUsable(comm, op));
  MKCCL_CHECK(gemmReduceFp8ArgsCheck(op, allReduce, comm->nranks, A, W, C, M, N, K, scales, outType));
  DeviceGuard guard(comm->cudaDev);
  const int dev = comm->cudaDev;
  const size_t rows = allReduce ? M : M / static_cast<size_t>(comm->nranks);
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkDevicePtr(A, M * K, dev, op, "A"));
  MKCCL_CHECK(checkDevicePtr(W, N * K, dev, op, "W"));
  MKCCL_CHECK(checkDevicePtr(C, rows * N * 2, dev, op, "C"));
  const mkcclFp8ScaleKind_t kind = scales->kind;
  MKCCL_CHECK(checkDevicePtr(scales->scaleA, fp8ScaleABytes(kind, M, K), dev, op, "scales->scaleA"));
  MKCCL_CHECK(checkDevicePtr(scales->scaleW, fp8ScaleWBytes(kind, N, K), dev, op, "scales->scaleW"));
  const float* sA = scales->scaleA;
  const float* sW = scales->scaleW;
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) {
    return allReduce ? gemmAllReduceFp8Op(ctx, A, W, C, M, N, K, kind, sA, sW, outType)
                     : gemmReduceScatterFp8Op(ctx, A, W, C, M, N, K, kind, sA, sW, outType);
  });
}

}  // namespace

mkcclResult_t mkcclGemmReduceScatterFp8(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                        const mkcclFp8Scales_t* scales, mkcclDataType_t outType, mkcclComm_t comm,
                                        cudaStream_t stream) {
  return reduceFp8Call("mkcclGemmReduceScatterFp8", false, A, W, C, M, N, K, scales, outType, comm, stream);
}

mkcclResult_t mkcclGemmAllReduceFp8(const void* A, const void* W, void* C, size_t M, size_t N, size_t K,
                                    const mkcclFp8Scales_t* scales, mkcclDataType_t outType, mkcclComm_t comm,
                                    cudaStream_t stream) {
  return reduceFp8Call("mkcclGemmAllReduceFp8", true, A, W, C, M, N, K, scales, outType, comm, stream);
}
