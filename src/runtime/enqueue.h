// What every stream-ordered operation does around its kernel launch.
#pragma once
#include <cuda_runtime.h>
#include "mkccl.h"
#include "base/check.h"
#include "runtime/comm.h"
#include "kernels/abi/devcomm.h"

namespace mkccl {

// Sets the comm's device current for the call's duration and restores the caller's on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev);
  ~DeviceGuard();
 private:
  int prev_ = -1;
};

struct OpCtx {
  mkcclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  bool capturing = false;  // the stream is being captured into a CUDA graph (docs/GRAPHS.md)
  DevComm dev{};  // with this call's sequence number
};

// The kernels' view of the communicator for a call with sequence number seq (no checks).
void fillDevComm(const mkcclComm* comm, uint64_t seq, DevComm* d);

// Checks the comm (usable, no pending error) and the stream (on the comm's device), takes the next
// sequence number and fills ctx. The caller holds a DeviceGuard for comm->cudaDev.
mkcclResult_t opBegin(mkcclComm_t comm, cudaStream_t stream, const char* opName, OpCtx* ctx);
// Between two kernels of one call that each run a protocol of their own (GEMM+AllReduce's fused
// ReduceScatter, then its AllGather): the next sequence number, as if the second were a call of
// its own. Every rank runs the same kernels for a call, so the numbers stay in step.
void opNextKernel(OpCtx& ctx);
// After the launches: checks for launch errors and records the comm's lastWork event.
mkcclResult_t opEnd(OpCtx& ctx);

// The stream is being captured into a CUDA graph.
bool streamCapturing(cudaStream_t s);

// A checked call's whole enqueue: opBegin, op(ctx) (the launches), opEnd.
template <class Op>
mkcclResult_t opEnqueue(mkcclComm_t comm, cudaStream_t stream, const char* name, Op op) {
  OpCtx ctx;
  MKCCL_CHECK(opBegin(comm, stream, name, &ctx));
  MKCCL_CHECK(op(ctx));
  return opEnd(ctx);
}

// SMs a kernel of this comm may use (config maxCtas, else all).
int opMaxCtas(const mkcclComm* comm);

// Element size of a data type (0 for an invalid one).
size_t typeSize(mkcclDataType_t t);
const char* typeName(mkcclDataType_t t);
const char* redOpName(mkcclRedOp_t op);

// Argument helpers shared by the API entry points.
// Non-null (unless bytes == 0) and a device pointer of `dev` (or managed memory).
mkcclResult_t checkDevicePtr(const void* p, size_t bytes, int dev, const char* opName, const char* argName);
// The stream belongs to device dev (the legacy/per-thread default streams are accepted).
mkcclResult_t checkStream(cudaStream_t s, int dev, const char* opName);

}  // namespace mkccl
