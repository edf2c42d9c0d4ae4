// What every stream-ordered operation does around its launches, and the shared argument checks.
#include "runtime/enqueue.h"
#include "base/check.h"
#include "runtime/cudriver.h"

namespace mkccl {

DeviceGuard::DeviceGuard(int dev) {
  if (cudaGetDevice(&prev_) != cudaSuccess) {
    cudaGetLastError();
    prev_ = -1;
  }
  if (dev >= 0 && dev != prev_) cudaSetDevice(dev);
  else prev_ = -1;  // nothing to restore
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) cudaSetDevice(prev_);
}

bool streamCapturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

mkcclResult_t checkStream(cudaStream_t s, int dev, const char* opName) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return mkcclSuccess;
  // A capturing stream refuses queries such as cudaStreamGetDevice, and the refusal invalidates
  // the capture (seen on the H100 with CUDA 13): such a stream is taken as it is (a stream of
  // another device fails at the launch). cudaStreamIsCapturing itself is capture-safe.
  if (streamCapturing(s))
    return mkcclSuccess;
  cudaGetLastError();
  int sdev = -1;
  cudaError_t e = cudaStreamGetDevice(s, &sdev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return setError(mkcclInvalidArgument, "%s: stream %p is not a valid CUDA stream (%s)", opName, (void*)s,
                    cudaGetErrorString(e));
  }
  ARG_CHECK(sdev == dev, "%s: the stream belongs to device %d but the communicator uses device %d", opName, sdev, dev);
  return mkcclSuccess;
}

mkcclResult_t checkDevicePtr(const void* p, size_t bytes, int dev, const char* opName, const char* argName) {
  if (bytes == 0) return mkcclSuccess;
  ARG_CHECK(p != nullptr, "%s: %s is NULL", opName, argName);
  cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return setError(mkcclInvalidArgument, "%s: %s=%p is not a CUDA pointer (%s)", opName, argName, p,
                    cudaGetErrorString(e));
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      ARG_CHECK(a.device == dev, "%s: %s=%p is memory of device %d; the communicator uses device %d", opName,
                argName, p, a.device, dev);
      break;
    case cudaMemoryTypeManaged: break;
    case cudaMemoryTypeHost:
      return setError(mkcclInvalidArgument, "%s: %s=%p is host memory; device memory is needed", opName, argName, p);
    default:
      return setError(mkcclInvalidArgument, "%s: %s=%p is not device memory (not allocated by CUDA)", opName,
                      argName, p);
  }
  MKCCL_CHECK(cuDriverLoad());
  CUdeviceptr base = 0;
  size_t size = 0;
  if (cu().memGetAddressRange(&base, &size, (CUdeviceptr)p) == CUDA_SUCCESS) {
    const size_t left = (size_t)(base + size - (CUdeviceptr)p);
    ARG_CHECK(bytes <= left, "%s: %s=%p: %zu bytes run past the end of its allocation (%zu bytes left)", opName,
              argName, p, bytes, left);
  }
  return mkcclSuccess;
}

void fillDevComm(const mkcclComm* comm, uint64_t seq, DevComm* d) {
  *d = DevComm{};
  d->rank = comm->rank;
  d->nranks = comm->nranks;
  d->localRank = comm->localRank;
  d->localRanks = comm->localRanks;
  d->node = comm->node;
  d->nNodes = comm->nNodes;
  d->seq = seq;
  d->timeoutNs = (uint64_t)comm->cfg.timeoutMs * 1000000ull;
  for (int q = 0; q < comm->localRanks; ++q) d->peers[q] = comm->ws.peer[q];
  d->flagsBytes = comm->ws.flagsBytes;
  d->dataBytes = comm->ws.bytes - comm->ws.flagsBytes;
  d->err = comm->errDev;
  d->net = comm->netDev;
}

mkcclResult_t opBegin(mkcclComm_t comm, cudaStream_t stream, const char* opName, OpCtx* ctx) {
  MKCCL_CHECK(commCheckUsable(comm, opName));
  MKCCL_CHECK(checkStream(stream, comm->cudaDev, opName));
  cudaGetLastError();  // a stale launch error of ours must not be blamed on this call
  // A rank's calls run in call order on the device (the kernels' protocols rely on it), even when
  // the caller switches streams. Not for a call being captured into a graph: lastWork tracks the
  // eager work (what destroy waits for), and when a graph runs is the caller's ordering.
  if (comm->seq > 0 && stream != comm->lastStream && !streamCapturing(stream))
    CUDA_CHECK(cudaStreamWaitEvent(stream, comm->lastWork, 0));
  ctx->comm = comm;
  ctx->stream = stream;
  ctx->capturing = streamCapturing(stream);
  comm->capturing = ctx->capturing;  // for symScratchGet during this call
  if (ctx->capturing) comm->graphCaptured = true;
  fillDevComm(comm, ++comm->seq, &ctx->dev);
  MKCCL_TRACE("%s: call #%llu", opName, (unsigned long long)ctx->dev.seq);
  return mkcclSuccess;
}

void opNextKernel(OpCtx& ctx) {
  fillDevComm(ctx.comm, ++ctx.comm->seq, &ctx.dev);
  MKCCL_TRACE("call #%llu: next kernel of the call", (unsigned long long)ctx.dev.seq);
}

mkcclResult_t opEnd(OpCtx& ctx) {
  ctx.comm->capturing = false;
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return setError(mkcclUnhandledCudaError, "call #%llu: kernel launch failed: %s", (unsigned long long)ctx.dev.seq,
                    cudaGetErrorString(e));
  if (streamCapturing(ctx.stream)) return mkcclSuccess;  // (opBegin says why)
  CUDA_CHECK(cudaEventRecord(ctx.comm->lastWork, ctx.stream));
  ctx.comm->lastStream = ctx.stream;
  return mkcclSuccess;
}

int opMaxCtas(const mkcclComm* comm) {
  int n = comm->smCount;
  if (comm->cfg.maxCtas > 0 && comm->cfg.maxCtas < n) n = comm->cfg.maxCtas;
  return n;
}

size_t typeSize(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: case mkcclUint8: case mkcclFloat8e4m3: case mkcclFloat8e5m2: return 1;
    case mkcclFloat16: case mkcclBfloat16: return 2;
    case mkcclInt32: case mkcclUint32: case mkcclFloat32: return 4;
    case mkcclInt64: case mkcclUint64: case mkcclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(mkcclDataType_t t) {
  switch (t) {
    case mkcclInt8: return "int8";
    case mkcclUint8: return "uint8";
    case mkcclInt32: return "int32";
    case mkcclUint32: return "uint32";
    case mkcclInt64: return "int64";
    case mkcclUint64: return "uint64";
    case mkcclFloat16: return "fp16";
    case mkcclFloat32: return "fp32";
    case mkcclFloat64: return "fp64";
    case mkcclBfloat16: return "bf16";
    case mkcclFloat8e4m3: return "fp8e4m3";
    case mkcclFloat8e5m2: return "fp8e5m2";
    default: return "invalid";
  }
}

const char* redOpName(mkcclRedOp_t op) {
  switch (op) {
    case mkcclSum: return "sum";
    case mkcclProd: return "prod";
    case mkcclMax: return "max";
    case mkcclMin: return "min";
    case mkcclAvg: return "avg";
    default: return "invalid";
  }
}

}  // namespace mkccl
