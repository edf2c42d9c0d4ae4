// Public entry point of AllGather+GEMM with e4m3 inputs: argument checks (the pure ones first,
// ag_fp8_args.cc), then the op (src/ops/ag_gemm/ag_gemm.cu) on the communicator's stream order.
#include "mkccl.h"
#include "base/check.h"
#include "runtime/ag_fp8_args.h"
#include "runtime/arg_checks.h"
#include "runtime/comm.h"
#include "runtime/enqueue.h"
#include "runtime/ops_fp8.h"

using namespace mkccl;

mkcclResult_t mkcclAllGatherGemmFp8(const void* A, const void* W, void* C, void* gatheredA, size_t M, size_t N,
                                    size_t K, const mkcclFp8Scales_t* scales, mkcclDataType_t outType,
                                    mkcclComm_t comm, cudaStream_t stream) {
  const char* op = "mkcclAllGatherGemmFp8";
  MKCCL_CHECK(commCheckUsable(comm, op));
  MKCCL_CHECK(agGemmFp8ArgsCheck(op, comm->nranks, comm->rank, A, W, C, gatheredA, M, N, K, scales, outType));
  DeviceGuard guard(comm->cudaDev);
  const int dev = comm->cudaDev;
  const size_t oes = outType == mkcclFloat32 ? 4 : 2, m = M / static_cast<size_t>(comm->nranks);
  MKCCL_CHECK(checkStream(stream, dev, op));
  MKCCL_CHECK(checkDevicePtr(A, m * K, dev, op, "A"));
  MKCCL_CHECK(checkDevicePtr(W, N * K, dev, op, "W"));
  MKCCL_CHECK(checkDevicePtr(C, M * N * oes, dev, op, "C"));
  if (gatheredA) MKCCL_CHECK(checkDevicePtr(gatheredA, M * K, dev, op, "gatheredA"));
  const mkcclFp8ScaleKind_t kind = scales->kind;
  MKCCL_CHECK(checkDevicePtr(scales->scaleA, fp8ScaleABytes(kind, m, K), dev, op, "scales->scaleA"));
  MKCCL_CHECK(checkDevicePtr(scales->scaleW, fp8ScaleWBytes(kind, N, K), dev, op, "scales->scaleW"));
  const float* sA = scales->scaleA;
  const float* sW = scales->scaleW;
  return opEnqueue(comm, stream, op, [&](OpCtx& ctx) {
    return allGatherGemmFp8Op(ctx, A, W, C, gatheredA, M, N, K, kind, sA, sW, outType);
  });
}
